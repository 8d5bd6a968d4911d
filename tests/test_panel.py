"""The notebook panel on real runs: controls act on the run, unhonoured requests are shown, another
process attaches by name, and a finished or interrupted run reopens from its directory."""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from distributed import Client
from hypothesis import given, settings
from hypothesis import strategies as st

import srl_lab
from srl_lab.cluster import slot_count
from srl_lab.curves import build_figure, render_png
from srl_lab.notebook.recipe import recipe_args
from srl_lab.notebook.table import STATE_COLOURS, rows_html, worker_rows
from srl_lab.system.metrics import MetricsLog, TrailingRate, progress_postfix, rolling_mean
from srl_lab.system.supervisor import Supervisor, worker_state
from runs import wait_for

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def running(panel, role: str = "actor") -> int:
    return panel.table.value.count(f"data-role='{role}' data-state='running'")


def note(panel) -> str:
    return re.sub(r"<[^>]+>", "", panel.note.value)


# ---------------------------------------------------------------------------- plain data
def test_worker_rows_compute_policy_lag_and_restarts():
    status = {"version": 12, "workers": [
        {"worker": "actor-1", "role": "actor", "state": "running", "host": "h", "env_steps_per_s": 900.0,
         "inference_latency_ms": 0.4, "policy_version": 9},
        {"worker": "trainer-0", "role": "trainer", "state": "running", "host": "h", "policy_version": 12},
        {"worker": "actor-0", "role": "actor", "state": "starting", "host": None, "policy_version": None,
         "restarts": 2},
        {"worker": "policy-0", "role": "policy", "state": "running", "host": "h", "policy_version": 12}]}
    rows = worker_rows(status)
    assert [r.worker for r in rows] == ["trainer-0", "policy-0", "actor-0", "actor-1"]
    lag = {r.worker: r.policy_lag for r in rows}
    assert lag == {"trainer-0": None, "policy-0": 0, "actor-0": None, "actor-1": 3}
    assert {r.worker: r.restarts for r in rows} == {"trainer-0": 0, "policy-0": 0, "actor-0": 2, "actor-1": 0}
    table = rows_html(rows)
    assert table.count("data-role='actor'") == 2 and "data-state='starting'" in table


PHASE_KEYS = ("doors_blocked_prep", "fort_prep", "hider_in_room", "seeker_in_room", "hider_holds_play",
              "first_seen_step")
PHASE_PANEL = "fort, rooms, box held"  # every phase share but first sight, which counts play steps


def hide_and_seek_episode(i: int, phase: bool = True, **overrides: float) -> dict[str, float]:
    """Statistics shaped like a lite hide-and-seek episode's; ``phase`` adds the phase metrics."""
    episode = {"hider_return": float(i), "seeker_return": -float(i), "hidden_fraction": (i % 10) / 10,
               "return": 0.0, "length": 80.0, "max_box_move_prep": 0.5, "max_box_move": 1.0,
               "num_box_lock_prep": 1.0, "num_box_lock": 0.0, "max_ramp_move_prep": 0.2, "max_ramp_move": 0.4,
               "num_ramp_lock_prep": 0.0, "num_ramp_lock": 1.0}
    if phase:
        episode.update(doors_blocked_prep=(i % 2) / 2, fort_prep=float(i % 4 == 0), hider_in_room=0.7,
                       seeker_in_room=0.1, hider_holds_play=0.3, first_seen_step=float(i % 30))
    return {**episode, **overrides}


def log_of(episodes: list[dict[str, float]], per_report: int = 10) -> MetricsLog:
    """A metrics log fed as the trainer feeds it: reports stamped with samples trained and time."""
    log = MetricsLog(None)
    for n, start in enumerate(range(0, len(episodes), per_report)):
        log.add({"role": "trainer", "srl_worker": "trainer-0", "time": 100.0 + 30 * n, "version": n,
                 "env_steps_consumed": 1000 * n, "episodes": episodes[start:start + per_report],
                 "train": {"policy_loss": 0.1, "value_loss": 1.0 / (n + 1), "entropy": 0.6}})
    return log


