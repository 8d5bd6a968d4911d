"""Several runs on one figure: run directories written as a run writes them, a live one appending,
the config differences, and the widget that lists and draws the runs under a folder."""
from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import srl_lab
from srl_lab.comparison import LINE_STYLES, config_differences
from srl_lab.curves import EPISODE_PANELS
from srl_lab.notebook.compare_view import CompareView
from srl_lab.system.metrics import MetricsLog

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def cartpole_episode(i: int) -> dict[str, float]:
    return {"return": float(i), "length": 10.0}


def hide_and_seek_episode(i: int) -> dict[str, float]:
    return {"hider_return": float(i), "seeker_return": -float(i), "hidden_fraction": (i % 10) / 10,
            "return": 0.0, "length": 80.0}


def report(n: int, episodes: list[dict[str, float]], start: float) -> dict:
    """A trainer's metrics record: samples consumed so far, its episodes and its losses."""
    return {"role": "trainer", "srl_worker": "trainer-0", "inc": 1, "time": start + 30 * n, "version": n,
            "env_steps_consumed": 1000 * n, "episodes": episodes,
            "train": {"policy_loss": 0.1, "value_loss": 1.0 / (n + 1), "entropy": 0.6}}


def add_reports(log: MetricsLog, reports: range, episode=cartpole_episode, start: float = 1000.0) -> None:
    for n in reports:
        log.add(report(n, [episode(10 * n + i) for i in range(10)], start))


