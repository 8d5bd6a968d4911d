"""Control plane helpers on Dask: endpoints, stop flags and metrics for one SRL worker.

Dask carries only low-rate control traffic here: where a socket lives (``Variable``), whether to stop
(``Event``, polled at a few Hz, never per step) and metrics (``Worker.log_event`` picked up by the
client's ``subscribe_topic``). The per-step data plane never touches the scheduler.
"""
from __future__ import annotations

import os
import socket
import time
from typing import Any

from distributed import Event, Variable, get_worker

from srl_lab.system.streams import Endpoint

STOP_POLL_S = 0.5


def metrics_topic(run_id: str) -> str:
    return f"srl-lab/{run_id}"


def endpoint_name(run_id: str, service: str) -> str:
    return f"{run_id}/endpoint/{service}"


def stop_event_name(run_id: str, worker_id: str) -> str:
    return f"{run_id}/stop/{worker_id}"


def flag_name(run_id: str, flag: str) -> str:
    return f"{run_id}/flag/{flag}"


def checkpoint_path_name(run_id: str) -> str:
    return f"{run_id}/checkpoint-path"


def expected_fragments_name(run_id: str) -> str:
    return f"{run_id}/expected-fragments"


class WorkerContext:
    """What every SRL worker task needs from the control plane."""

    def __init__(self, run_id: str, role: str, worker_id: str):
        self.run_id = run_id
        self.role = role
        self.worker_id = worker_id
        self._events = {"stop": Event(stop_event_name(run_id, worker_id)),
                        "stop_all": Event(stop_event_name(run_id, "all"))}
        if role == "actor":
            self._events["pause"] = Event(flag_name(run_id, "pause"))
        if role == "trainer":
            self._events["checkpoint"] = Event(flag_name(run_id, "checkpoint"))
        self._flags = dict.fromkeys(self._events, False)
        self._next_check = 0.0
        self._dask_worker = get_worker()

    def _refresh(self) -> None:
        """Polls the control flags at most every ``STOP_POLL_S`` seconds (a scheduler round trip each)."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + STOP_POLL_S
            self._flags = {name: event.is_set() for name, event in self._events.items()}

    def should_stop(self) -> bool:
        self._refresh()
        return self._flags["stop"] or self._flags["stop_all"]

    def paused(self) -> bool:
        """Actors idle while the run is paused (the trainer keeps its state; nothing is lost)."""
        self._refresh()
        return self._flags.get("pause", False)

    def checkpoint_requested(self) -> bool:
        """True once per on-demand checkpoint request (the flag is cleared here)."""
        self._refresh()
        if self._flags.get("checkpoint"):
            self._events["checkpoint"].clear()
            self._flags["checkpoint"] = False
            return True
        return False

    def publish_endpoint(self, service: str, endpoint: Endpoint) -> None:
        Variable(endpoint_name(self.run_id, service)).set(endpoint.to_dict())

    def wait_endpoint(self, service: str, timeout_s: float = 120.0) -> Endpoint:
        return Endpoint.from_dict(Variable(endpoint_name(self.run_id, service)).get(timeout=timeout_s))

    def log(self, **metrics: Any) -> None:
        """Send one metrics record to the run's topic (the client persists and plots it)."""
        record = {"role": self.role, "srl_worker": self.worker_id, "time": time.time(),
                  "pid": os.getpid(), "host": socket.gethostname(),
                  "dask_worker": self._dask_worker.address, **metrics}
        self._dask_worker.log_event(metrics_topic(self.run_id), record)


def limit_threads() -> None:
    """One SRL worker per process loops in Python; keep torch from oversubscribing the cores."""
    import torch

    torch.set_num_threads(1)
