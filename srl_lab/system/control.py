"""Control plane helpers on Dask: endpoints, stop flags, heartbeats and metrics for one SRL worker.

Dask carries only low-rate control traffic here: where a socket lives (``Variable``), whether to stop
(``Event``, polled at a few Hz, never per step), heartbeats and metrics (``Worker.log_event`` picked
up by the client's ``subscribe_topic``). The per-step data plane never touches the scheduler.

Every run of a worker task is one *incarnation* with a random id: when Dask re-runs a task whose
process died, the new incarnation binds new ports, re-publishes its endpoint, and its heartbeats and
fragments carry the new id, so the controller counts the restart and the trainer's accounting tells
a replaced actor's fragments apart from its predecessor's.
"""
from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from distributed import Event, Variable, get_worker

from srl_lab.system.streams import Endpoint

STOP_POLL_S = 0.5
HEARTBEAT_S = 1.0
ENDPOINT_REREAD_S = 2.0  # how often a peer re-reads an endpoint Variable to notice a replacement


class StopRequested(Exception):
    """Raised out of a wait when the worker is told to stop before it got going."""


def metrics_topic(run_id: str) -> str:
    return f"srl-lab/{run_id}"


def heartbeat_topic(run_id: str) -> str:
    return f"srl-lab/{run_id}/heartbeat"


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


def publish_placeholders(client, run_id: str, config) -> None:
    """Empty control-plane entries for a new run, so readers poll for their peers instead of timing out."""
    from srl_lab.policies import policy_ids, policy_worker_slots, service, trainer_slots
    from srl_lab.system.data_parallel import rendezvous_name

    Variable(expected_fragments_name(run_id), client=client).set({})
    services = [service("params", policy) for policy in policy_ids(config)]
    services += [service("samples", policy, rank) for policy, rank in trainer_slots(config)]
    services += [service("policy", policy, index) for policy, index in policy_worker_slots(config)]
    for name in services:
        Variable(endpoint_name(run_id, name), client=client).set(None)
    for policy in policy_ids(config):
        Variable(rendezvous_name(run_id, policy), client=client).set(None)


def new_incarnation() -> int:
    """A random id for one run of a worker task (63 bits: a msgpack int on every platform)."""
    return secrets.randbits(63)


class WorkerContext:
    """What every SRL worker task needs from the control plane.

    ``secret`` is the run's data-plane key (it reached this task over Dask, under TLS when the
    cluster uses it). Heartbeats go out from the flag polls, which every loop of every worker makes
    even while it waits on a peer, so a silent worker is one whose loop is stuck or whose process is
    gone. ``progress`` is merged into each heartbeat (e.g. an actor's fragment count).
    """

    def __init__(self, run_id: str, role: str, worker_id: str, secret: bytes):
        self.run_id = run_id
        self.role = role
        self.worker_id = worker_id
        self.secret = secret
        self.incarnation = new_incarnation()
        self.phase = "starting"
        self.progress: dict[str, Any] = {}
        self._events = {"stop": Event(stop_event_name(run_id, worker_id))}
        if role == "actor":
            self._events["pause"] = Event(flag_name(run_id, "pause"))
        if role == "trainer":
            self._events["checkpoint"] = Event(flag_name(run_id, "checkpoint"))
        self._flags = dict.fromkeys(self._events, False)
        self._next_check = 0.0
        self._next_beat = 0.0
        self._dask_worker = get_worker()
        self._task_key = self._dask_worker.get_current_task()
        self.orphaned = False
        self.beat()

    def _refresh(self) -> None:
        """Polls the control flags at most every ``STOP_POLL_S`` seconds (a scheduler round trip each)."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + STOP_POLL_S
            self._flags = {name: event.is_set() for name, event in self._events.items()}
            self.orphaned = self.orphaned or self._task_forgotten()
            if now >= self._next_beat:
                self.beat()

    def beat(self) -> None:
        """Send one heartbeat now."""
        self._next_beat = time.monotonic() + HEARTBEAT_S
        self._dask_worker.log_event(heartbeat_topic(self.run_id), {
            "srl_worker": self.worker_id, "role": self.role, "inc": self.incarnation, "phase": self.phase,
            "pid": os.getpid(), "host": socket.gethostname(), "dask_worker": self._dask_worker.address,
            **self.progress})

    def running(self) -> None:
        """Startup is over (peers found, weights loaded): the main loop begins."""
        self.phase = "running"
        self.beat()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """One long call (a training step, a checkpoint of a big model): a helper thread keeps beating.

        The phase reads "busy" and beats say for how long; the supervisor treats a call busy for
        longer than the startup allowance as hung, so a step that never returns is still caught.
        """
        stop = threading.Event()
        start = time.monotonic()

        def keep_beating() -> None:
            while not stop.wait(HEARTBEAT_S):
                self.progress["busy_s"] = round(time.monotonic() - start, 1)
                self.beat()

        phase, self.phase = self.phase, "busy"
        helper = threading.Thread(target=keep_beating, name="srl-heartbeat", daemon=True)
        helper.start()
        try:
            yield
        finally:
            stop.set()
            helper.join()
            self.progress.pop("busy_s", None)
            self.phase = phase

    def _task_forgotten(self) -> bool:
        """Whether the scheduler has let go of this task: the client that owned it is gone (kernel
        died or restarted, connection lost) or cancelled it. Its slot is free again for other tasks,
        so this worker must end. Read from the worker's own state: no scheduler round trip."""
        task = self._dask_worker.state.tasks.get(self._task_key) if self._task_key else None
        return self._task_key is not None and (task is None or task.state in ("cancelled", "released"))

    def should_stop(self) -> bool:
        """Told to stop, or orphaned (``_task_forgotten``): finish the loop and return."""
        self._refresh()
        return self._flags["stop"] or self.orphaned

    def paused(self) -> bool:
        """Actors idle while the run is paused (the trainer keeps its state; nothing is lost)."""
        self._refresh()
        return self._flags.get("pause", False)

    def actors_stopping(self) -> bool:
        """The run is stopping its actors (``shutdown.drain``): trainers read whatever arrives.

        Polled from the first call on, so only the trainers that ask (data-parallel ranks holding a
        full batch) pay the scheduler round trip.
        """
        if "actors_stopping" not in self._events:
            self._events["actors_stopping"] = Event(flag_name(self.run_id, "actors-stopping"))
            self._next_check = 0.0  # read it now
        self._refresh()
        return self._flags.get("actors_stopping", False)

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

    def read_endpoint(self, service: str, timeout_s: float) -> Endpoint | None:
        """The published endpoint, or None while only the controller's placeholder is there."""
        try:
            value = Variable(endpoint_name(self.run_id, service)).get(timeout=timeout_s)
        except TimeoutError:
            return None
        return Endpoint.from_dict(value) if value else None

    def wait_endpoint(self, service: str) -> Endpoint:
        """The service's endpoint once published; heart-beats while waiting, raises ``StopRequested``."""
        while True:
            endpoint = self.read_endpoint(service, timeout_s=1.0)
            if endpoint is not None:
                return endpoint
            if self.should_stop():
                raise StopRequested(service)
            time.sleep(0.2)

    def watch(self, service: str) -> "EndpointWatch":
        return EndpointWatch(self, service)

    def log(self, **metrics: Any) -> None:
        """Send one metrics record to the run's topic (the client persists and plots it)."""
        record = {"role": self.role, "srl_worker": self.worker_id, "inc": self.incarnation,
                  "time": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
                  "dask_worker": self._dask_worker.address, **metrics}
        self._dask_worker.log_event(metrics_topic(self.run_id), record)