def make_run(path: Path, config: srl_lab.ExperimentConfig, reports: int = 8, episode=cartpole_episode,
             start: float = 1000.0) -> Path:
    """A run directory as a run leaves it: config.json and the metrics.jsonl its MetricsLog wrote."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"run_id": path.name, "run_ids": [path.name],
                                                  **config.to_dict()}))
    log = MetricsLog(str(path / "metrics.jsonl"))
    add_reports(log, range(reports), episode, start)
    log.close()
    return path


@pytest.fixture
def two_runs(tmp_path) -> tuple[Path, Path]:
    fast = srl_lab.ExperimentConfig(ppo=srl_lab.PPOConfig(lr=1e-3))
    slow = srl_lab.ExperimentConfig()
    return (make_run(tmp_path / "runs" / "fast", fast, start=1000.0),
            make_run(tmp_path / "runs" / "slow", slow, reports=5, start=5000.0))


def drawn(fig) -> dict[str, list]:
    """Legend title -> the rolling-mean lines drawn on that axes (raw lines carry no label)."""
    return {ax.get_legend().get_title().get_text(): [line for line in ax.get_lines()
                                                     if not line.get_label().startswith("_")]
            for ax in fig.axes}


def legend_texts(legend) -> list[str]:
    return [text.get_text() for text in legend.get_texts()]


def run_of(line) -> str:
    return line.get_label().split(": ")[0]


def test_every_axes_overlays_both_runs_in_their_own_colours(two_runs):
    comparison = srl_lab.compare([str(p) for p in two_runs])
    assert comparison.labels == ["fast", "slow"]
    fig = comparison.figure()
    panels = drawn(fig)
    assert set(panels) == {"return", "losses"}
    assert [line.get_label() for line in panels["return"]] == ["fast: return", "slow: return"]
    for ax, (title, lines) in zip(fig.axes, panels.items()):
        assert {run_of(line) for line in lines} == {"fast", "slow"}, title
        colours = {run_of(line): line.get_color() for line in lines}
        assert colours["fast"] != colours["slow"]
        for line in lines:  # each rolling mean has its raw values behind it, faint, in its colour
            raw = [r for r in ax.get_lines()
                   if r.get_label().startswith("_") and r.get_color() == line.get_color()]
            assert raw and all(r.get_alpha() < 0.5 and r.get_zorder() < line.get_zorder() for r in raw)
    assert legend_texts(fig.axes[1].get_legend()) == ["policy_loss", "value_loss", "entropy"]  # keys by style
    (runs,) = fig.legends  # runs by colour, once for the figure
    assert legend_texts(runs) == ["fast", "slow"]
    assert [h.get_color() for h in runs.legend_handles] == [line.get_color() for line in panels["return"]]
    fast, slow = panels["return"]
    assert fast.get_xdata().max() == 7000 and slow.get_xdata().max() == 4000  # samples trained
    fig.draw_without_rendering()  # lays the figure out as saving it does
    for ax in fig.axes:  # units on both axes, legends above the data
        assert ax.get_xlabel() == "samples trained (agent steps)" and ax.get_ylabel()
        assert ax.get_legend().get_window_extent().y0 >= ax.get_window_extent().y1 - 1
        assert runs.get_window_extent().y0 >= ax.get_legend().get_window_extent().y1 - 1


def test_time_is_measured_from_each_runs_first_record(two_runs):
    fig = srl_lab.compare(two_runs, x="time").figure()  # Path objects work as well as strings
    fast, slow = drawn(fig)["return"]
    assert fast.get_xdata()[0] == 0 and slow.get_xdata()[0] == 0  # started 4000 s apart
    assert fast.get_xdata().max() == 210 and slow.get_xdata().max() == 120
    assert fig.axes[0].get_xlabel() == "wall-clock time (s)"
    with pytest.raises(ValueError, match="env_steps"):
        srl_lab.compare(two_runs, x="wall")


def test_differences_name_the_changed_field_and_show_above_the_figure(two_runs, tmp_path):
    comparison = srl_lab.compare(two_runs)
    assert comparison.differences == {"ppo.lr": [1e-3, 2.5e-4]}  # run_id and run_ids differ but say nothing
    page = comparison._repr_html_()
    assert page.index("ppo.lr") < page.index("<img")
    assert "<th>fast</th>" in page and "<th>slow</th>" in page
    image = re.search(r"src='data:image/png;base64,([^']+)'", page).group(1)
    assert base64.b64decode(image).startswith(PNG_SIGNATURE)
    saved = comparison.save(tmp_path / "both.png")
    assert Path(saved).read_bytes().startswith(PNG_SIGNATURE)
    assert comparison.png().startswith(PNG_SIGNATURE)
    assert "configs do not differ" in srl_lab.compare([two_runs[0], two_runs[0]])._repr_html_()


def test_differences_flatten_sections_and_keep_stored_strings():
    configs = [{"run_id": "a", "env": {"id": None, "factory": "<callable Maze>", "kwargs": {"size": 5}},
                "policy": {"hidden": [64, 64]}, "seed": 0},
               {"run_id": "b", "env": {"id": None, "factory": "<callable Maze>", "kwargs": {}},
                "policy": {"hidden": [128, 128]}, "seed": 0}]
    assert config_differences(configs) == {"env.kwargs.size": [5, None],
                                           "policy.hidden": [[64, 64], [128, 128]]}
    configs[1]["env"]["factory"] = "<callable Cave>"
    assert config_differences(configs)["env.factory"] == ["<callable Maze>", "<callable Cave>"]


def test_a_path_that_is_not_a_run_is_named(tmp_path, two_runs):
    with pytest.raises(FileNotFoundError, match=r"'.*nowhere' is not a srl_lab run directory: .* does not"):
        srl_lab.compare([two_runs[0], str(tmp_path / "nowhere")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty.* holds no metrics.jsonl"):
        srl_lab.compare([str(tmp_path / "empty")])
    with pytest.raises(ValueError, match="at least one run"):
        srl_lab.compare([])
    with pytest.raises(ValueError, match="one label per run"):
        srl_lab.compare(two_runs, labels=["only one"])
    with pytest.raises(TypeError, match="run directory"):
        srl_lab.compare([42])


def test_a_directory_still_being_written_shows_new_data_on_the_next_render(two_runs):
    comparison = srl_lab.compare(two_runs)
    before = drawn(comparison.figure())["return"][1].get_xdata().max()
    live = MetricsLog(str(two_runs[1] / "metrics.jsonl"), resume=True)  # the run keeps training elsewhere
    add_reports(live, range(5, 9), start=5000.0)
    live.close()
    after = drawn(comparison.figure())["return"][1].get_xdata().max()
    assert (before, after) == (4000, 8000)


def test_live_runs_and_reopened_runs_compare_from_memory(two_runs):
    log = MetricsLog(None)
    add_reports(log, range(3))
    live = SimpleNamespace(run_dir=str(two_runs[0]), run_id="fast-2", metrics=log,
                           config=srl_lab.ExperimentConfig(seed=7))  # what a Run holds
    comparison = srl_lab.compare([srl_lab.open_run(str(two_runs[0])), live])
    assert comparison.labels == ["fast (1)", "fast (2)"]  # the same directory name, made unique
    assert comparison.differences == {"ppo.lr": [1e-3, 2.5e-4], "seed": [0, 7]}
    first, second = drawn(comparison.figure())["return"]
    assert second.get_label() == "fast (2): return"
    assert second.get_xdata().max() == 2000  # the in-memory log, not the file it shares a name with
    add_reports(log, range(3, 4))
    assert drawn(comparison.figure())["return"][1].get_xdata().max() == 3000
    assert srl_lab.compare(two_runs, labels=["lr 1e-3", "lr 2.5e-4"]).labels == ["lr 1e-3", "lr 2.5e-4"]


def test_several_keys_in_a_panel_get_their_own_line_styles(tmp_path):
    config = srl_lab.ExperimentConfig(name="hide_and_seek")
    names = ("self-play", "mixed")
    runs = [make_run(tmp_path / name, config, episode=hide_and_seek_episode) for name in names]
    fig = srl_lab.compare(runs).figure()
    panels = drawn(fig)
    assert "return" not in panels  # the zero-sum mean agent return says nothing in a team game
    team = {line.get_label(): line for line in panels["team returns"]}
    assert set(team) == {f"{run}: {key}" for run in names for key in ("hider_return", "seeker_return")}
    for run in names:
        hider, seeker = team[f"{run}: hider_return"], team[f"{run}: seeker_return"]
        assert hider.get_color() == seeker.get_color()
        assert (hider.get_linestyle(), seeker.get_linestyle()) == ("-", "--")
    assert team["self-play: hider_return"].get_color() != team["mixed: hider_return"].get_color()
    legend = fig.axes[0].get_legend()
    assert legend_texts(legend) == ["hider_return", "seeker_return"]
    assert [h.get_linestyle() for h in legend.legend_handles] == ["-", "--"]
    assert {run_of(line) for line in panels["fraction of play steps hidden"]} == set(names)
    assert len(LINE_STYLES) >= max(len(spec.keys) for spec in EPISODE_PANELS)


def test_compare_view_lists_the_runs_and_draws_the_chosen_ones(two_runs):
    root = two_runs[0].parent
    (root / "notes").mkdir()  # not a run: left out
    os.utime(two_runs[0] / "config.json", (1.0e9, 1.0e9))  # "fast" started long before "slow"
    os.utime(two_runs[1] / "config.json", (1.5e9, 1.5e9))
    view = CompareView(str(root), current=str(two_runs[0]))
    assert "srl-compare" in view.widget._dom_classes and "srl-compare-image" in view.image._dom_classes
    assert [label for label, _ in view.runs.options] == ["slow", "fast"]  # newest first
    assert view.runs.value == (str(two_runs[0]),)  # the current run preselected
    view.render()
    assert "one run" in view.differences.value and bytes(view.image.value).startswith(PNG_SIGNATURE)
    view.runs.value = tuple(str(p) for p in two_runs)
    view.x_axis.value = "time"
    view.button.click()
    assert bytes(view.image.value).startswith(PNG_SIGNATURE)
    assert "ppo.lr" in view.differences.value and "<th>slow</th>" in view.differences.value
    make_run(root / "newer", srl_lab.ExperimentConfig())
    assert [os.path.basename(p) for p in view.refresh()] == ["newer", "slow", "fast"]
    assert len(view.runs.value) == 2  # the selection survives a re-scan
    view.runs.value = ()
    view.render()
    assert "select one or more runs" in view.differences.value
    view.close()
    assert view.widget.comm is None and view.image.comm is None


def test_compare_view_of_a_missing_folder_says_so(tmp_path):
    view = CompareView(str(tmp_path / "runs"))
    assert view.runs.options == () and "no run directories" in view.differences.value
