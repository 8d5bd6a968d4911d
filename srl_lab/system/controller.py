"""The controller: builds the topology from a config, supervises it, scales it live, stops it.

``launch(config)`` starts an embedded ``LocalCluster(processes=True)`` when no client is given, so a
notebook, a recipe script and a test all run this one code path. Every SRL worker is a long-running
Dask task holding one ``srl_slot``; the data plane between them is ZeroMQ, Dask only carries control.
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any

from distributed import Client, Event, Variable

from srl_lab import cluster as clusters
from srl_lab.config import ConfigError, ExperimentConfig
from srl_lab.curves import save_png
from srl_lab.system.actor_worker import actor_worker
from srl_lab.system.control import (checkpoint_path_name, expected_fragments_name, flag_name, metrics_topic,
                                    stop_event_name)
from srl_lab.system.metrics import MetricsLog
from srl_lab.system.policy_worker import policy_worker
from srl_lab.system.trainer_worker import trainer_worker

STOP_TIMEOUT_S = 120.0


def launch(config: ExperimentConfig, client: Client | str | None = None, run_dir: str | None = None) -> "Run":
    """Validate ``config``, then start trainer, policy workers (remote inference) and actors.

    ``client`` may be a ``distributed.Client``, a scheduler address, or None for an embedded
    ``LocalCluster`` sized to the topology.
    """
    config.validate()
    return Run(config, client, run_dir)


def _needed_slots(config: ExperimentConfig) -> int:
    policy = config.inference.policy_workers if config.inference.mode == "remote" else 0
    return 1 + policy + config.actors.workers


def _check_cluster(config: ExperimentConfig, client: Client) -> None:
    """Checks that need the cluster, done before anything is submitted."""
    wants_gpu = [f for f in ("trainer.device", "inference.device")
                 if getattr(getattr(config, f.split(".")[0]), "device").startswith("cuda")]
    if config.inference.mode == "inline":
        wants_gpu = [f for f in wants_gpu if f != "inference.device"]
    if wants_gpu and clusters.gpu_count(client) == 0:
        raise ConfigError(wants_gpu[0], "a GPU was requested but no Dask worker offers the resource 'GPU'",
                          "start GPU workers with --resources 'GPU=1,srl_slot=1' or set the device to 'cpu'")


class Run:
    """A handle on a running experiment: ``status()``, ``scale(actors=N)``, ``wait()``, ``stop()``."""

    def __init__(self, config: ExperimentConfig, client: Client | str | None, run_dir: str | None):
        self.config = config
        self.run_id = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.run_dir = os.path.abspath(run_dir or config.run_dir or os.path.join("runs", self.run_id))
        self._owns_client = not isinstance(client, Client)
        self._cluster = None
        if client is None:
            self._cluster = clusters.local(n_workers=_needed_slots(config))
            client = Client(self._cluster)
        elif isinstance(client, str):
            client = Client(client)
        self.client: Client = client
        _check_cluster(config, client)
        os.makedirs(os.path.join(self.run_dir, "checkpoints"), exist_ok=True)
        with open(os.path.join(self.run_dir, "config.json"), "w") as f:
            json.dump({"run_id": self.run_id, **config.to_dict()}, f, indent=2)
        self.metrics = MetricsLog(os.path.join(self.run_dir, "metrics.jsonl"))
        self.client.subscribe_topic(metrics_topic(self.run_id), self._on_metrics)
        self._lock = threading.Lock()
        self.actors: dict[int, Any] = {}  # actor index -> future
        self.finished_actors: dict[int, dict[str, Any]] = {}  # scaled-away actors' final counters
        self._next_actor = 0
        self.result: dict[str, Any] | None = None
        self.started = time.time()
        Variable(expected_fragments_name(self.run_id)).set(-1)

        self.trainer = self._submit(trainer_worker, "trainer-0", self.config, self.run_dir,
                                    gpu=config.trainer.device.startswith("cuda"))
        self.policy_workers = []
        if config.inference.mode == "remote":
            gpu = config.inference.device.startswith("cuda")
            self.policy_workers = [self._submit(policy_worker, f"policy-{i}", self.config, i, gpu=gpu)
                                   for i in range(config.inference.policy_workers)]
        self.scale(actors=config.actors.workers)

    # ---------------------------------------------------------------- control
    def _submit(self, fn, worker_id: str, *args: Any, gpu: bool = False):
        resources = {clusters.SLOT: 1, **({"GPU": 1} if gpu else {})}
        return self.client.submit(fn, self.run_id, *args, key=f"srl-{self.run_id}-{worker_id}",
                                  resources=resources, pure=False, retries=0)

    def scale(self, actors: int) -> dict[str, Any]:
        """Add or remove actor workers live; grows the cluster when it can and must.

        Returns what happened, including a note when the cluster cannot offer enough slots (the
        extra actors then wait for slots instead of being silently dropped).
        """
        if not isinstance(actors, int) or actors < 1:
            raise ConfigError("actors", f"must be a positive integer, got {actors!r}", "pass actors=1 or more")
        with self._lock:
            note = None
            while len(self.actors) < actors:
                index = self._next_actor
                self._next_actor += 1
                self.actors[index] = self._submit(actor_worker, f"actor-{index}", self.config, index)
            note = self._ensure_slots()
            removed = sorted(self.actors)[actors:]
            for index in removed:
                Event(stop_event_name(self.run_id, f"actor-{index}")).set()
            for index in removed:
                future = self.actors.pop(index)
                self.finished_actors[index] = future.result(timeout=STOP_TIMEOUT_S)
        return {"actors": len(self.actors), "removed": [f"actor-{i}" for i in removed], "note": note}

    def _ensure_slots(self) -> str | None:
        needed = 1 + len(self.policy_workers) + len(self.actors)
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
        Event(flag_name(self.run_id, "pause")).set()

    def resume(self) -> None:
        Event(flag_name(self.run_id, "pause")).clear()

    @property
    def paused(self) -> bool:
        return Event(flag_name(self.run_id, "pause")).is_set()

    def checkpoint(self, timeout_s: float = 60.0) -> str:
        """Ask the trainer for a checkpoint now; returns its path once written."""
        path_var = Variable(checkpoint_path_name(self.run_id))
        path_var.set("")
        Event(flag_name(self.run_id, "checkpoint")).set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            path = path_var.get()
            if path:
                return path
            time.sleep(0.1)
        raise TimeoutError("the trainer wrote no checkpoint in time")

    def stop(self) -> dict[str, Any]:
        """Stop actors, let the trainer drain every fragment they produced, then stop the rest."""
        if self.result is not None:
            return self.result
        self._abort_if_failed()
        with self._lock:
            for index in self.actors:
                Event(stop_event_name(self.run_id, f"actor-{index}")).set()
            for index, future in list(self.actors.items()):
                self.finished_actors[index] = future.result(timeout=STOP_TIMEOUT_S)
            self.actors.clear()
        produced = sum(a["fragments_produced"] for a in self.finished_actors.values())
        Variable(expected_fragments_name(self.run_id)).set(produced)
        Event(stop_event_name(self.run_id, "trainer-0")).set()
        trainer = self.trainer.result(timeout=STOP_TIMEOUT_S)
        for i, future in enumerate(self.policy_workers):
            Event(stop_event_name(self.run_id, f"policy-{i}")).set()
        policy = [f.result(timeout=STOP_TIMEOUT_S) for f in self.policy_workers]
        time.sleep(0.2)  # let the last metrics events arrive
        self.result = {
            "fragments_produced": produced,
            "fragments_consumed": trainer["fragments_consumed"],
            "dropped_stale": trainer["dropped_stale"],
            "env_steps": sum(a["env_steps"] for a in self.finished_actors.values()),
            "env_errors": sum(a["env_errors"] for a in self.finished_actors.values()),
            "version": trainer["version"],
            "rejected": trainer["rejected"] + sum(p["rejected"] for p in policy),
            "malformed": trainer["malformed"],
            "mean_return_last_20": self.metrics.mean_return(20),
            "checkpoint": trainer.get("checkpoint"),
            "seconds": time.time() - self.started,
        }
        self.final_weights = trainer["weights"]
        self._finish()
        return self.result

    def _finish(self) -> None:
        try:
            save_png(self.metrics, os.path.join(self.run_dir, "curve.png"), title=self.run_id)
        finally:
            self.client.unsubscribe_topic(metrics_topic(self.run_id))
            self.metrics.close()
            with open(os.path.join(self.run_dir, "result.json"), "w") as f:
                json.dump(self.result, f, indent=2)
            if self._owns_client:
                self.client.close()
                if self._cluster is not None:
                    self._cluster.close()

    # ---------------------------------------------------------------- observation
    def _on_metrics(self, event: tuple[float, dict[str, Any]]) -> None:
        _, record = event
        if isinstance(record, dict):
            self.metrics.add(record)

    def status(self) -> dict[str, Any]:
        """Workers by role with their state and latest figures, plus run-level counters."""
        workers = []
        futures = {"trainer-0": self.trainer, **{f"policy-{i}": f for i, f in enumerate(self.policy_workers)},
                   **{f"actor-{i}": f for i, f in self.actors.items()}}
        latest = self.metrics.workers()
        now = time.time()
        for worker_id, future in futures.items():
            record = latest.get(worker_id, {})
            state = future.status
            if state == "pending":
                state = "running" if record and now - record.get("time", 0) < 10 else "starting"
            workers.append({"worker": worker_id, "role": worker_id.split("-")[0], "state": state,
                            "host": record.get("host"), "pid": record.get("pid"),
                            "env_steps_per_s": record.get("env_steps_per_s"),
                            "inference_latency_ms": record.get("inference_latency_ms"),
                            "policy_version": record.get("policy_version", record.get("version"))})
        trainer = latest.get("trainer-0", {})
        return {
            "run_id": self.run_id, "run_dir": self.run_dir, "stopped": self.result is not None,
            "workers": workers,
            "actors": sum(1 for w in workers if w["role"] == "actor" and w["state"] == "running"),
            "env_steps": self.metrics.env_steps(),
            "env_steps_per_s": sum(w["env_steps_per_s"] or 0 for w in workers if w["role"] == "actor"),
            "version": trainer.get("version", 0),
            "fragments_consumed": trainer.get("fragments_consumed", 0),
            "dropped_stale": trainer.get("dropped_stale", 0),
            "episodes": len(self.metrics.episodes),
            "mean_return_last_20": self.metrics.mean_return(20),
            "dashboard": self.client.dashboard_link,
        }

    def _futures(self) -> list:
        return [self.trainer, *self.policy_workers, *self.actors.values()]

    def _raise_if_failed(self) -> None:
        for future in self._futures():
            if future.status == "error":
                raise RuntimeError(f"SRL worker {future.key} failed: {future.exception()!r}") \
                    from future.exception()

    def _abort_if_failed(self) -> None:
        """A failed worker makes a graceful drain impossible: cancel the rest and say why."""
        try:
            self._raise_if_failed()
        except RuntimeError as error:
            self.client.cancel(self._futures(), force=True)
            self.result = {"error": str(error), "seconds": time.time() - self.started}
            self._finish()
            raise

    def wait(self, env_steps: int | None = None, seconds: float | None = None,
             target_return: float | None = None, progress: bool = True) -> dict[str, Any]:
        """Block until a budget is spent or the mean return of the last 20 episodes reaches a target."""
        from tqdm.auto import tqdm

        start = time.time()
        bar = tqdm(total=env_steps, unit="step", disable=not progress, desc=self.config.name)
        try:
            while True:
                self._raise_if_failed()
                steps = self.metrics.env_steps()
                bar.n = steps
                bar.set_postfix(ret=f"{self.metrics.mean_return(20):.1f}", refresh=False)
                bar.refresh()
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
