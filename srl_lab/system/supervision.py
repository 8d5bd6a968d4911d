"""The supervision loop: faults are healed, bugs fail the run.

A thread checks every worker once a second. A task whose process died is re-run by Dask (a new
incarnation, counted as a restart); one that Dask gave up on, that was cancelled (its client lost
the scheduler) or that exited on its own is resubmitted; one that stopped heart-beating for
``trainer.heartbeat_timeout_s`` has its process restarted. A worker raising an ordinary exception is
a bug, not a fault: ``failure_of`` turns it into the run's error, which names the worker and
carries the traceback from where it was raised.
"""
from __future__ import annotations

import asyncio
import threading
import time
import traceback
from typing import Any, Callable

from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker

from srl_lab.system.supervisor import Supervisor
from srl_lab.system.worker_set import WorkerId, WorkerSet

SUPERVISE_S = 1.0
INFRASTRUCTURE_ERRORS = (KilledWorker, CommClosedError, FutureCancelledError, asyncio.CancelledError)


def worker_failure(worker: WorkerId | str, error: BaseException) -> RuntimeError:
    """The run's error when a worker raised (a bug, not a fault): the worker, the exception and the
    traceback from where it was raised on the worker."""
    where = "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
    failure = RuntimeError(f"SRL worker {worker} failed: {error!r}\n{where}")
    failure.__cause__ = error
    return failure


def failure_of(worker: WorkerId, future: Any) -> RuntimeError | None:
    """The run's error if this worker's task raised a bug; None while it runs or after a fault."""
    if future.status != "error":
        return None
    error = future.exception(timeout=5)
    return None if isinstance(error, INFRASTRUCTURE_ERRORS) else worker_failure(worker, error)


class SupervisionLoop:
    """Checks the worker set every ``SUPERVISE_S`` seconds until ``closed`` is set."""

    def __init__(self, workers: WorkerSet, supervisor: Supervisor, on_reconnect: Callable[[], None]):
        self.workers = workers
        self.supervisor = supervisor
        self._on_reconnect = on_reconnect  # the client reconnected: e.g. subscribe to topics again
        self._connection = workers.client.scheduler_comm
        self.failure: RuntimeError | None = None  # the first bug seen: the run has failed
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="srl-supervisor", daemon=True)

    def start(self) -> "SupervisionLoop":
        self._thread.start()
        return self

    def raise_if_failed(self) -> None:
        """Raise the run's error if a worker has raised a bug (checked now, not only by the loop)."""
        if self.failure is None:
            for worker, future in self.workers.live().items():
                self.failure = failure_of(worker, future)
                if self.failure is not None:
                    break
        if self.failure is not None:
            raise self.failure

    def _loop(self) -> None:
        while not self.closed.wait(SUPERVISE_S):
            try:
                self.check_connection()
                self.check_futures()
                self.check_heartbeats()
            except Exception as error:  # noqa: BLE001  (e.g. the client closing under us: try again)
                self.supervisor.fault("controller", "supervision error", time.time(), error=repr(error))

    def check_connection(self) -> None:
        """A client that lost the scheduler reconnects by itself with its futures cancelled (their tasks
        end: see ``WorkerContext.should_stop``) and its topic subscriptions gone. ``check_futures``
        resubmits the workers; here the subscriptions are renewed."""
        connection = self.workers.client.scheduler_comm
        if connection is None or connection is self._connection or self.workers.client.status != "running":
            return
        self._connection = connection
        self.supervisor.fault("controller", "reconnected to the scheduler", time.time())
        self._on_reconnect()

    def check_futures(self) -> None:
        """Resubmit tasks that Dask gave up on, that were cancelled or that exited without being told to."""
        with self.workers.lock:
            for worker, future in self.workers.live().items():
                if future.status == "pending":
                    continue
                failure = failure_of(worker, future)
                if failure is not None:
                    self.failure = self.failure or failure
                    continue
                reason = repr(future.exception(timeout=5)) if future.status == "error" else future.status
                self.supervisor.fault(str(worker), "resubmitted", time.time(), reason=reason)
                self.workers.resubmit(worker)

    def check_heartbeats(self) -> None:
        """Restart the process of a worker that stopped heart-beating (hung loop or dead host)."""
        now = time.time()
        live = {str(w): f for w, f in self.workers.live().items()}
        silent = self.supervisor.silent(list(live), now)
        if not silent:
            return
        client = self.workers.client
        where = {key: address for address, keys in client.processing().items() for key in keys}
        for inc in silent:
            address = where.get(live[inc.worker].key)
            self.supervisor.handled(inc.worker, now)
            if address is not None and address == inc.dask_worker:  # stuck where it runs: restart it
                self.supervisor.fault(inc.worker, "silent", now, inc=inc.inc, dask_worker=address,
                                      silent_s=round(now - inc.last_seen, 1))
                client.restart_workers([address], raise_for_error=False)
                continue
            # Its Dask worker is gone and the re-run waits for a free slot (Dask moves it to one when
            # one appears): grow the cluster if it is short of slots and can grow.
            note = self.workers.ensure_slots()["note"]
            if note:
                self.supervisor.fault(inc.worker, "lost its Dask worker", now, note=note)
