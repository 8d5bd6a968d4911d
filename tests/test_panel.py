"""The notebook panel on real runs: controls act on the run, unhonoured requests are shown, another
process attaches by name, and a finished or interrupted run reopens from its directory."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from distributed import Client

import srl_lab
from srl_lab.cluster import slot_count
from srl_lab.notebook.recipe import recipe_args
from srl_lab.notebook.table import rows_html, worker_rows

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


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
    print(json.dumps({"refused": panel._note[0], "run_id": run.run_id, "episodes": len(run.metrics.episodes),
                      "png": panel.curves.value[:8].hex(), "actors_disabled": panel.actors.disabled,
                      "stop_disabled": panel.buttons["stop"].disabled, "note": panel.note.value}))
    panel.close()
    run.close()
""")


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

        panel.buttons["resume"].click()
        wait_for(lambda: not run.paused and "state: <b>running</b>" in panel.header.value, 10, "resume")
        panel.buttons["checkpoint"].click()
        wait_for(lambda: "checkpoint written" in note(panel), 60, "a checkpoint")
        assert Path(note(panel).split("checkpoint written: ")[1].strip()).exists()

        panel.ring.value = 3
        assert run.config.actors.ring_size == 3
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
    assert "stopped after" in note(panel)
    assert panel.table.value.count("data-role='actor' data-state='stopped'") >= slots - 1  # all that ran
    assert not panel.buttons["start"].disabled and panel.buttons["stop"].disabled

    panel.actors.value = 2  # while stopped: the size the next start uses
    assert "2 actor workers when the run is started" in panel._note[0]
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
