"""Soak: PPO on CartPole-v1 with remote inference for ``--minutes``, a fault every ``--fault-every`` s.

Faults rotate through ``FAULTS``: ``kill -9`` of an actor worker's, the policy worker's and the
trainer's process; the Dask worker under an actor retired for good (the controller must grow the
cluster); a worker's process frozen with SIGSTOP past the heartbeat timeout (actor, policy worker and
trainer in turn; the supervisor must restart it); and the controller's client losing its scheduler
connection (it reconnects by itself with every future cancelled; every worker must be resubmitted).
A fault counts as recovered when, within the next interval, every worker it hit runs a new
incarnation and the trainer has published at least two more versions since.

Resident memory of every process (this one, which hosts the scheduler and the controller, and each
SRL worker's) is sampled right before the first fault and at the end; ``rss_growth_pct`` is the
growth of the process that is largest at the end. ``final_return`` is the mean return of the last
20 episodes when the run stops. What it cannot show: faults overlapping each other, or a slow leak
that needs hours. Not run in CI (it takes the full duration).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

import psutil
from distributed import Client

from srl_lab import cluster as clusters
from srl_lab.config import ActorConfig, ExperimentConfig, InferenceConfig, PPOConfig, TrainerConfig
from srl_lab.system.controller import SPARE_WORKERS, Run, launch
from srl_lab.system.worker_set import slots_needed

FAULTS = ("kill actor", "disconnect", "kill policy", "retire actor", "kill trainer", "freeze")
TARGETS = {"kill actor": "actor-0", "retire actor": "actor-1", "kill policy": "policy-0", "kill trainer": "trainer-0"}
FROZEN = ("actor-1", "policy-0", "trainer-0")  # what each successive "freeze" stops


def config(lr: float, anneal_steps: int) -> ExperimentConfig:
    return ExperimentConfig(name="soak", actors=ActorConfig(workers=2, ring_size=2, envs_per_group=16,
                                                            fragment_length=64),
                            inference=InferenceConfig(mode="remote"),
                            trainer=TrainerConfig(checkpoint_every_versions=10, heartbeat_timeout_s=20),
                            ppo=PPOConfig(lr=lr, anneal_lr_steps=anneal_steps))


def workers(run: Run) -> dict[str, dict[str, Any]]:
    return {w["worker"]: w for w in run.status()["workers"]}


def rss_by_role(run: Run) -> dict[str, int]:
    """Resident bytes of this process and of each SRL worker's current process."""
    found = {"controller": psutil.Process().memory_info().rss}
    for name, w in workers(run).items():
        try:
            found[name] = psutil.Process(w["pid"]).memory_info().rss
        except (psutil.Error, TypeError):  # being replaced right now
            continue
    return found


def inject(run: Run, fault: str, count: int) -> dict[str, Any]:
    """Make the ``count``-th fault happen; returns what ``recovered`` needs to tell it was healed."""
    now = workers(run)
    if fault == "disconnect":
        targets = list(now)
        run.client.loop.add_callback(lambda: run.client.scheduler_comm.comm.abort())
    else:
        target = TARGETS.get(fault) or FROZEN[count // len(FAULTS) % len(FROZEN)]
        targets = [target]
        if fault == "retire actor":
            address = run.supervisor.current[target].dask_worker
            run.client.retire_workers([address], close_workers=True, remove=True)
        else:
            os.kill(now[target]["pid"], signal.SIGKILL if fault.startswith("kill") else signal.SIGSTOP)
    return {"fault": fault, "targets": {t: (now[t]["pid"], now[t]["restarts"]) for t in targets},
            "at": time.monotonic(), "version": run.status()["version"]}


def recovered(run: Run, fault: dict[str, Any]) -> float | None:
    """Seconds from the fault to running replacements plus two new versions; None if not (yet)."""
    now = workers(run)
    for target, (pid, restarts) in fault["targets"].items():
        w = now.get(target)
        if w is None or w["state"] != "running" or w["restarts"] <= restarts or w["pid"] == pid \
                and fault["fault"] != "disconnect":
            return None
    if "up_version" not in fault:
        fault["up_version"] = run.status()["version"]
    if run.status()["version"] < fault["up_version"] + 2:
        return None
    return time.monotonic() - fault["at"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults")
    parser.add_argument("--run-dir", default="runs/soak")
    parser.add_argument("--lr", type=float, default=1e-3, help="PPO's learning rate")
    parser.add_argument("--anneal-steps", type=int, default=0,
                        help="env steps over which PPO's learning rate falls to zero (0: constant)")
    args = parser.parse_args()

    cfg = config(args.lr, args.anneal_steps)
    cluster = clusters.local(n_workers=slots_needed(cfg) + SPARE_WORKERS, dashboard_address=None)
    client = Client(cluster)
    run = launch(cfg, client=client, run_dir=os.path.join(args.run_dir, time.strftime("%Y%m%d-%H%M%S")))
    faults: list[dict[str, Any]] = []
    start = time.monotonic()
    end = start + 60 * args.minutes
    next_fault = start + args.fault_every
    rss_start: dict[str, int] = {}
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            for fault in faults:
                if "recovery_s" not in fault and now - fault["at"] <= args.fault_every:
                    seconds = recovered(run, fault)
                    if seconds is not None:
                        fault["recovery_s"] = round(seconds, 1)
                        print(f"{now - start:6.0f} s: {fault['fault']} recovered in {seconds:.1f} s", flush=True)
            if now >= next_fault and now + args.fault_every <= end + 1:
                if not rss_start:
                    rss_start = rss_by_role(run)
                kind = FAULTS[len(faults) % len(FAULTS)]
                faults.append(inject(run, kind, len(faults)))
                print(f"{now - start:6.0f} s: {kind} {', '.join(faults[-1]['targets'])} at version "
                      f"{faults[-1]['version']}, return {run.status()['mean_return_last_20']:.1f}", flush=True)
                next_fault += args.fault_every
            time.sleep(0.5)
        rss_end = rss_by_role(run)
    finally:
        result = run.stop()
        client.close()
        cluster.close()
    largest = max(rss_end, key=rss_end.get)
    growth = {k: round(100.0 * (rss_end[k] - rss_start[k]) / rss_start[k], 1) for k in rss_end if k in rss_start}
    print(json.dumps({
        "final_return": result["mean_return_last_20"],
        "faults_injected": len(faults),
        "faults_recovered": sum("recovery_s" in f for f in faults),
        "recovery_s": {f"{i}:{f['fault']}": f.get("recovery_s") for i, f in enumerate(faults)},
        "rss_growth_pct": growth.get(largest),
        "rss_largest_process": largest,
        "rss_growth_pct_by_process": growth,
        "rss_end_mib": {k: round(v / 2**20) for k, v in rss_end.items()},
        "restarts": result["restarts"],
        "books": {k: result[k] for k in ("fragments_produced", "fragments_consumed", "dropped_stale",
                                         "fragments_lost")},
        "books_closed": result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"]
        + result["fragments_lost"],
        "version": result["version"], "env_steps": result["env_steps"], "minutes": args.minutes,
    }))


if __name__ == "__main__":
    main()
