"""What ``Run.status()`` reports: every worker's state and latest figures, and the run's counters."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from srl_lab.policies import for_policy, is_multi_policy, policy_ids, policy_worker_slots, trainer_slots
from srl_lab.system.supervisor import worker_state

if TYPE_CHECKING:
    from srl_lab.system.controller import Run
    from srl_lab.system.metrics import MetricsLog

SILENT_AFTER_S = 5.0  # a worker is called silent after this long without a heartbeat
TRAINER_TOTALS = ("fragments_consumed", "dropped_stale", "rejected", "unauthenticated")


def run_status(run: "Run") -> dict[str, Any]:
    """Workers by role with their state, restarts and latest figures, plus run-level counters."""
    with run.workers.lock:
        futures = dict(run.workers.futures)
    beats, faults = run.supervisor.snapshot()
    latest = run.metrics.workers()
    now = time.time()
    policy_of = {("trainer", i): policy for i, (policy, _) in enumerate(trainer_slots(run.config))}
    policy_of.update({("policy", i): policy for i, (policy, _) in enumerate(policy_worker_slots(run.config))})
    workers = []
    for worker, future in sorted(futures.items()):
        name = str(worker)
        record, beat = latest.get(name, {}), beats.get(name)
        state = future.status
        if state == "pending":
            state = worker_state(beat, now, SILENT_AFTER_S)
        workers.append({"worker": name, "role": worker.role, "policy": policy_of.get((worker.role, worker.index)),
                        "state": state,
                        "host": beat.host if beat else record.get("host"),
                        "pid": beat.pid if beat else record.get("pid"),
                        "incarnation": beat.inc if beat else None,
                        "restarts": run.supervisor.restarts(name),
                        "env_steps_per_s": record.get("env_steps_per_s"),
                        "inference_latency_ms": record.get("inference_latency_ms"),
                        "policy_version": record.get("policy_version", record.get("version"))})
    trainers = [record for name, record in latest.items() if name.startswith("trainer-")]
    failure = run.supervision.failure
    pooled = [p for p in policy_ids(run.config) if for_policy(run.config, p).policy.pool is not None]
    return {
        "run_id": run.run_id, "run_dir": run.run_dir, "stopped": run.result is not None,
        "workers": workers,
        **actor_totals(workers),
        "env_steps": run.metrics.env_steps(),
        "version": latest.get("trainer-0", {}).get("version", 0),
        **{key: sum(t.get(key, 0) for t in trainers) for key in TRAINER_TOTALS},
        "restarts": sum(w["restarts"] for w in workers),
        "faults": faults,
        "error": str(failure) if failure is not None else None,  # a worker's bug failed the run
        "episodes": len(run.metrics.episodes),
        "mean_return_last_20": run.metrics.mean_return(20),
        "dashboard": run.client.dashboard_link,
        **({"policies": _policies(run, latest)} if is_multi_policy(run.config) else {}),
        **({"pools": {policy: run.metrics.pool_table(policy) for policy in pooled}} if pooled else {}),
    }


def actor_totals(workers: list[dict[str, Any]]) -> dict[str, Any]:
    """How many actor workers run and their summed env steps/s: an actor that left or went silent
    keeps its last report, which must not count towards the run's rate."""
    running = [w for w in workers if w["role"] == "actor" and w["state"] == "running"]
    return {"actors": len(running), "env_steps_per_s": sum(w["env_steps_per_s"] or 0 for w in running)}


def _policies(run: "Run", latest: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each policy's version (its rank-0 trainer's) and recent mean return."""
    first_trainer = {}
    for index, (policy, _) in enumerate(trainer_slots(run.config)):
        first_trainer.setdefault(policy, f"trainer-{index}")
    return policy_summaries(run.metrics, {policy: latest.get(trainer, {}).get("version", 0)
                                          for policy, trainer in first_trainer.items()})


def policy_summaries(metrics: "MetricsLog", versions: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Each policy's version (as given) and its mean return over its last 20 episodes."""
    return {policy: {"version": version, "mean_return_last_20": metrics.mean_return(20, f"return/{policy}")}
            for policy, version in versions.items()}
