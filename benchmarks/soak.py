"""Soak: PPO on CartPole-v1 with remote inference for ``--minutes``, a fault every ``--fault-every`` s.

Faults rotate through the roles: ``kill -9`` of an actor worker's process, then the policy worker's,
then the trainer's. A fault counts as recovered when, within the next interval, a new incarnation of
the killed worker is running and the trainer has published at least two more versions since.
Resident memory of every process (this one, which hosts the scheduler and the controller, and each
SRL worker's) is sampled right before the first fault and at the end; ``rss_growth_pct`` is the
growth of the process that is largest at the end. Not run in CI (it takes the full duration).

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
from srl_lab.config import ActorConfig, ExperimentConfig, InferenceConfig, TrainerConfig
from srl_lab.system.controller import SPARE_WORKERS, Run, launch

TARGETS = ("actor-{n}", "policy-0", "trainer-0")  # in turn; actors alternate between actor-0 and actor-1


def config() -> ExperimentConfig:
    return ExperimentConfig(name="soak", actors=ActorConfig(workers=2, ring_size=2, envs_per_group=16,
                                                            fragment_length=64),
                            inference=InferenceConfig(mode="remote"),
                            trainer=TrainerConfig(checkpoint_every_versions=10, heartbeat_timeout_s=30))


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


def inject(run: Run, target: str) -> dict[str, Any]:
    before = workers(run)[target]
    os.kill(before["pid"], signal.SIGKILL)
    return {"target": target, "pid": before["pid"], "restarts": before["restarts"], "at": time.monotonic(),
            "version": run.status()["version"]}


def recovered(run: Run, fault: dict[str, Any]) -> float | None:
    """Seconds from the kill to a running replacement plus two new versions; None if not (yet)."""
    w = workers(run)[fault["target"]]
    if w["state"] != "running" or w["restarts"] <= fault["restarts"] or w["pid"] == fault["pid"]:
        return None
    if "up_version" not in fault:
        fault["up_version"] = run.status()["version"]
    if run.status()["version"] < fault["up_version"] + 2:
        return None
    return time.monotonic() - fault["at"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults")
    parser.add_argument("--run-dir", default="runs/soak")
    args = parser.parse_args()

    cfg = config()
    cluster = clusters.local(n_workers=1 + 1 + cfg.actors.workers + SPARE_WORKERS, dashboard_address=None)
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
                        print(f"{now - start:6.0f} s: {fault['target']} recovered in {seconds:.1f} s", flush=True)
            if now >= next_fault and now + args.fault_every <= end + 1:
                if not rss_start:
                    rss_start = rss_by_role(run)
                target = TARGETS[len(faults) % 3].format(n=(len(faults) // 3) % 2)
                faults.append(inject(run, target))
                print(f"{now - start:6.0f} s: killed {target} (pid {faults[-1]['pid']}) at version "
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
        "recovery_s": {f"{i}:{f['target']}": f.get("recovery_s") for i, f in enumerate(faults)},
        "rss_growth_pct": growth.get(largest),
        "rss_largest_process": largest,
        "rss_growth_pct_by_process": growth,
        "rss_end_mib": {k: round(v / 2**20) for k, v in rss_end.items()},
        "restarts": result["restarts"],
        "books": {k: result[k] for k in ("fragments_produced", "fragments_consumed", "dropped_stale",
                                         "fragments_lost")},
        "version": result["version"], "env_steps": result["env_steps"], "minutes": args.minutes,
    }))


if __name__ == "__main__":
    main()