def test_progress_postfix_names_team_figures_for_hide_and_seek():
    episodes = [hide_and_seek_episode(i) for i in range(100)]
    postfix = progress_postfix(log_of(episodes))
    last = episodes[-20:]
    assert list(postfix) == ["hider_ret", "seeker_ret", "hidden", "fort"]  # not the zero-sum "ret"
    assert postfix["hider_ret"] == f"{np.mean([e['hider_return'] for e in last]):.1f}" == "89.5"
    assert postfix["seeker_ret"] == "-89.5"
    assert postfix["hidden"] == f"{np.mean([e['hidden_fraction'] for e in last]):.2f}"
    assert postfix["fort"] == f"{np.mean([e['fort_prep'] for e in last]):.2f}" == "0.25"


def test_progress_postfix_handles_older_runs_nan_and_single_agent_envs():
    older = progress_postfix(log_of([hide_and_seek_episode(i, phase=False) for i in range(30)]))
    assert list(older) == ["hider_ret", "seeker_ret", "hidden"]  # no fort_prep in runs before it existed
    undefined = progress_postfix(log_of([hide_and_seek_episode(i, fort_prep=math.nan) for i in range(30)]))
    assert undefined["fort"] == "-"
    some_nan = log_of([hide_and_seek_episode(i, fort_prep=math.nan if i % 2 else 1.0) for i in range(30)])
    assert progress_postfix(some_nan)["fort"] == "1.00"  # NaN left out of the mean, not poisoning it
    cartpole = [{"return": float(r), "length": float(r)} for r in range(50)]
    assert progress_postfix(log_of(cartpole)) == {"ret": f"{np.mean(range(30, 50)):.1f}"}
    assert progress_postfix(MetricsLog(None)) == {"ret": "-"}


def test_panel_header_shows_the_env_figures(tmp_path):
    for name, episodes, expected, absent in (
            ("hs", [hide_and_seek_episode(i) for i in range(40)],
             ("hider return <b>29.50</b>", "seeker return <b>-29.50</b>", "hidden fraction <b>", "fort rate <b>0.25</b>"),
             "last 20 episodes: return"),
            ("cartpole", [{"return": 10.0, "length": 10.0}] * 25, ("last 20 episodes: return <b>10.00</b>",),
             "hider")):
        history = srl_lab.open_run(str(write_run(tmp_path / name, log_of(episodes).records)))
        with pytest.raises(ValueError, match="x must be one of"):
            history.panel(x_axis="wall")
        panel = history.panel(x_axis="time")
        try:
            assert all(part in panel.header.value for part in expected), panel.header.value
            assert absent not in panel.header.value
        finally:
            panel.close()


def write_run(run_dir: Path, records: list[dict]) -> Path:
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_dir.name, "name": run_dir.name}))
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    return run_dir


def naive_rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    out = np.full(len(values), np.nan)
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1):i + 1]
        if np.isfinite(chunk).any():
            out[i] = np.nanmean(chunk)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3) | st.just(math.nan), max_size=80), st.integers(1, 30))
def test_rolling_mean_matches_a_numpy_reference(values, window):
    values = np.asarray(values, dtype=np.float64)
    got = rolling_mean(values, window)
    assert got.shape == values.shape
    np.testing.assert_allclose(got, naive_rolling_mean(values, window), rtol=1e-9, atol=1e-9)


def naive_trailing_rates(times: list[float], counts: list[float], window: float) -> list[float]:
    """Each reading after the first: the growth per second since the newest reading at least
    ``window`` earlier, or since the first reading."""
    rates = []
    for i in range(1, len(times)):
        earlier = [j for j in range(i) if times[i] - times[j] >= window]
        j = earlier[-1] if earlier else 0
        rates.append((counts[i] - counts[j]) / (times[i] - times[j]) if times[i] > times[j] else 0.0)
    return rates


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.just(0.0) | st.floats(0.001, 3.0), st.integers(0, 10_000)), min_size=1, max_size=60),
       st.floats(0.5, 20.0))
def test_trailing_rate_matches_a_plain_python_reference(readings, window):
    times = list(np.cumsum([gap for gap, _ in readings]))
    counts = list(np.cumsum([n for _, n in readings]).astype(float))
    rate = TrailingRate(times[0], counts[0], window)
    got = [rate.update(t, c) for t, c in zip(times[1:], counts[1:])]
    np.testing.assert_allclose(got, naive_trailing_rates(times, counts, window), rtol=1e-9)


