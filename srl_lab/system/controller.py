"""``launch(config)`` and ``Run``: the handle a notebook, a recipe or a test holds on a running experiment.

``launch`` starts an embedded ``LocalCluster(processes=True)`` when no client is given, so all three
run this one code path. ``Run`` is a facade over the parts named for what they do: ``worker_set``
(worker ids, submission, slots), ``supervision`` (the loop that heals faults, and the one classifier
that turns a bug into the run's error), ``shutdown`` (the drain that closes the books, the abort of
a failed run), ``run_directory``, ``run_status``. Each policy (``srl_lab.policies``) has trainers.

Security: every data-plane message is signed with a per-run secret made here; it reaches the workers
as a task argument over Dask (under TLS when the cluster uses ``distributed.security.Security``).

A run's tasks belong to the client that launched it. When that client goes (the kernel died or
lost the scheduler), the scheduler frees their slots; every worker exits within a second, the
trainer after a checkpoint, and ``Run.resume(run_dir, client=address)`` from a new kernel continues
from it. A controller whose client reconnects resubmits the workers.
"""
from __future__ import annotations

import dataclasses
import os
import time
import uuid
from typing import Any, Callable

from distributed import Client, Event

from srl_lab import cluster as clusters
from srl_lab.config import ConfigError, ExperimentConfig, check_actors_feed_trainers
from srl_lab.curves import save_png
from srl_lab.system import codec, run_directory, shutdown
from srl_lab.policies import is_multi_policy, policy_worker_slots, return_key, trainer_slots
from srl_lab.system.actor_worker import actor_worker
from srl_lab.system.control import (
    flag_name, heartbeat_topic, metrics_topic, publish_placeholders, request_checkpoint,
)
from srl_lab.system.metrics import MetricsLog, progress_postfix
from srl_lab.system.policy_worker import policy_worker
from srl_lab.system.run_status import run_status
from srl_lab.system.supervision import SupervisionLoop
from srl_lab.system.supervisor import Supervisor
from srl_lab.system.tensorboard_log import TensorBoardLog
from srl_lab.system.trainer_worker import trainer_worker
from srl_lab.system.worker_set import (TaskSpec, WorkerId, WorkerSet, check_resources, gpu_slots_needed,
                                      policy_workers_on_gpu, slots_needed, trainer_on_gpu)

SPARE_WORKERS = 1  # idle processes in an embedded cluster, so a replacement starts at once


def launch(config: ExperimentConfig, client: Client | str | None = None, run_dir: str | None = None,
           security: Any = None) -> "Run":
    """Validate ``config``, then start trainer, policy workers (remote inference) and actors.

    ``client`` may be a ``distributed.Client``, a scheduler address, or None for an embedded
    ``LocalCluster`` sized to the topology (TLS throughout if ``security`` is a
    ``distributed.security.Security``).
    """
    config.validate()
    return Run(config, client, run_dir, security=security)


class _ResumeOrUnpause:
    """``Run.resume(run_dir)`` continues a stopped or crashed run; ``run.resume()`` un-pauses a live one."""

    def __get__(self, run: "Run | None", cls: type) -> Callable[..., Any]:
        return cls._continue_run if run is None else run._unpause


