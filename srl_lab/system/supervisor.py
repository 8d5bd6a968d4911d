"""Supervision bookkeeping: heartbeats in; incarnations, restarts, faults and silent workers out.

Every SRL worker task sends a heartbeat about once a second from the loops it runs (also while it
waits on a peer). Each run of a task is an incarnation with its own id: when Dask re-runs a task
whose process died, or the controller resubmits one, a new id shows up and counts as a restart. A
worker whose newest incarnation has been silent for ``timeout_s`` (ten times that while it is still
starting, e.g. compiling an environment) is reported by ``silent``; the controller then restarts the
process it is stuck in. A worker inside one long call (phase "busy", e.g. a training step) gets the
startup allowance too. This class holds no Dask objects, so its rules are tested without a cluster.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from srl_lab.policies import DEFAULT
from srl_lab.system.sample_stream import ledger_key
from srl_lab.system.worker_set import WorkerId

STARTUP_GRACE = 10.0  # multiple of the timeout a starting or busy worker may stay silent


@dataclass
class Incarnation:
    worker: str
    inc: int
    role: str
    first_seen: float  # controller clock (``time.time()``) at the first heartbeat
    last_seen: float
    phase: str = "starting"
    pid: int | None = None
    host: str | None = None
    dask_worker: str | None = None
    running_at: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)


class Supervisor:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self.current: dict[str, Incarnation] = {}  # worker id -> newest incarnation
        self.history: dict[str, list[Incarnation]] = {}  # worker id -> every incarnation, oldest first
        self.faults: list[dict[str, Any]] = []
        self._handled: dict[str, float] = {}  # worker id -> when its silence was last acted on

    def on_heartbeat(self, record: dict[str, Any], now: float) -> None:
        worker, inc = record.get("srl_worker"), record.get("inc")
        if not isinstance(worker, str) or not isinstance(inc, int):
            return
        with self._lock:
            known = {i.inc: i for i in self.history.get(worker, ())}
            incarnation = known.get(inc)
            if incarnation is None:
                incarnation = Incarnation(worker, inc, str(record.get("role")), first_seen=now, last_seen=now)
                self.history.setdefault(worker, []).append(incarnation)
                self.current[worker] = incarnation
            incarnation.last_seen = now
            incarnation.phase = str(record.get("phase", incarnation.phase))
            incarnation.pid, incarnation.host = record.get("pid"), record.get("host")
            incarnation.dask_worker = record.get("dask_worker")
            incarnation.progress = {k: v for k, v in record.items() if k not in _BEAT_FIELDS}
            if incarnation.phase == "running" and incarnation.running_at is None:
                incarnation.running_at = now
                self._note_recovery(worker, incarnation)

    def _note_recovery(self, worker: str, new: Incarnation) -> None:
        """A replacement is up: record how long after its predecessor's last heartbeat."""
        older = self.history[worker][:-1]
        if new is self.history[worker][-1] and older:
            self.faults.append({"worker": worker, "event": "replaced", "time": new.running_at,
                                "old_inc": older[-1].inc, "new_inc": new.inc,
                                "recovery_s": round(new.running_at - older[-1].last_seen, 3)})

    def fault(self, worker: str, event: str, now: float, **details: Any) -> None:
        with self._lock:
            self.faults.append({"worker": worker, "event": event, "time": now, **details})

    def restarts(self, worker: str | None = None) -> int:
        """Incarnations after the first, for one worker or all."""
        with self._lock:
            workers = [worker] if worker else list(self.history)
            return sum(max(0, len(self.history.get(w, ())) - 1) for w in workers)

    def silent(self, workers: list[str], now: float) -> list[Incarnation]:
        """Newest incarnations of ``workers`` silent (or busy in one call) past their allowance."""
        found = []
        with self._lock:
            for worker in workers:
                inc = self.current.get(worker)
                if inc is None:
                    continue
                limit = self.timeout_s * (1.0 if inc.phase == "running" else STARTUP_GRACE)
                if now - self._handled.get(worker, 0.0) <= limit:
                    continue  # acted on recently: give the remedy time
                busy_s = inc.progress.get("busy_s", 0) if inc.phase == "busy" else 0
                if now - inc.last_seen > limit or busy_s > limit:
                    found.append(inc)
        return found

    def handled(self, worker: str, now: float) -> None:
        """Silence acted on (or explained): wait another timeout before reporting it again."""
        with self._lock:
            self._handled[worker] = now

    def produced_by_dead_actors(self, live: set[str], policy: str = DEFAULT) -> dict[str, int]:
        """Ledger key -> ``policy``'s fragments last reported, for actor incarnations not in ``live``."""
        with self._lock:
            actors = {w: WorkerId.parse(w).index for w in self.history if w.startswith("actor-")}
            reported = {ledger_key(index, i.inc): int(i.progress.get("fragments_by_policy", {}).get(policy, 0))
                        for w, index in actors.items() for i in self.history[w]}
        return {k: n for k, n in reported.items() if k not in live}

    def snapshot(self) -> tuple[dict[str, Incarnation], list[dict[str, Any]]]:
        with self._lock:
            return dict(self.current), list(self.faults)


def worker_state(beat: Incarnation | None, now: float, silent_after_s: float) -> str:
    """What a pending worker is doing, from its newest heartbeat, for ``Run.status()``.

    A worker inside ``ctx.busy()`` beats with phase "busy". Once it has been seen running, that is
    its main loop at work (a trainer's update reads "training"), not a start-up; busy before it ever
    ran (e.g. a long load during start-up) still reads "starting".
    """
    if beat is None:
        return "starting"
    if now - beat.last_seen > silent_after_s:
        return "silent"
    if beat.phase == "running":
        return "running"
    if beat.phase == "busy" and beat.running_at is not None:
        return "training" if beat.role == "trainer" else "busy"
    return "starting"


_BEAT_FIELDS = {"srl_worker", "worker", "role", "inc", "phase", "pid", "host", "dask_worker"}