class EndpointWatch:
    """Follows a service's endpoint: a replacement worker binds new ports and re-publishes them.

    ``changed()`` re-reads the Variable at most every ``ENDPOINT_REREAD_S`` seconds (or at once with
    ``force``) and says whether the endpoint moved; the caller then reconnects to ``endpoint``.
    """

    def __init__(self, ctx: WorkerContext, service: str):
        self.ctx = ctx
        self.service = service
        self.endpoint = ctx.wait_endpoint(service)
        self._next_read = time.monotonic() + ENDPOINT_REREAD_S

    def changed(self, force: bool = False) -> bool:
        now = time.monotonic()
        if not force and now < self._next_read:
            return False
        self._next_read = now + ENDPOINT_REREAD_S
        endpoint = self.ctx.read_endpoint(self.service, timeout_s=1.0)
        if endpoint is None or endpoint == self.endpoint:
            return False
        self.endpoint = endpoint
        return True


def limit_threads() -> None:
    """One SRL worker per process loops in Python; keep torch from oversubscribing the cores.

    Also keeps torch's tensors on the heap (``keep_tensor_memory``).
    """
    import torch

    torch.set_num_threads(1)
    keep_tensor_memory()


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc's largest mmap threshold on 64-bit
_TRIM_THRESHOLD_BYTES = 256 * 2**20


def keep_tensor_memory() -> bool:
    """Serve allocations up to 32 MiB from the heap and give freed memory back to the OS only past 256 MiB.

    Dask's nanny starts worker processes with ``MALLOC_TRIM_THRESHOLD_=65536``, which also turns off
    glibc's adaptive mmap threshold: every tensor over 128 KiB is then mapped and unmapped again on
    each use, and the page faults made a trainer's PPO update 1.5-1.7x slower than in a plain process
    (measured: 8.8k vs 13k samples per CPU-second). Returns False where there is no glibc.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
                    and libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


def request_checkpoint(client, run_id: str, timeout_s: float = 60.0) -> str:
    """Ask a run's trainer for a checkpoint now (from any client); returns its path once written."""
    path_var = Variable(checkpoint_path_name(run_id), client=client)
    path_var.set("")
    Event(flag_name(run_id, "checkpoint"), client=client).set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        path = path_var.get()
        if path:
            return path
        time.sleep(0.1)
    raise TimeoutError("the trainer wrote no checkpoint in time")