class Run:
    """A handle on a running experiment: ``status()``, ``scale(actors=N)``, ``wait()``, ``stop()``."""

    resume = _ResumeOrUnpause()

    def __init__(self, config: ExperimentConfig, client: Client | str | None, run_dir: str | None,
                 security: Any = None, resumed: bool = False):
        self.config = config  # as launched; ``set_ring_size`` changes only actors started later
        self._actor_config = config
        self.run_id = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.run_dir = os.path.abspath(run_dir or config.run_dir or os.path.join("runs", self.run_id))
        run_directory.prepare(self.run_dir, self.run_id, config, resumed)
        self._owns_client = not isinstance(client, Client)
        self._cluster = None
        if client is None:
            gpus = gpu_slots_needed(config)
            self._cluster = clusters.local(n_workers=slots_needed(config) - gpus + SPARE_WORKERS, gpu_workers=gpus,
                                           security=security)
            client = Client(self._cluster)
        elif isinstance(client, str):
            client = Client(client, security=security)
        self.client: Client = client
        check_resources(config, client)
        self.metrics = MetricsLog(os.path.join(self.run_dir, "metrics.jsonl"), resume=resumed)
        self.tensorboard = TensorBoardLog(self.run_dir)
        self.supervisor = Supervisor(config.trainer.heartbeat_timeout_s)
        self._secret = codec.new_secret()
        self._subscribe()
        self.workers = WorkerSet(self.client, self.run_id, self._secret, self._cluster)
        self.finished_actors: dict[int, dict[str, Any] | None] = {}  # scaled-away actors' final counters
        self.result: dict[str, Any] | None = None
        self.started = time.time()
        publish_placeholders(self.client, self.run_id, config)
        for index, (policy, _) in enumerate(trainer_slots(config)):
            self.workers.submit(WorkerId("trainer", index), TaskSpec(
                trainer_worker, (config, self.run_dir, index),
                gpu=trainer_on_gpu(config, policy)))
        for index, _ in enumerate(policy_worker_slots(config)):
            self.workers.submit(WorkerId("policy", index), TaskSpec(
                policy_worker, (config, index), gpu=policy_workers_on_gpu(config)))
        self.scale(actors=config.actors.workers)
        self.supervision = SupervisionLoop(self.workers, self.supervisor, on_reconnect=self._subscribe).start()

    @classmethod
    def _continue_run(cls, run_dir: str, client: Client | str | None = None,
                      config: ExperimentConfig | None = None, security: Any = None) -> "Run":
        """Continue the run in ``run_dir`` from its newest checkpoint, appending to its metrics.

        The config comes from that checkpoint (or ``config.json`` if none was written yet) unless one
        is given. Training picks up at the checkpoint's version, counters and optimiser state.
        """
        run_dir = os.path.abspath(run_dir)
        newest = run_directory.newest_checkpoints(run_dir)
        config = config or run_directory.config_to_resume(run_dir, newest)
        config.validate()
        run_directory.check_checkpoints_fit(run_dir, config, newest)
        return cls(config, client, run_dir, security=security, resumed=True)

    # ---------------------------------------------------------------- the workers
    @property
    def actors(self) -> dict[int, Any]:
        """Actor index -> current future of every running actor worker."""
        return self.workers.of_role("actor")

    def scale(self, actors: int) -> dict[str, Any]:
        """Add or remove actor workers live; grows the cluster when it can and must. With
        ``trainer.batch_per_actor`` the trainer's batch follows the actors that send to it.

        Returns ``{"actors", "removed", "note", "slots": {"needed", "offered"}}``; the note says when
        the cluster cannot offer enough slots (the extra actors then wait for slots, never dropped).
        """
        if not isinstance(actors, int) or actors < 1:
            raise ConfigError("actors", f"must be a positive integer, got {actors!r}", "pass actors=1 or more")
        check_actors_feed_trainers(self.config, actors, "actors")
        with self.workers.lock:
            running = self.actors
            for _ in range(actors - len(running)):
                index = self.workers.next_index("actor")
                self.workers.submit(WorkerId("actor", index), TaskSpec(actor_worker, (self._actor_config, index)))
            slots = self.workers.ensure_slots()
            removed = [WorkerId("actor", index) for index in sorted(running)[actors:]]
            for worker in removed:
                self.workers.stopping.add(worker)
                shutdown.tell_to_stop(self.workers, worker)
            for worker in removed:
                self.finished_actors[worker.index] = shutdown.final(self.workers.remove(worker))
        return {"actors": len(self.actors), "removed": [str(w) for w in removed], "note": slots["note"],
                "slots": {"needed": slots["needed"], "offered": slots["offered"]}}

    @property
    def ring_size(self) -> int:
        """Env groups per actor worker for actors started from now on."""
        return self._actor_config.actors.ring_size

    def set_ring_size(self, size: int) -> None:
        """Actors started from now on run ``size`` env groups; running ones keep theirs."""
        actors = dataclasses.replace(self._actor_config.actors, ring_size=size)
        self._actor_config = dataclasses.replace(self._actor_config, actors=actors).validate()

    def pause(self) -> None:
        """Actors stop stepping (they keep their envs and sockets); ``resume()`` continues."""
        self._pause_flag().set()

    def _unpause(self) -> None:
        self._pause_flag().clear()

    @property
    def paused(self) -> bool:
        return self._pause_flag().is_set()

    def _pause_flag(self) -> Event:
        return Event(flag_name(self.run_id, "pause"), client=self.client)

    @property
    def data_plane_key(self) -> bytes:
        """The run's secret that signs data-plane messages (the episode viewer reads weights with it)."""
        return self._secret

    def checkpoint(self, timeout_s: float = 60.0) -> str:
        """Ask the trainer for a checkpoint now; returns its path once written."""
        return request_checkpoint(self.client, self.run_id, timeout_s)

    # ---------------------------------------------------------------- stopping
    def stop(self) -> dict[str, Any]:
        """Stop actors, let the trainer drain every fragment they produced, then stop the rest.

        The result closes the books: ``fragments_produced == fragments_consumed + dropped_stale +
        fragments_lost``, where lost fragments went down with a killed actor or trainer process.
        """
        if self.result is not None:
            return self.result
        self._abort_if_failed()
        drained = shutdown.drain(self.workers, self.finished_actors, self.supervisor, trainer_slots(self.config))
        trainer = next(iter(drained["trainers"].values()))  # the first (the only one of a single-policy run)
        self.result = {
            **drained["books"],
            "env_steps": self.metrics.env_steps(),
            "env_errors": drained["env_errors"],
            "version": trainer["version"],
            **drained["refusals"],
            "restarts": self.supervisor.restarts(),
            "faults": self.supervisor.snapshot()[1],
            "mean_return_last_20": self.metrics.mean_return(20, return_key(self.config)),
            "checkpoint": trainer.get("checkpoint"),
            "seconds": time.time() - self.started,
        }
        if is_multi_policy(self.config):  # each policy's books close on their own
            self.result["policies"] = shutdown.policy_results(drained, self.metrics)
        self.final_weights = trainer["weights"]
        self.final_weights_by_policy = {policy: r["weights"] for policy, r in drained["trainers"].items()}
        self.trainer_digests: list[list[tuple[int, str]]] = trainer["digests"]  # per rank: (version, digest)
        self._finish()
        return self.result

    def _abort_if_failed(self) -> None:
        """A failed run cannot drain: abort its workers, record the error and raise it."""
        try:
            self.supervision.raise_if_failed()
        except RuntimeError as error:
            self.supervision.closed.set()
            shutdown.abort(self.workers, restart=self._cluster is None)
            self.result = {"error": str(error), "seconds": time.time() - self.started}
            self._finish()
            raise

    def _finish(self) -> None:
        self.supervision.closed.set()
        try:
            save_png(self.metrics, os.path.join(self.run_dir, "curve.png"), title=self.run_id)
        finally:
            self.client.unsubscribe_topic(metrics_topic(self.run_id))
            self.client.unsubscribe_topic(heartbeat_topic(self.run_id))
            self.metrics.close()
            self.tensorboard.close()
            run_directory.write_result(self.run_dir, self.result)
            if self._owns_client:
                self.client.close()
                if self._cluster is not None:
                    self._cluster.close()

    # ---------------------------------------------------------------- observation
    def _subscribe(self) -> None:
        """Receive the workers' metrics and heartbeats (again, after the client reconnected)."""
        self.client.subscribe_topic(metrics_topic(self.run_id), self._on_metrics)
        self.client.subscribe_topic(heartbeat_topic(self.run_id), self._on_heartbeat)

    def _on_metrics(self, event: tuple[float, dict[str, Any]]) -> None:
        if isinstance(record := event[1], dict):
            self.metrics.add(record)
            self.tensorboard.add(record, self.metrics)

    def _on_heartbeat(self, event: tuple[float, dict[str, Any]]) -> None:
        if isinstance(record := event[1], dict):
            self.supervisor.on_heartbeat(record, time.time())

    def status(self) -> dict[str, Any]:
        """Workers by role with their state, restarts and latest figures, plus run-level counters."""
        return run_status(self)

    def wait(self, env_steps: int | None = None, seconds: float | None = None,
             target_return: float | None = None, progress: bool = True) -> dict[str, Any]:
        """Block until a budget is spent, the mean return of the last 20 episodes reaches a target, or
        the run stops; with no budget and no target, until the run stops (or a worker's bug fails it)."""
        from tqdm.auto import tqdm

        for name, value in (("env_steps", env_steps), ("seconds", seconds), ("target_return", target_return)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(name, f"must be a number, got {value!r}", f"e.g. run.wait({name}=60)")
        if target_return is not None and is_multi_policy(self.config):
            raise ValueError("target_return is ambiguous with several policies: wait for env_steps or seconds, "
                             "and read each policy's return in run.status()['policies']")
        start = time.time()
        # mininterval keeps a log file (no terminal) to one progress line a second, not four; the bar
        # starts from the steps already made (a resumed run, a second wait), so its rate is this wait's.
        bar = tqdm(total=env_steps, initial=self.metrics.env_steps(), unit="step", disable=not progress,
                   desc=self.config.name, mininterval=1.0)
        try:
            while True:
                self.supervision.raise_if_failed()
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
                if self.result is not None:  # stopped, e.g. from another thread: nothing more will come
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
