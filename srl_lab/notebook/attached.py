"""Attach to a live run from another kernel, by its name, through the run's Dask scheduler.

Workers publish metrics with ``Worker.log_event`` on the topic ``srl-lab/<run_id>``; the scheduler
keeps the recent events of every topic, so another kernel can list the runs a scheduler is serving,
backfill their recent history and subscribe to what follows. Pause, resume and checkpoints are
control-plane flags named by run id, so any client can set them; adding or removing actor workers and
stopping the run stay with the kernel that launched it (it owns the workers' futures).
"""
from __future__ import annotations

import threading
import time
from typing import Any

from distributed import Client, Event

from srl_lab.notebook.table import reported_workers
from srl_lab.system.control import flag_name, metrics_topic, request_checkpoint
from srl_lab.system.metrics import MetricsLog
from srl_lab.system.run_status import actor_totals

TOPIC_PREFIX = metrics_topic("")
SILENT_AFTER_S = 10.0  # a worker that has not reported for this long is shown as silent


def live_runs(client: Client) -> dict[str, float]:
    """Run ids the scheduler holds metrics for, newest report first, with that report's time."""
    runs = {}
    for topic, events in client.get_events().items():
        run_id = topic[len(TOPIC_PREFIX):]
        if topic == metrics_topic(run_id) and "/" not in run_id and events:  # not e.g. <run_id>/heartbeat
            runs[run_id] = max(t for t, _ in events)
    return dict(sorted(runs.items(), key=lambda item: -item[1]))


def find_run(client: Client, name: str) -> str:
    """The run id ``name`` names: an exact run id, or the newest run of the experiment called ``name``."""
    runs = live_runs(client)
    if name in runs:
        return name
    matches = [run_id for run_id in runs if run_id.startswith(f"{name}-")]
    if not matches:
        known = ", ".join(runs) or "none"
        raise LookupError(f"no run named {name!r} on {client.scheduler.address}; runs there: {known}")
    return matches[0]


class AttachedRun:
    """A live run seen from another kernel: metrics, status, pause/resume and checkpoints."""

    capabilities = frozenset({"pause", "checkpoint"})
    not_here = "actor workers and stop are controlled by the kernel that launched this run"

    def __init__(self, client: Client, run_id: str, owns_client: bool = False):
        self.client = client
        self.run_id = run_id
        self.config = None  # the launching kernel holds the config object
        self.metrics = MetricsLog(None)
        self._owns_client = owns_client
        self._seen: set[tuple[str, float]] = set()
        self._lock = threading.Lock()
        self._backlog: list[dict[str, Any]] | None = []  # live events held back until the backfill is in
        topic = metrics_topic(run_id)
        client.subscribe_topic(topic, self._on_event)
        for _, record in client.get_events(topic):
            self._add(record)
        with self._lock:
            backlog, self._backlog = self._backlog, None
        for record in backlog:
            self._add(record)

    def _on_event(self, event: tuple[float, dict[str, Any]]) -> None:
        record = event[1]
        with self._lock:
            if self._backlog is not None:
                self._backlog.append(record)
                return
        self._add(record)

    def _add(self, record: Any) -> None:
        if not isinstance(record, dict):
            return
        key = (record.get("srl_worker", "?"), record.get("time", 0.0))
        if key not in self._seen:
            self._seen.add(key)
            self.metrics.add(record, persist=False)

    @property
    def stopped(self) -> bool:
        return self.metrics.workers().get("trainer-0", {}).get("state") == "stopped"

    def status(self) -> dict[str, Any]:
        """The shape of ``Run.status()``, built from the workers' latest reports."""
        now = time.time()
        workers = reported_workers(self.metrics.workers(), lambda r: r.get("state") or (
            "running" if now - r.get("time", 0.0) < SILENT_AFTER_S else "silent"))
        trainer = self.metrics.workers().get("trainer-0", {})
        return {"run_id": self.run_id, "run_dir": None, "stopped": self.stopped, "workers": workers,
                **actor_totals(workers), "env_steps": self.metrics.env_steps(),
                "version": trainer.get("version", 0), "episodes": len(self.metrics.episodes),
                "mean_return_last_20": self.metrics.mean_return(20), "dashboard": self.client.dashboard_link}

    def pause(self) -> None:
        Event(flag_name(self.run_id, "pause"), client=self.client).set()

    def resume(self) -> None:
        Event(flag_name(self.run_id, "pause"), client=self.client).clear()

    @property
    def paused(self) -> bool:
        return Event(flag_name(self.run_id, "pause"), client=self.client).is_set()

    def checkpoint(self, timeout_s: float = 60.0) -> str:
        """Ask the trainer for a checkpoint now; returns its path (on the trainer's file system)."""
        return request_checkpoint(self.client, self.run_id, timeout_s)

    def panel(self, **kw: Any):
        from srl_lab.notebook.panel import Panel

        return Panel(self, **kw)

    def close(self) -> None:
        """Stop following the run (the run itself goes on)."""
        self.client.unsubscribe_topic(metrics_topic(self.run_id))
        if self._owns_client:
            self.client.close()


def attach(name: str, scheduler: Client | str | None = None) -> AttachedRun:
    """Follow the live run ``name`` (run id or experiment name) served by ``scheduler``.

    ``scheduler`` is a ``Client``, a scheduler address (a launching panel shows it), or None for the
    current default client.
    """
    if scheduler is None:
        from distributed import get_client

        client, owns = get_client(), False
    elif isinstance(scheduler, str):
        client, owns = Client(scheduler, set_as_default=False), True
    else:
        client, owns = scheduler, False
    try:
        return AttachedRun(client, find_run(client, name), owns_client=owns)
    except Exception:
        if owns:
            client.close()
        raise