def test_an_actor_stepping_in_bursts_reports_its_mean_rate():
    """8,000 env steps in one second and none in the next, as an actor waiting on the trainer."""
    rate = TrailingRate(now=0.0)
    reported = [rate.update(float(t), 4000.0 * (t + t % 2)) for t in range(1, 61)]
    assert reported[:2] == [8000.0, 4000.0]  # until a window has passed: since the first reading
    assert reported[10:] == pytest.approx([4000.0] * 50)  # over the last second alone: 8,000 or 0


def panel_lines(fig) -> dict[str, dict]:
    """Panel title -> {key: (smoothed line, raw line)} as drawn."""
    panels = {}
    for ax in fig.axes:
        legend = ax.get_legend()
        lines = ax.get_lines()
        smoothed = {line.get_label(): line for line in lines if not line.get_label().startswith("_")}
        raw = [line for line in lines if line.get_label().startswith("_")]
        panels[legend.get_title().get_text()] = {
            key: (line, next(r for r in raw if r.get_color() == line.get_color())) for key, line in smoothed.items()}
    return panels


def test_hide_and_seek_curves_draw_phase_metrics_smoothed_over_raw():
    episodes = [hide_and_seek_episode(i) for i in range(300)]
    fig = build_figure(log_of(episodes))
    panels = panel_lines(fig)
    assert "return" not in panels  # the zero-sum mean agent return says nothing in a team game
    assert set(panels[PHASE_PANEL]) == set(PHASE_KEYS[:5])
    assert set(panels["first sight of a hider"]) == {"first_seen_step"}
    assert {"team returns", "fraction of play steps hidden", "box moves", "box locks", "losses"} <= set(panels)
    smoothed, raw = panels["team returns"]["hider_return"]
    ys = np.array([e["hider_return"] for e in episodes])
    np.testing.assert_allclose(raw.get_ydata(), ys)  # the raw data, faint and behind the mean
    assert raw.get_alpha() < 0.5 and raw.get_zorder() < smoothed.get_zorder()
    np.testing.assert_allclose(smoothed.get_ydata(), rolling_mean(ys, 30))
    assert fig.axes[0].get_xlabel() == "samples trained (agent steps)" and fig.axes[0].get_ylabel()
    fig.canvas.draw()
    for ax in fig.axes:  # legends sit outside the axes: they cover no data
        legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert legend.y0 >= frame.y1 - 1, ax.get_legend().get_title().get_text()


def test_curves_render_without_phase_metrics_or_with_nan_and_against_time():
    older = build_figure(log_of([hide_and_seek_episode(i, phase=False) for i in range(50)]))
    assert not {PHASE_PANEL, "first sight of a hider"} & set(panel_lines(older))
    nan = {key: math.nan for key in PHASE_KEYS}
    log = log_of([hide_and_seek_episode(i, **nan) for i in range(50)])
    undefined = panel_lines(build_figure(log))
    assert set(undefined[PHASE_PANEL]) == {f"{key} (not defined)" for key in PHASE_KEYS[:5]}
    assert set(undefined["first sight of a hider"]) == {"first_seen_step (not defined)"}
    assert render_png(log).startswith(PNG_SIGNATURE)
    cartpole = log_of([{"return": float(i), "length": 10.0} for i in range(50)])  # 5 reports, 30 s apart
    fig = build_figure(cartpole, x="time")
    assert set(panel_lines(fig)) == {"return", "losses"}
    assert fig.axes[0].get_xlabel() == "wall-clock time (s)" and fig.axes[0].get_ylabel() == "return per episode"
    assert panel_lines(fig)["return"]["return"][0].get_xdata().max() == 120.0  # seconds since the first report
    assert render_png(MetricsLog(None), x="time").startswith(PNG_SIGNATURE)
    with pytest.raises(ValueError, match="env_steps"):
        build_figure(cartpole, x="wall")


