"""Several policies in the curves, the headline, the worker table and the opponent pools: each policy
is shown by name, and single-policy and hide-and-seek runs look as they did. No cluster: the metrics
log is fed trainer records by hand, as the trainers of a two-policy run send them."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

import srl_lab
from srl_lab.curves import build_figure, render_png, smoothing_window
from srl_lab.notebook.pools import TEAM_HEADER, pool_rows, pools_html
from srl_lab.notebook.table import HEADER, rows_html, worker_rows
from srl_lab.system.metrics import MetricsLog, headline, progress_postfix, rolling_mean

POLICIES = ("pointer", "matcher")
LOSSES = {"pointer": 0.5, "matcher": 2.0}  # each policy's constant value loss, to tell the lines apart


def pointer_return(n: int, i: int) -> float:
    return float(n % 7 + i)


def matcher_return(n: int, i: int) -> float:
    return 100.0 + n


def two_policy_records(reports: int = 60, per_report: int = 3, **extra: float) -> list[dict]:
    """Trainer records of a two-policy run: trainer-0 (pointer) and trainer-1 (matcher) take turns."""
    records, consumed = [], {"trainer-0": 0, "trainer-1": 0}
    for n in range(reports):
        policy = POLICIES[n % 2]
        trainer = f"trainer-{n % 2}"
        consumed[trainer] += 500
        value = pointer_return if policy == "pointer" else matcher_return
        episodes = [{"return": value(n, i), f"return/{policy}": value(n, i), "length": 8.0, **extra}
                    for i in range(per_report)]
        records.append({"role": "trainer", "srl_worker": trainer, "policy": policy, "time": 100.0 + 10 * n,
                        "version": n // 2, "env_steps_consumed": consumed[trainer], "episodes": episodes,
                        "train": {"policy_loss": 0.1, "value_loss": LOSSES[policy], "entropy": 0.6}})
    return records


def log_from(records: list[dict]) -> MetricsLog:
    log = MetricsLog(None)
    for record in records:
        log.add(record)
    return log


def panel_lines(fig) -> dict[str, dict]:
    """Panel title -> {label: smoothed line} as drawn (raw lines are unlabelled)."""
    return {ax.get_legend().get_title().get_text(): {line.get_label(): line for line in ax.get_lines()
                                                     if not line.get_label().startswith("_")}
            for ax in fig.axes}


def returns_of(log: MetricsLog, policy: str) -> np.ndarray:
    return np.array([e["return"] for e in log.episodes if e["policy"] == policy])


# ---------------------------------------------------------------------------- curves
def test_two_policies_get_a_return_line_and_loss_lines_each_in_one_colour():
    log = log_from(two_policy_records())
    fig = build_figure(log)
    panels = panel_lines(fig)
    assert list(panels) == ["return", "policy_loss", "value_loss", "entropy"]
    for title in panels:
        assert set(panels[title]) == set(POLICIES), title
    for policy in POLICIES:
        ys = returns_of(log, policy)
        line = panels["return"][policy]
        np.testing.assert_allclose(line.get_ydata(), rolling_mean(ys, smoothing_window(len(ys))))
        raw = [r for r in fig.axes[0].get_lines() if r.get_label().startswith("_") and r.get_color() == line.get_color()]
        assert len(raw) == 1 and raw[0].get_alpha() < 0.5  # the raw values, faint, behind their own mean
        np.testing.assert_allclose(raw[0].get_ydata(), ys)
        np.testing.assert_allclose(panels["value_loss"][policy].get_ydata(), LOSSES[policy])
        colours = {panels[title][policy].get_color() for title in panels}
        assert len(colours) == 1, (policy, colours)  # a policy keeps its colour on every panel
    assert panels["return"]["pointer"].get_color() != panels["return"]["matcher"].get_color()
    xs = panels["return"]["matcher"].get_xdata()
    assert np.all(np.diff(xs) >= 0) and xs.max() == log.trained_env_steps()  # samples trained by all policies
    assert render_png(log, x="time").startswith(b"\x89PNG")


def test_a_team_game_of_two_policies_keeps_its_team_panels_and_shows_each_policy_return():
    log = log_from(two_policy_records(hider_return=1.0, seeker_return=-1.0, hidden_fraction=0.5))
    panels = panel_lines(build_figure(log))
    assert set(panels["return"]) == set(POLICIES)  # each policy's agents' return is not zero-sum
    assert set(panels["team returns"]) == {"hider_return", "seeker_return"}
    assert "fraction of play steps hidden" in panels and "losses" not in panels


def test_one_policy_draws_exactly_as_before_even_when_named():
    records = two_policy_records()
    pointer_only = [r for r in records if r["policy"] == "pointer"]
    unnamed = [{k: v for k, v in r.items() if k != "policy"} for r in pointer_only]
    for x in ("env_steps", "time"):
        assert render_png(log_from(pointer_only), x=x) == render_png(log_from(unnamed), x=x)
    panels = panel_lines(build_figure(log_from(unnamed)))
    assert list(panels) == ["return", "losses"]
    assert set(panels["losses"]) == {"policy_loss", "value_loss", "entropy"}
    assert set(panels["return"]) == {"return"}


# ---------------------------------------------------------------------------- headline
def test_headline_and_postfix_name_each_policy_with_its_own_last_20_episodes():
    log = log_from(two_policy_records())
    pointer, matcher = returns_of(log, "pointer")[-20:].mean(), returns_of(log, "matcher")[-20:].mean()
    assert headline(log) == [("matcher return", "matcher_ret", matcher), ("pointer return", "pointer_ret", pointer)]
    assert progress_postfix(log) == {"matcher_ret": f"{matcher:.1f}", "pointer_ret": f"{pointer:.1f}"}
    assert not math.isclose(log.mean_return(20), pointer)  # not the mean over both policies' episodes
    # the last report of each: matcher 100 + 59 three times, pointer 58 % 7 + (0, 1, 2)
    assert progress_postfix(log, last=3) == {"matcher_ret": "159.0", "pointer_ret": "3.0"}


def test_headline_of_team_games_and_single_policies_is_unchanged():
    team = log_from(two_policy_records(hider_return=3.0, seeker_return=-3.0))
    assert list(progress_postfix(team)) == ["hider_ret", "seeker_ret"]
    records = two_policy_records()
    single = log_from([{k: v for k, v in r.items() if k != "policy"} for r in records])
    assert progress_postfix(single) == {"ret": f"{single.returns()[-20:].mean():.1f}"}
    named_once = log_from([r for r in records if r["policy"] == "matcher"])
    assert progress_postfix(named_once) == {"ret": f"{named_once.returns()[-20:].mean():.1f}"}
    assert progress_postfix(MetricsLog(None)) == {"ret": "-"}


# ---------------------------------------------------------------------------- table and pools
STATUS = {"version": 9, "policies": {"pointer": {"version": 9}, "matcher": {"version": 4}}, "workers": [
    {"worker": "actor-0", "role": "actor", "policy": None, "state": "running", "host": "h", "policy_version": 8},
    {"worker": "trainer-1", "role": "trainer", "policy": "matcher", "state": "training", "host": "h"},
    {"worker": "policy-1", "role": "policy", "policy": "matcher", "state": "running", "host": "h",
     "policy_version": 3},
    {"worker": "trainer-0", "role": "trainer", "policy": "pointer", "state": "running", "host": "h"}]}


def test_worker_table_names_each_trainers_policy_and_lags_by_its_own_version():
    rows = worker_rows(STATUS)
    assert [(r.worker, r.policy) for r in rows] == [("trainer-0", "pointer"), ("trainer-1", "matcher"),
                                                    ("policy-1", "matcher"), ("actor-0", None)]
    assert {r.worker: r.policy_lag for r in rows}["policy-1"] == 1  # matcher's version 4, not trainer-0's 9
    table = rows_html(rows)
    assert "<th style='text-align:left;padding:2px 10px'>policy</th>" in table
    assert "data-worker='trainer-1' data-role='trainer' data-state='training' data-policy='matcher'" in table
    assert table.count("data-policy='matcher'") == 2 and "data-policy" not in table.split("actor-0")[1]


def test_a_single_policy_table_has_no_policy_column():
    single = {"version": 9, "workers": [{**w, "policy": "default" if w["role"] != "actor" else None}
                                        for w in STATUS["workers"]]}
    unnamed = {"version": 9, "workers": [{k: v for k, v in w.items() if k != "policy"} for w in STATUS["workers"]]}
    assert all(r.policy is None for r in worker_rows(single))
    assert rows_html(worker_rows(single)) == rows_html(worker_rows(unnamed))
    assert "data-policy" not in rows_html(worker_rows(single))
    assert rows_html(worker_rows(single)).count("<th ") == len(HEADER)


POOLS = {"pointer": [{"opponent": 3, "episodes": 40, "mean_return": 2.5, "win_rate": 0.55},
                     {"opponent": 7, "episodes": 0, "mean_return": float("nan"), "win_rate": None}],
         "matcher": []}


def test_pool_tables_list_each_policys_opponents():
    rows = pool_rows({"pools": POOLS})
    assert list(rows) == ["pointer"]  # a policy with an empty pool gets no table
    assert [(r.opponent, r.episodes, r.mean_return, r.win_rate) for r in rows["pointer"]] == [
        (3, 40, 2.5, 0.55), (7, 0, None, None)]
    text = pools_html({"pools": POOLS})
    assert text.count("<table class='srl-pool'") == 1 and "data-policy='pointer'" in text
    assert "<td style='padding:2px 10px'>55%</td>" in text and "2.50" in text and text.count("—") == 2
    assert pools_html({}) == pools_html({"pools": {}}) == pools_html({"pools": {"matcher": []}}) == ""
    single = pools_html({"pools": {"default": POOLS["pointer"]}})  # a single-policy self-play run
    assert ">against past versions</caption>" in single and "default" not in single.replace("data-policy='default'", "")


def test_pool_tables_read_the_metrics_logs_pool_table():
    log = MetricsLog(None)
    results = [{"opponent": 2, "return": -1.0, "won": 1.0}, {"opponent": 2, "return": 1.0, "won": 0.0},
               {"opponent": 5, "return": -3.0, "won": 1.0}]
    log.add({"role": "actor", "srl_worker": "actor-0", "pool_results": {"pointer": results}})
    rows = pool_rows({"pools": {"pointer": log.pool_table("pointer")}})["pointer"]
    assert [(r.opponent, r.episodes, r.mean_return, r.win_rate) for r in rows] == [(2, 2, 0.0, 0.5), (5, 1, -3.0, 1.0)]
    assert TEAM_HEADER not in pools_html({"pools": {"pointer": log.pool_table("pointer")}})  # an older log


def test_pool_tables_keep_a_record_per_team_a_past_version_played():
    log = MetricsLog(None)
    results = [{"opponent": 4, "team": "hider", "return": 3.0, "won": False},
               {"opponent": 4, "team": "seeker", "return": -5.0, "won": True},
               {"opponent": 4, "team": "seeker", "return": -1.0, "won": True}]
    log.add({"role": "actor", "srl_worker": "actor-0", "pool_results": {"default": results}})
    table = log.pool_table("default")
    assert [(r["opponent"], r["team"], r["episodes"], r["win_rate"]) for r in table] == [
        (4, "hider", 1, 0.0), (4, "seeker", 2, 1.0)]
    text = pools_html({"pools": {"default": table}})
    assert f">{TEAM_HEADER}</th>" in text and ">hider</td>" in text and ">seeker</td>" in text


# ---------------------------------------------------------------------------- the panel
def write_run(run_dir: Path, records: list[dict]) -> Path:
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_dir.name, "name": run_dir.name}))
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    return run_dir


def test_panel_shows_each_policy_in_header_table_and_pools(tmp_path):
    history = srl_lab.open_run(str(write_run(tmp_path / "two", two_policy_records())))
    panel = history.panel()
    try:
        assert "matcher return <b>" in panel.header.value and "pointer return <b>" in panel.header.value
        assert "data-worker='trainer-1' data-role='trainer' data-state='interrupted'" in panel.table.value
        assert "data-policy='matcher'" in panel.table.value and panel.pools.value == ""
        status = history.status()
        log = log_from(two_policy_records())
        assert status["policies"] == {p: {"version": 29, "mean_return_last_20": returns_of(log, p)[-20:].mean()}
                                      for p in POLICIES}
        history.status = lambda: {**status, "pools": POOLS, "policies": {p: {"version": 5} for p in POLICIES}}
        panel.refresh()
        assert "data-policy='pointer'" in panel.pools.value
        assert "pointer against past versions" in panel.pools.value
        assert "policy versions: pointer 5, matcher 5" in panel.header.value
        assert panel.pools in panel.widget.children and panel.actors.disabled  # read only: no scaling
    finally:
        panel.close()
