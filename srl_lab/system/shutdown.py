"""Stopping a run: the graceful drain that closes the books, and the abort of a failed run.

Graceful: actors are told to stop (and the trainers that they are stopping, so they read without
limit) and report how many fragments each incarnation produced; the trainers wait for exactly those,
train on what is left and return their counters and ledgers; then the policy workers stop.
``fragments_produced == fragments_consumed + dropped_stale + fragments_lost`` holds per run, where
lost fragments went down with a killed actor or trainer process.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any

from distributed import Event, Variable

from srl_lab.system.control import expected_fragments_name, flag_name, stop_event_name
from srl_lab.system.metrics import MetricsLog
from srl_lab.system.sample_stream import account, ledger_key
from srl_lab.system.supervision import INFRASTRUCTURE_ERRORS
from srl_lab.system.supervisor import Supervisor
from srl_lab.system.worker_set import WorkerId, WorkerSet

STOP_TIMEOUT_S = 120.0
RESTART_TIMEOUT_S = 30.0  # how long a failed run's stop waits for the processes it restarted
REFUSAL_KEYS = ("rejected", "unauthenticated", "malformed")  # totals every worker's result may carry


def tell_to_stop(workers: WorkerSet, worker: WorkerId) -> None:
    """Set the worker's stop flag (it finishes its loop and returns its final counters)."""
    Event(stop_event_name(workers.run_id, str(worker)), client=workers.client).set()


def final(future: Any) -> dict[str, Any] | None:
    """A stopped worker's result; None if its last incarnation died instead of returning."""
    try:
        return future.result(timeout=STOP_TIMEOUT_S)
    except INFRASTRUCTURE_ERRORS:
        return None


def drain(workers: WorkerSet, finished_actors: dict[int, dict[str, Any] | None], supervisor: Supervisor,
          slots: list[tuple[str, int]]) -> dict[str, Any]:
    """Stop every worker in order, letting the trainers drain; returns the books and the trainers' view.

    ``finished_actors`` (actor index -> final result, None if lost) gains the actors still running.
    ``slots`` gives each trainer's ``(policy, rank)``; every policy's books close on their own.
    """
    Event(flag_name(workers.run_id, "actors-stopping"), client=workers.client).set()
    with workers.lock:
        workers.stopping.update(workers.futures)
        actors = workers.of_role("actor")
        for index in actors:
            tell_to_stop(workers, WorkerId("actor", index))
    for index in actors:
        finished_actors[index] = final(workers.remove(WorkerId("actor", index)))
    actors_done = [a for a in finished_actors.values() if a]
    policies = list(dict.fromkeys(policy for policy, _ in slots))
    live = {policy: {ledger_key(a["actor"], a["inc"]): a.get("fragments_by_policy", {}).get(policy, 0)
                     for a in actors_done} for policy in policies}
    Variable(expected_fragments_name(workers.run_id), client=workers.client).set(live)
    trainers = workers.of_role("trainer")
    for index in trainers:
        tell_to_stop(workers, WorkerId("trainer", index))
    results = {index: future.result(timeout=STOP_TIMEOUT_S) for index, future in trainers.items()}
    by_policy = {policy: merge_trainers([results[i] for i, (p, _) in enumerate(slots) if p == policy])
                 for policy in policies}
    policy_workers = workers.of_role("policy")
    for index in policy_workers:
        tell_to_stop(workers, WorkerId("policy", index))
    policy = [p for p in map(final, policy_workers.values()) if p]
    time.sleep(0.2)  # let the last metrics events arrive
    books = {name: account(trainer["ledger"], live[name], supervisor.produced_by_dead_actors(set(live[name]), name),
                           trainer["fragments_consumed"], trainer["dropped_stale"])
             for name, trainer in by_policy.items()}
    return {"books": {key: sum(b[key] for b in books.values()) for key in next(iter(books.values()))},
            "books_by_policy": books, "trainers": by_policy,
            "refusals": refusals([*by_policy.values(), *policy, *actors_done]),
            "env_errors": sum(a["env_errors"] for a in actors_done)}


def policy_results(drained: dict[str, Any], metrics: MetricsLog) -> dict[str, dict[str, Any]]:
    """Each policy's books, version, recent mean return and final checkpoint, from a ``drain``."""
    return {policy: {**drained["books_by_policy"][policy], "version": result["version"],
                     "mean_return_last_20": metrics.mean_return(20, f"return/{policy}"),
                     "checkpoint": result.get("checkpoint")}
            for policy, result in drained["trainers"].items()}


def refusals(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Refused data-plane messages over every worker: the totals and, under ``refused``, per reason."""
    reasons: Counter[str] = Counter()
    for result in results:
        reasons.update(result.get("refused", {}))
    return {**{key: sum(r.get(key, 0) for r in results) for key in REFUSAL_KEYS}, "refused": dict(reasons)}


def abort(workers: WorkerSet, restart: bool = True) -> None:
    """A failed worker makes a graceful drain impossible: cancel every task and end the processes.

    Cancelling does not stop a task's thread (e.g. a trainer blocked meeting a dead peer), and the
    scheduler would hand its slot to the next run while it still runs: the processes that run this
    run's tasks are restarted, which ends them for sure. Bounded: the run has failed already, and a
    process slow to come back must not hold the caller. ``restart=False`` when the cluster is closed
    next anyway (a run's own embedded one): closing it ends those processes without the ~10 s wait.
    """
    client = workers.client
    with workers.lock:
        futures = list(workers.futures.values())
        workers.stopping.update(workers.futures)
        keys = {f.key for f in futures}
        running = [address for address, tasks in client.processing().items() if keys & set(tasks)]
        client.cancel(futures, force=True)
    if running and restart:
        client.restart_workers(running, timeout=RESTART_TIMEOUT_S, raise_for_error=False)


def merge_trainers(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One trainer's view of the run from every data-parallel rank's result (rank 0 first).

    Ranks serve disjoint sets of actors, so their ledgers merge without overlap and counts add up.
    """
    merged = dict(results[0], ledger={k: v for r in results for k, v in r["ledger"].items()})
    for key in ("fragments_consumed", "dropped_stale", *REFUSAL_KEYS):
        merged[key] = sum(r.get(key, 0) for r in results)
    merged["refused"] = dict(sum((Counter(r.get("refused", {})) for r in results), Counter()))
    merged["digests"] = [r["digests"] for r in results]
    return merged