def test_a_trainer_busy_in_an_update_reads_training_not_starting():
    sup = Supervisor(timeout_s=5.0)
    beat = {"srl_worker": "trainer-0", "role": "trainer", "inc": 1, "pid": 1, "host": "h"}

    def state(now: float) -> str:
        return worker_state(sup.snapshot()[0].get("trainer-0"), now, silent_after_s=5.0)

    assert state(0.0) == "starting"  # no heartbeat yet
    sup.on_heartbeat({**beat, "phase": "busy", "busy_s": 3.0}, now=1.0)  # a long load while starting up
    assert state(1.5) == "starting"
    sup.on_heartbeat({**beat, "phase": "running"}, now=2.0)
    assert state(2.5) == "running"
    sup.on_heartbeat({**beat, "phase": "busy", "busy_s": 1.0}, now=3.0)  # inside ctx.busy(): an update
    assert state(3.5) == "training"
    assert state(9.0) == "silent"
    sup.on_heartbeat({"srl_worker": "actor-0", "role": "actor", "inc": 2, "phase": "running"}, now=3.0)
    sup.on_heartbeat({"srl_worker": "actor-0", "role": "actor", "inc": 2, "phase": "busy"}, now=4.0)
    assert worker_state(sup.snapshot()[0]["actor-0"], 4.5, 5.0) == "busy"
    assert STATE_COLOURS["training"] == STATE_COLOURS["running"] != STATE_COLOURS["starting"]
    table = rows_html(worker_rows({"version": 3, "workers": [
        {"worker": "trainer-0", "role": "trainer", "state": "training", "host": "h"}]}))
    assert "data-state='training'" in table and STATE_COLOURS["running"] in table


def test_recipe_flags_and_short_mode(monkeypatch):
    monkeypatch.delenv("SRL_LAB_SHORT", raising=False)
    monkeypatch.setenv("SRL_LAB_SCHEDULER", "tcp://from-env:8786")
    args = recipe_args([], actors=2, minutes=3.0)
    assert (args.scheduler, args.actors, args.minutes, args.short) == ("tcp://from-env:8786", 2, 3.0, False)
    args = recipe_args(["--scheduler", "tcp://s:1", "--actors", "5", "--minutes", "0.5", "--run-dir", "d"],
                       actors=2, minutes=3.0)
    assert (args.scheduler, args.actors, args.minutes, args.run_dir) == ("tcp://s:1", 5, 0.5, "d")
    monkeypatch.setenv("SRL_LAB_SHORT", "1")
    assert recipe_args([], actors=2, minutes=3.0, short_minutes=0.1).minutes == 0.1
    with pytest.raises(SystemExit):
        recipe_args(["--actors", "0"], actors=2, minutes=1.0)


# ---------------------------------------------------------------------------- a live run
ATTACH = textwrap.dedent("""
    import json, sys, time
    import srl_lab.notebook
    run = srl_lab.notebook.attach("panel-test", scheduler=sys.argv[1])  # what the panel's header suggests
    panel = run.panel()
    deadline = time.monotonic() + 60
    while (panel.table.value.count("data-role='actor' data-state='running'") < 2 or not panel.curves.value
           or not run.metrics.episodes):
        assert time.monotonic() < deadline, panel.table.value
        time.sleep(0.2)
    run.pause()
    panel.actors.value = 5  # disabled in a browser; from code it is refused, and says so
    print(json.dumps({"refused": panel.controls.said()[0], "run_id": run.run_id, "episodes": len(run.metrics.episodes),
                      "png": panel.curves.value[:8].hex(), "actors_disabled": panel.actors.disabled,
                      "stop_disabled": panel.buttons["stop"].disabled, "note": panel.note.value}))
    panel.close()
    run.close()
""")


