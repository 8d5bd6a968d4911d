"""The controller: builds the topology from a config, supervises it, scales it live, stops it.

``launch(config)`` starts an embedded ``LocalCluster(processes=True)`` when no client is given, so a
notebook, a recipe script and a test all run this one code path. Every SRL worker is a long-running
Dask task holding one ``srl_slot``; the data plane between them is ZeroMQ, Dask only carries control.

Supervision: a thread checks every worker once a second. A task whose process died is re-run by
Dask (a new incarnation, counted as a restart); one that Dask gave up on, or that exited on its own,
is resubmitted; one that stopped heart-beating for ``trainer.heartbeat_timeout_s`` has its process
restarted. A worker raising an ordinary exception is a bug, not a fault: the run fails with it.

Security: the controller makes a per-run secret that every data-plane message is signed with; it
reaches the workers as a task argument over Dask (TLS-protected when the cluster uses
``distributed.security.Security``).
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from distributed import Client, Event, Variable
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker

from srl_lab import cluster as clusters
from srl_lab.config import ConfigError, ExperimentConfig
from srl_lab.curves import save_png
from srl_lab.system import checkpoints, codec
from srl_lab.system.actor_worker import actor_worker
from srl_lab.system.control import (
    endpoint_name,
    expected_fragments_name,
    flag_name,
    heartbeat_topic,
    metrics_topic,
    request_checkpoint,
    stop_event_name,
)
from srl_lab.system.data_parallel import rendezvous_name
from srl_lab.system.metrics import MetricsLog, progress_postfix
from srl_lab.system.policy_worker import policy_worker
from srl_lab.system.sample_stream import account, ledger_key, sample_service
from srl_lab.system.supervisor import Supervisor, worker_state
from srl_lab.system.tensorboard_log import TensorBoardLog
from srl_lab.system.trainer_worker import trainer_worker

STOP_TIMEOUT_S = 120.0
SUPERVISE_S = 1.0
SPARE_WORKERS = 1  # idle processes in an embedded cluster, so a replacement starts at once
RESTART_TIMEOUT_S = 30.0  # how long a failed run's stop waits for the processes it restarted
SILENT_AFTER_S = 5.0  # status() calls a worker silent after this long without a heartbeat
INFRASTRUCTURE_ERRORS = (KilledWorker, CommClosedError, FutureCancelledError, asyncio.CancelledError)


def launch(config: ExperimentConfig, client: Client | str | None = None, run_dir: str | None = None,
           security: Any = None) -> "Run":
    """Validate ``config``, then start trainer, policy workers (remote inference) and actors.

    ``client`` may be a ``distributed.Client``, a scheduler address, or None for an embedded
    ``LocalCluster`` sized to the topology (TLS throughout if ``security`` is a
    ``distributed.security.Security``).
    """
    config.validate()
    return Run(config, client, run_dir, security=security)


def _needed_slots(config: ExperimentConfig) -> int:
    policy = config.inference.policy_workers if config.inference.mode == "remote" else 0
    return config.trainer.trainers + policy + config.actors.workers


def _check_cluster(config: ExperimentConfig, client: Client) -> None:
    """Checks that need the cluster, done before anything is submitted."""
    wants_gpu = [f for f in ("trainer.device", "inference.device")
                 if getattr(getattr(config, f.split(".")[0]), "device").startswith("cuda")]
    if config.inference.mode == "inline":
        wants_gpu = [f for f in wants_gpu if f != "inference.device"]
    if wants_gpu and clusters.gpu_count(client) == 0:
        raise ConfigError(wants_gpu[0], "a GPU was requested but no Dask worker offers the resource 'GPU'",
                          "start GPU workers with --resources 'GPU=1,srl_slot=1' or set the device to 'cpu'")


class _ResumeOrUnpause:
    """``Run.resume(run_dir)`` continues a stopped or crashed run; ``run.resume()`` un-pauses a live one."""

    def __get__(self, run: "Run | None", cls: type) -> Callable[..., Any]:
        return cls._continue_run if run is None else run._unpause


class Run:
    """A handle on a running experiment: ``status()``, ``scale(actors=N)``, ``wait()``, ``stop()``."""

    resume = _ResumeOrUnpause()

    def __init__(self, config: ExperimentConfig, client: Client | str | None, run_dir: str | None,
                 security: Any = None, resumed: bool = False):
        self.config = config
        self.run_id = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.run_dir = os.path.abspath(run_dir or config.run_dir or os.path.join("runs", self.run_id))
        if not resumed and checkpoints.paths(checkpoints.folder(self.run_dir)):
            raise ConfigError("run_dir", f"{self.run_dir} holds checkpoints of an earlier run",
                              "continue it with Run.resume(run_dir), or choose an empty run directory")
        self._owns_client = not isinstance(client, Client)
        self._cluster = None
        if client is None:
            self._cluster = clusters.local(n_workers=_needed_slots(config) + SPARE_WORKERS, security=security)
            client = Client(self._cluster)
        elif isinstance(client, str):
            client = Client(client, security=security)
        self.client: Client = client
        _check_cluster(config, client)
        self._write_config(resumed)
        self.metrics = MetricsLog(os.path.join(self.run_dir, "metrics.jsonl"), resume=resumed)
        self.tensorboard = TensorBoardLog(self.run_dir)
        self.supervisor = Supervisor(config.trainer.heartbeat_timeout_s)
        self._secret = codec.new_secret()
        self.client.subscribe_topic(metrics_topic(self.run_id), self._on_metrics)
        self.client.subscribe_topic(heartbeat_topic(self.run_id), self._on_heartbeat)
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._specs: dict[str, tuple[Callable, tuple, bool]] = {}  # worker id -> (task, args, gpu)
        self._submissions: dict[str, int] = {}
        self._stopping: set[str] = set()  # workers told to stop: their exit is no fault
        self._failure: RuntimeError | None = None
        self.actors: dict[int, Any] = {}  # actor index -> future
        self.finished_actors: dict[int, dict[str, Any] | None] = {}  # scaled-away actors' final counters
        self._next_actor = 0
        self.result: dict[str, Any] | None = None
        self.started = time.time()
        self._variable(expected_fragments_name(self.run_id)).set({})
        policy_services = [f"policy-{i}" for i in range(config.inference.policy_workers)]
        sample_services = [sample_service(rank) for rank in range(config.trainer.trainers)]
        for service in ["params", *sample_services, *(policy_services if config.inference.mode == "remote" else [])]:
            self._variable(endpoint_name(self.run_id, service)).set(None)  # readers poll instead of timing out
        self._variable(rendezvous_name(self.run_id)).set(None)

        self.trainers = [self._submit(f"trainer-{rank}", trainer_worker, (self.config, self.run_dir, rank),
                                      gpu=config.trainer.device.startswith("cuda"))
                         for rank in range(config.trainer.trainers)]
        self.policy_workers = []
        if config.inference.mode == "remote":
            gpu = config.inference.device.startswith("cuda")
            self.policy_workers = [self._submit(f"policy-{i}", policy_worker, (self.config, i), gpu=gpu)
                                   for i in range(config.inference.policy_workers)]
        self.scale(actors=config.actors.workers)
        self._supervisor_thread = threading.Thread(target=self._supervise, name="srl-supervisor", daemon=True)
        self._supervisor_thread.start()

    @classmethod
    def _continue_run(cls, run_dir: str, client: Client | str | None = None,
                      config: ExperimentConfig | None = None, security: Any = None) -> "Run":
        """Continue the run in ``run_dir`` from its newest checkpoint, appending to its metrics.

        The config comes from that checkpoint (or ``config.json`` if none was written yet) unless one
        is given. Training picks up at the checkpoint's version, counters and optimiser state.
        """
        run_dir = os.path.abspath(run_dir)
        if config is None:
            found = checkpoints.load_latest(checkpoints.folder(run_dir))
            config = _config_from(run_dir, found[1] if found else None)
        config.validate()
        return cls(config, client, run_dir, security=security, resumed=True)

    def _write_config(self, resumed: bool) -> None:
        os.makedirs(checkpoints.folder(self.run_dir), exist_ok=True)
        path = os.path.join(self.run_dir, "config.json")
        earlier = _read_json(path).get("run_ids", []) if resumed else []
        with open(path, "w") as f:
            json.dump({"run_id": self.run_id, "run_ids": [*earlier, self.run_id], **self.config.to_dict()},
                      f, indent=2)

    # ---------------------------------------------------------------- control
    def _variable(self, name: str) -> Variable:
        return Variable(name, client=self.client)

    def _event(self, name: str) -> Event:
        return Event(name, client=self.client)

    def _submit(self, worker_id: str, fn: Callable, args: tuple, gpu: bool = False):
        """Submit (or resubmit) one SRL worker task; each submission gets its own key."""
        with self._lock:
            self._specs[worker_id] = (fn, args, gpu)
            n = self._submissions.get(worker_id, 0)
            self._submissions[worker_id] = n + 1
        role = worker_id.split("-")[0]
        resources = {clusters.SLOT: 1, **({"GPU": 1} if gpu else {}),
                     **({clusters.role_resource(role): 1} if role in clusters.offered_roles(self.client) else {})}
        key = f"srl-{self.run_id}-{worker_id}" + (f"-r{n}" if n else "")
        return self.client.submit(fn, self.run_id, *args, self._secret, key=key,
                                  resources=resources, pure=False, retries=0)

    def scale(self, actors: int) -> dict[str, Any]:
        """Add or remove actor workers live; grows the cluster when it can and must.

        Returns what happened, including a note when the cluster cannot offer enough slots (the
        extra actors then wait for slots instead of being silently dropped).
        """
        if not isinstance(actors, int) or actors < 1:
            raise ConfigError("actors", f"must be a positive integer, got {actors!r}", "pass actors=1 or more")
        with self._lock:
            while len(self.actors) < actors:
                index = self._next_actor
                self._next_actor += 1
                self.actors[index] = self._submit(f"actor-{index}", actor_worker, (self.config, index))
            note = self._ensure_slots()
            removed = sorted(self.actors)[actors:]
            for index in removed:
                self._stopping.add(f"actor-{index}")
                self._event(stop_event_name(self.run_id, f"actor-{index}")).set()
            for index in removed:
                self.finished_actors[index] = _final(self.actors.pop(index))
        return {"actors": len(self.actors), "removed": [f"actor-{i}" for i in removed], "note": note}

    def _ensure_slots(self) -> str | None:
        needed = len(self.trainers) + len(self.policy_workers) + len(self.actors)
        have = clusters.slot_count(self.client)
        if have >= needed:
            return None
        cluster = self._cluster or getattr(self.client, "cluster", None)
        if cluster is not None and hasattr(cluster, "scale"):
            cluster.scale(len(cluster.workers) + needed - have)
            self.client.wait_for_workers(needed, timeout=120)
            return f"grew the cluster to {needed} SRL slots"
        return (f"the cluster offers {have} SRL slots but {needed} are needed; "
                f"{needed - have} worker(s) wait for free slots")

    def pause(self) -> None:
        """Actors stop stepping (they keep their envs and sockets); ``resume()`` continues."""
        self._event(flag_name(self.run_id, "pause")).set()

    def _unpause(self) -> None:
        self._event(flag_name(self.run_id, "pause")).clear()

    @property
    def paused(self) -> bool:
        return self._event(flag_name(self.run_id, "pause")).is_set()

    @property
    def data_plane_key(self) -> bytes:
        """The run's secret that signs data-plane messages (the episode viewer reads weights with it)."""
        return self._secret

    def checkpoint(self, timeout_s: float = 60.0) -> str:
        """Ask the trainer for a checkpoint now; returns its path once written."""
        return request_checkpoint(self.client, self.run_id, timeout_s)

    def stop(self) -> dict[str, Any]:
        """Stop actors, let the trainer drain every fragment they produced, then stop the rest.

        The result closes the books: ``fragments_produced == fragments_consumed + dropped_stale +
        fragments_lost``, where lost fragments went down with a killed actor or trainer process.
        """
        if self.result is not None:
            return self.result
        self._abort_if_failed()
        with self._lock:
            self._stopping.update(self._slots())
            for index in self.actors:
                self._event(stop_event_name(self.run_id, f"actor-{index}")).set()
            for index, future in list(self.actors.items()):
                self.finished_actors[index] = _final(future)
            self.actors.clear()
        live = {ledger_key(a["actor"], a["inc"]): a["fragments_produced"]
                for a in self.finished_actors.values() if a}
        self._variable(expected_fragments_name(self.run_id)).set(live)
        for rank in range(len(self.trainers)):
            self._event(stop_event_name(self.run_id, f"trainer-{rank}")).set()
        trainer = _merge_trainers([future.result(timeout=STOP_TIMEOUT_S) for future in self.trainers])
        for i in range(len(self.policy_workers)):
            self._event(stop_event_name(self.run_id, f"policy-{i}")).set()
        policy = [p for p in map(_final, self.policy_workers) if p]
        self._closed.set()
        time.sleep(0.2)  # let the last metrics events arrive
        books = account(trainer["ledger"], live, self.supervisor.produced_by_dead_actors(set(live)),
                        trainer["fragments_consumed"], trainer["dropped_stale"])
        _, faults = self.supervisor.snapshot()
        self.result = {
            **books,
            "env_steps": self.metrics.env_steps(),
            "env_errors": sum(a["env_errors"] for a in self.finished_actors.values() if a),
            "version": trainer["version"],
            "rejected": trainer["rejected"] + sum(p["rejected"] for p in policy),
            "unauthenticated": trainer["unauthenticated"] + sum(p["unauthenticated"] for p in policy),
            "malformed": trainer["malformed"],
            "restarts": self.supervisor.restarts(),
            "faults": faults,
            "mean_return_last_20": self.metrics.mean_return(20),
            "checkpoint": trainer.get("checkpoint"),
            "seconds": time.time() - self.started,
        }
        self.final_weights = trainer["weights"]
        self.trainer_digests: list[list[tuple[int, str]]] = trainer["digests"]  # per rank: (version, digest)
        self._finish()
        return self.result

    def _finish(self) -> None:
        self._closed.set()
        try:
            save_png(self.metrics, os.path.join(self.run_dir, "curve.png"), title=self.run_id)
        finally:
            self.client.unsubscribe_topic(metrics_topic(self.run_id))
            self.client.unsubscribe_topic(heartbeat_topic(self.run_id))
            self.metrics.close()
            self.tensorboard.close()
            with open(os.path.join(self.run_dir, "result.json"), "w") as f:
                json.dump(self.result, f, indent=2, default=str)
            if self._owns_client:
                self.client.close()
                if self._cluster is not None:
                    self._cluster.close()

    # ---------------------------------------------------------------- supervision
    def _slots(self) -> dict[str, Any]:
        """Worker id -> its current future."""
        return {**{f"trainer-{i}": f for i, f in enumerate(self.trainers)},
                **{f"policy-{i}": f for i, f in enumerate(self.policy_workers)},
                **{f"actor-{i}": f for i, f in self.actors.items()}}

    def _replace_future(self, worker_id: str, future: Any) -> None:
        role, index = worker_id.split("-")
        if role == "trainer":
            self.trainers[int(index)] = future
        elif role == "policy":
            self.policy_workers[int(index)] = future
        else:
            self.actors[int(index)] = future

    def _supervise(self) -> None:
        while not self._closed.wait(SUPERVISE_S):
            try:
                self._check_futures()
                self._check_heartbeats()
            except Exception as error:  # noqa: BLE001  (e.g. the client closing under us: try again)
                self.supervisor.fault("controller", "supervision error", time.time(), error=repr(error))

    def _check_futures(self) -> None:
        """Resubmit tasks that Dask gave up on or that exited without being told to."""
        with self._lock:
            for worker_id, future in self._slots().items():
                if worker_id in self._stopping or future.status == "pending":
                    continue
                error = future.exception(timeout=5) if future.status == "error" else None
                if error is not None and not isinstance(error, INFRASTRUCTURE_ERRORS):
                    self._failure = worker_failure(worker_id, error)
                    continue
                self.supervisor.fault(worker_id, "resubmitted", time.time(),
                                      reason=repr(error) if error is not None else future.status)
                fn, args, gpu = self._specs[worker_id]
                self._replace_future(worker_id, self._submit(worker_id, fn, args, gpu=gpu))

    def _check_heartbeats(self) -> None:
        """Restart the process of a worker that stopped heart-beating (hung loop or dead host)."""
        now = time.time()
        with self._lock:
            slots = {w: f for w, f in self._slots().items() if w not in self._stopping}
        silent = self.supervisor.silent(list(slots), now)
        if not silent:
            return
        where = {key: address for address, keys in self.client.processing().items() for key in keys}
        for inc in silent:
            address = where.get(slots[inc.worker].key)
            self.supervisor.handled(inc.worker, now)
            if address is not None and address == inc.dask_worker:  # stuck where it runs: restart it
                self.supervisor.fault(inc.worker, "silent", now, inc=inc.inc, dask_worker=address,
                                      silent_s=round(now - inc.last_seen, 1))
                self.client.restart_workers([address], raise_for_error=False)
                continue
            # Its Dask worker is gone and the re-run waits for a free slot (Dask moves it to one when
            # one appears): grow the cluster if it is short of slots and can grow.
            with self._lock:
                note = self._ensure_slots()
            if note:
                self.supervisor.fault(inc.worker, "lost its Dask worker", now, note=note)

    # ---------------------------------------------------------------- observation
    def _on_metrics(self, event: tuple[float, dict[str, Any]]) -> None:
        _, record = event
        if isinstance(record, dict):
            self.metrics.add(record)
            self.tensorboard.add(record, self.metrics)

    def _on_heartbeat(self, event: tuple[float, dict[str, Any]]) -> None:
        _, record = event
        if isinstance(record, dict):
            self.supervisor.on_heartbeat(record, time.time())

    def status(self) -> dict[str, Any]:
        """Workers by role with their state, restarts and latest figures, plus run-level counters."""
        workers = []
        with self._lock:
            futures = self._slots()
        beats, faults = self.supervisor.snapshot()
        latest = self.metrics.workers()
        now = time.time()
        for worker_id, future in futures.items():
            record, beat = latest.get(worker_id, {}), beats.get(worker_id)
            state = future.status
            if state == "pending":
                state = worker_state(beat, now, SILENT_AFTER_S)
            workers.append({"worker": worker_id, "role": worker_id.split("-")[0], "state": state,
                            "host": beat.host if beat else record.get("host"),
                            "pid": beat.pid if beat else record.get("pid"),
                            "incarnation": beat.inc if beat else None,
                            "restarts": self.supervisor.restarts(worker_id),
                            "env_steps_per_s": record.get("env_steps_per_s"),
                            "inference_latency_ms": record.get("inference_latency_ms"),
                            "policy_version": record.get("policy_version", record.get("version"))})
        trainer = latest.get("trainer-0", {})
        trainers = [record for worker, record in latest.items() if worker.startswith("trainer-")]
        return {
            "run_id": self.run_id, "run_dir": self.run_dir, "stopped": self.result is not None,
            "workers": workers,
            "actors": sum(1 for w in workers if w["role"] == "actor" and w["state"] == "running"),
            "env_steps": self.metrics.env_steps(),
            "env_steps_per_s": sum(w["env_steps_per_s"] or 0 for w in workers
                                   if w["role"] == "actor" and w["state"] == "running"),
            "version": trainer.get("version", 0),
            **{key: sum(t.get(key, 0) for t in trainers)
               for key in ("fragments_consumed", "dropped_stale", "rejected", "unauthenticated")},
            "restarts": sum(w["restarts"] for w in workers),
            "faults": faults,
            "error": str(self._failure) if self._failure is not None else None,  # a worker's bug failed the run
            "episodes": len(self.metrics.episodes),
            "mean_return_last_20": self.metrics.mean_return(20),
            "dashboard": self.client.dashboard_link,
        }

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure
        with self._lock:
            futures = self._slots()
        for worker_id, future in futures.items():
            if future.status == "error":
                error = future.exception(timeout=5)
                if not isinstance(error, INFRASTRUCTURE_ERRORS):
                    self._failure = worker_failure(worker_id, error)
                    raise self._failure

    def _abort_if_failed(self) -> None:
        """A failed worker makes a graceful drain impossible: cancel the rest and say why.

        Cancelling does not stop a task's thread (e.g. a trainer blocked meeting a dead peer), and
        the scheduler would hand its slot to the next run while it still runs: the processes that
        run this run's tasks are restarted, which ends them for sure.
        """
        try:
            self._raise_if_failed()
        except RuntimeError as error:
            self._closed.set()
            with self._lock:
                futures = list(self._slots().values())
                keys = {f.key for f in futures}
                running = [address for address, tasks in self.client.processing().items() if keys & set(tasks)]
                self.client.cancel(futures, force=True)
            if running:
                # Bounded: the run has failed already, and a process slow to come back must not hold the caller.
                self.client.restart_workers(running, timeout=RESTART_TIMEOUT_S, raise_for_error=False)
            self.result = {"error": str(error), "seconds": time.time() - self.started}
            self._finish()
            raise

    def wait(self, env_steps: int | None = None, seconds: float | None = None,
             target_return: float | None = None, progress: bool = True) -> dict[str, Any]:
        """Block until a budget is spent or the mean return of the last 20 episodes reaches a target."""
        from tqdm.auto import tqdm

        start = time.time()
        # mininterval keeps a log file (no terminal) to one progress line a second, not four.
        bar = tqdm(total=env_steps, unit="step", disable=not progress, desc=self.config.name, mininterval=1.0)
        try:
            while True:
                self._raise_if_failed()
                steps = self.metrics.env_steps()
                bar.set_postfix(progress_postfix(self.metrics, 20), refresh=False)
                bar.update(steps - bar.n)
                if env_steps is not None and steps >= env_steps:
                    break
                if seconds is not None and time.time() - start >= seconds:
                    break
                if target_return is not None and len(self.metrics.episodes) >= 20 \
                        and self.metrics.mean_return(20) >= target_return:
                    break
                time.sleep(0.25)
        finally:
            bar.close()
        return self.status()

    def panel(self, **kw: Any):
        """The notebook control panel for this run (displays as its ipywidgets; see srl_lab.notebook)."""
        from srl_lab.notebook.panel import Panel

        return Panel(self, **kw)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def worker_failure(worker_id: str, error: BaseException) -> RuntimeError:
    """The run's error when a worker raised (a bug, not a fault): the worker, the exception and the
    traceback from where it was raised on the worker."""
    where = "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
    failure = RuntimeError(f"SRL worker {worker_id} failed: {error!r}\n{where}")
    failure.__cause__ = error
    return failure