def test_an_attached_view_counts_only_the_actors_still_reporting(dask_client):
    """An actor scaled away keeps its last report on the scheduler; the run's rate must not include it."""
    run_id = "attach-rate-test-1"
    now = time.time()
    for worker, age_s, rate in (("actor-0", 0.0, 1000.0), ("actor-1", 60.0, 500.0)):
        dask_client.log_event(f"srl-lab/{run_id}", {"srl_worker": worker, "role": "actor", "time": now - age_s,
                                                   "env_steps": 10_000, "env_steps_per_s": rate})
    run = srl_lab.notebook.attach(run_id, scheduler=dask_client)
    try:
        wait_for(lambda: len(run.metrics.workers()) == 2, 10, "both actors' reports")
        status = run.status()
        assert (status["actors"], status["env_steps_per_s"], status["env_steps"]) == (1, 1000.0, 20_000)
        assert {w["worker"]: w["state"] for w in status["workers"]} == {"actor-0": "running", "actor-1": "silent"}
    finally:
        run.close()


@pytest.fixture
def fixed_cluster(dask_client):
    """The session's cluster reached by address only: nothing to grow it with, so slots are fixed."""
    client = Client(dask_client.scheduler.address)
    yield client
    client.close()


@pytest.mark.slow
def test_panel_controls_a_live_run(fixed_cluster, tmp_path):
    """Scale, attach from another process, pause/resume, checkpoint, ring size, a request the cluster
    cannot honour, stop, start again, then reopen the run from disk."""
    config = srl_lab.ExperimentConfig(name="panel-test", metrics_interval_s=0.5,
                                      actors=srl_lab.ActorConfig(workers=1, ring_size=2, envs_per_group=8))
    run = srl_lab.launch(config, client=fixed_cluster, run_dir=str(tmp_path / "run"))
    slots = slot_count(fixed_cluster)
    panel = run.panel()
    try:
        wait_for(lambda: len(panel.timing.images.get("curves", ())) >= 2 and running(panel) == 1, 60,
                 "the curves to be drawn twice")
        assert bytes(panel.curves.value).startswith(PNG_SIGNATURE)
        assert bytes(panel.throughput.value).startswith(PNG_SIGNATURE)
        wait_for(lambda: (next(w for w in run.status()["workers"] if w["role"] == "actor")["inference_latency_ms"]
                          or 0) > 0, 10, "inline inference to report its forward pass's time, not 0")

        panel.actors.value = 2  # what dragging the slider does
        wait_for(lambda: running(panel) == 2 and "2 actor workers" in note(panel), 90, "a second actor")

        result = subprocess.run([sys.executable, "-c", ATTACH, fixed_cluster.scheduler.address],
                                check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        attached = json.loads(result.stdout.strip().splitlines()[-1])
        assert attached["run_id"] == run.run_id and attached["episodes"] > 0
        assert attached["png"] == PNG_SIGNATURE.hex()
        assert attached["actors_disabled"] and attached["stop_disabled"]  # those stay with this process
        assert "kernel that launched" in attached["note"]
        assert attached["refused"].startswith("cannot scale to 5: actor workers and stop are controlled by")
        wait_for(lambda: "state: <b>paused</b>" in panel.header.value, 10, "the other process's pause")
        assert run.paused
        wait_for(lambda: "env steps/s: 0 " in panel.header.value, 10, "idle actors to read 0 env steps/s")
        assert all(w["inference_latency_ms"] and w["policy_version"] is not None  # the rest of the row stays
                   for w in run.status()["workers"] if w["role"] == "actor")

        panel.buttons["resume"].click()
        wait_for(lambda: not run.paused and "state: <b>running</b>" in panel.header.value, 10, "resume")
        panel.buttons["checkpoint"].click()
        wait_for(lambda: "checkpoint written" in note(panel), 60, "a checkpoint")
        assert Path(note(panel).split("checkpoint written: ")[1].strip()).exists()

        panel.ring.value = 3
        assert run.ring_size == 3 and run.config.actors.ring_size == 2  # later actors; the launch config stays
        wait_for(lambda: "keep ring size 2" in note(panel), 5, "the ring-size note")

        panel.actors.value = slots  # with the trainer that is one slot more than the cluster has
        wait_for(lambda: "Not honoured yet" in note(panel), 60, "the unhonoured request to be shown")
        assert "1 actor worker(s) wait for a free SRL slot" in note(panel)
        wait_for(lambda: running(panel) == slots - 1, 60, "every actor that has a slot")
        assert f"data-worker='actor-{slots - 1}' data-role='actor' data-state='starting'" in panel.table.value

        timing = panel.timing.summary()
        print("panel refresh intervals (s) during a live run:", timing)
        assert 0.2 <= timing["ticks"]["median"] <= 0.5, timing  # 2-5 Hz
    finally:
        panel.buttons["stop"].click()
        wait_for(lambda: not panel._pump.alive, 180, "the run to stop and the pump to settle")
    assert "stopped after" in note(panel) and "nan" not in note(panel)
    assert panel.table.value.count("data-role='actor' data-state='stopped'") >= slots - 1  # all that ran
    assert not panel.buttons["start"].disabled and panel.buttons["stop"].disabled

    panel.actors.value = 2  # while stopped: the size the next start uses
    assert "2 actor workers when the run is started" in panel.controls.said()[0]
    panel.buttons["start"].click()  # a fresh run of this config, on the same cluster
    wait_for(lambda: panel.source is not run and running(panel) == 2, 120, "the restarted run's actors")
    restarted = panel.source
    assert restarted.config.actors.ring_size == 3 and restarted.run_dir != run.run_dir
    restarted.stop()
    wait_for(lambda: not panel._pump.alive, 60, "the restarted run's final refresh")
    panel.close()

    history = srl_lab.open_run(run.run_dir)
    assert history.state == "finished" and history.result["env_steps"] > 0
    assert history.png().startswith(PNG_SIGNATURE) and history.checkpoints
    assert {w["worker"] for w in history.status()["workers"]} >= {"trainer-0", "actor-0", "actor-1"}
    readonly = history.panel()
    assert bytes(readonly.curves.value).startswith(PNG_SIGNATURE)
    assert all(b.disabled for b in readonly.buttons.values()) and readonly.actors.disabled
    assert "data-worker='actor-1'" in readonly.table.value


def test_open_run_reads_an_interrupted_run(tmp_path):
    """A run whose kernel died has no result.json and may end in a torn line; it still re-plots."""
    records = [{"role": "actor", "srl_worker": "actor-0", "time": 1.0 + t, "env_steps": 1000 * t,
                "env_steps_per_s": 1000.0, "policy_version": t} for t in range(5)]
    records += [{"role": "trainer", "srl_worker": "trainer-0", "time": 1.5 + t, "version": t + 1,
                 "env_steps_consumed": 1000 * t, "episodes": [{"return": 10.0 * t, "length": 10}],
                 "train": {"policy_loss": 0.1, "value_loss": 1.0, "entropy": 0.6}} for t in range(5)]
    run_dir = tmp_path / "cartpole-interrupted"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"run_id": "cartpole-interrupted", "name": "cartpole"}))
    lines = [json.dumps(r) for r in records] + ['{"role": "actor", "srl_wor']
    (run_dir / "metrics.jsonl").write_text("\n".join(lines))
    history = srl_lab.open_run(str(run_dir))
    assert history.state == "interrupted" and history.result is None
    assert len(history.metrics.episodes) == 5
    status = history.status()
    assert {w["worker"]: w["state"] for w in status["workers"]} == {"actor-0": "interrupted",
                                                                    "trainer-0": "interrupted"}
    assert history._repr_png_().startswith(PNG_SIGNATURE)
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        srl_lab.open_run(str(tmp_path))
    shutil.rmtree(run_dir)


def test_live_figures_are_spaced_by_their_render_time(tmp_path):
    """A figure that took 1 s to render is asked for again only after 5 s: the kernel renders at most
    a fifth of one core, whatever the length of the run's history."""
    from srl_lab.notebook import panel as panel_module

    history = srl_lab.open_run(str(write_run(tmp_path / "run", log_of([{"return": 1.0, "length": 1.0}]).records)))
    panel = history.panel()
    try:
        assert panel._min_interval("curves") == panel_module.MIN_IMAGE_INTERVAL_S  # nothing rendered yet
        panel._render_s["curves"] = 1.0
        assert panel._min_interval("curves") == pytest.approx(panel_module.RENDER_SPACING) and panel_module.RENDER_SPACING >= 5
        panel._render_s["throughput"] = 0.01
        assert panel._min_interval("throughput") == panel_module.MIN_IMAGE_INTERVAL_S
    finally:
        panel.close()