def _merge_trainers(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One trainer's view of the run from every data-parallel rank's result (rank 0 first).

    Ranks serve disjoint sets of actors, so their ledgers merge without overlap and counts add up.
    """
    merged = dict(results[0], ledger={k: v for r in results for k, v in r["ledger"].items()})
    for key in ("fragments_consumed", "dropped_stale", "rejected", "unauthenticated", "malformed"):
        merged[key] = sum(r[key] for r in results)
    merged["digests"] = [r["digests"] for r in results]
    return merged


def _final(future: Any) -> dict[str, Any] | None:
    """A stopped worker's result; None if its last incarnation died instead of returning."""
    try:
        return future.result(timeout=STOP_TIMEOUT_S)
    except INFRASTRUCTURE_ERRORS:
        return None


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _config_from(run_dir: str, checkpoint: dict[str, Any] | None) -> ExperimentConfig:
    """The config a run was launched with: exact from a checkpoint, else rebuilt from config.json."""
    import cloudpickle

    if checkpoint is not None:
        return cloudpickle.loads(checkpoint["config_pickle"])
    saved = _read_json(os.path.join(run_dir, "config.json"))
    if not saved:
        raise FileNotFoundError(f"{run_dir} holds neither a checkpoint nor config.json to resume from")
    return ExperimentConfig.from_dict({k: v for k, v in saved.items() if k not in ("run_id", "run_ids")})
