"""The run's SRL worker tasks: who they are, what each runs, its current future, and the slots they need.

Every SRL worker is one long-running Dask task holding one ``srl_slot``. A ``WorkerId`` names it
(``trainer-0``, ``policy-1``, ``actor-7``: the string in heartbeats, metrics and task keys). The
``WorkerSet`` submits each task, resubmits it under a fresh key when it must run again, remembers
which workers were told to stop (their exit is no fault) and grows the cluster when it is short of
slots.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from distributed import Client

from srl_lab import cluster as clusters
from srl_lab.config import ConfigError, ExperimentConfig
from srl_lab.policies import DEFAULT, for_policy, policy_ids, policy_worker_slots, trainer_slots

ROLES = ("trainer", "policy", "actor")
GROW_TIMEOUT_S = 120


@dataclass(frozen=True)
class WorkerId:
    """One SRL worker: its role and its index within the role."""

    role: str
    index: int

    def __post_init__(self) -> None:
        if self.role not in ROLES or self.index < 0:
            raise ValueError(f"not an SRL worker: role {self.role!r}, index {self.index}")

    def __str__(self) -> str:
        return f"{self.role}-{self.index}"

    def __lt__(self, other: "WorkerId") -> bool:
        """Trainers first, then policy workers, then actors; by index within a role."""
        return (ROLES.index(self.role), self.index) < (ROLES.index(other.role), other.index)

    @classmethod
    def parse(cls, text: str) -> "WorkerId":
        """``"actor-7"`` -> ``WorkerId("actor", 7)``; ValueError for anything else."""
        role, _, index = text.partition("-")
        if not index.isdigit():
            raise ValueError(f"not an SRL worker id: {text!r} (expected e.g. 'actor-7')")
        return cls(role, int(index))


def slots_needed(config: ExperimentConfig, actors: int | None = None) -> int:
    """SRL slots a run of ``config`` holds: its trainers and policy workers (every policy's) and actors."""
    return len(trainer_slots(config)) + len(policy_worker_slots(config)) + (
        config.actors.workers if actors is None else actors)


def trainer_on_gpu(config: ExperimentConfig, policy: str) -> bool:
    """Whether ``policy``'s trainers run on CUDA (each then asks for ``GPU=1``)."""
    return for_policy(config, policy).trainer.device.startswith("cuda")


def policy_workers_on_gpu(config: ExperimentConfig) -> bool:
    """Whether the policy workers run on CUDA (each then asks for ``GPU=1``)."""
    return config.inference.device.startswith("cuda")


def gpu_slots_needed(config: ExperimentConfig) -> int:
    """Of ``slots_needed``, the trainers and policy workers on CUDA."""
    trainers = sum(trainer_on_gpu(config, policy) for policy, _ in trainer_slots(config))
    return trainers + (len(policy_worker_slots(config)) if policy_workers_on_gpu(config) else 0)


def check_resources(config: ExperimentConfig, client: Client) -> None:
    """Checks that need the cluster (GPUs asked for are offered), done before anything is submitted."""
    sections = [("trainer.device" if policy == DEFAULT else f"policies[{policy!r}].device",
                 for_policy(config, policy).trainer) for policy in policy_ids(config)]
    if config.inference.mode == "remote":
        sections.append(("inference.device", config.inference))
    wants_gpu = [name for name, section in sections if section.device.startswith("cuda")]
    if wants_gpu and clusters.gpu_count(client) == 0:
        raise ConfigError(wants_gpu[0], "a GPU was requested but no Dask worker offers the resource 'GPU'",
                          "start GPU workers with --resources 'GPU=1,srl_slot=1' or set the device to 'cpu'")


@dataclass(frozen=True)
class TaskSpec:
    """What a worker runs: ``fn(run_id, *args, secret)``, on a GPU slot or not."""

    fn: Callable[..., Any]
    args: tuple
    gpu: bool = False


class WorkerSet:
    """The current future of every SRL worker of one run, and the submissions behind them."""

    def __init__(self, client: Client, run_id: str, secret: bytes, cluster: Any = None):
        self.client = client
        self.run_id = run_id
        self._secret = secret
        self._cluster = cluster  # an embedded or adaptive cluster the set may grow, else None
        self.lock = threading.RLock()
        self._specs: dict[WorkerId, TaskSpec] = {}
        self._submissions: dict[WorkerId, int] = {}
        self.futures: dict[WorkerId, Any] = {}
        self.stopping: set[WorkerId] = set()  # told to stop: their exit is no fault

    def submit(self, worker: WorkerId, spec: TaskSpec) -> Any:
        """Submit one worker's task; each submission gets its own key (``...-r<n>`` after the first)."""
        with self.lock:
            self._specs[worker] = spec
            n = self._submissions.get(worker, 0)
            self._submissions[worker] = n + 1
            resources = {clusters.SLOT: 1, **({"GPU": 1} if spec.gpu else {})}
            if worker.role in clusters.offered_roles(self.client):
                resources[clusters.role_resource(worker.role)] = 1
            key = f"srl-{self.run_id}-{worker}" + (f"-r{n}" if n else "")
            future = self.client.submit(spec.fn, self.run_id, *spec.args, self._secret, key=key,
                                        resources=resources, pure=False, retries=0)
            self.futures[worker] = future
            return future

    def resubmit(self, worker: WorkerId) -> Any:
        """Run a worker's task again (Dask gave up on it, or it ended without being told to)."""
        return self.submit(worker, self._specs[worker])

    def of_role(self, role: str) -> dict[int, Any]:
        """Index -> future of the role's workers, in index order."""
        with self.lock:
            return {w.index: f for w, f in sorted(self.futures.items()) if w.role == role}

    def live(self) -> dict[WorkerId, Any]:
        """Workers not told to stop, with their futures."""
        with self.lock:
            return {w: f for w, f in self.futures.items() if w not in self.stopping}

    def remove(self, worker: WorkerId) -> Any:
        """Forget a worker told to stop; returns its last future (its result is its final report)."""
        with self.lock:
            self.stopping.add(worker)
            return self.futures.pop(worker)

    def next_index(self, role: str) -> int:
        """An index never used by the role in this run (a scaled-away actor's index is not reused)."""
        with self.lock:
            return max((w.index + 1 for w in self._specs if w.role == role), default=0)

    def ensure_slots(self) -> dict[str, Any]:
        """Grow the cluster when it offers fewer SRL slots than the set holds and can grow.

        Returns ``{"needed", "offered", "note"}``; the note says what was done or that some workers
        wait for free slots (they are queued by the scheduler, never dropped).
        """
        with self.lock:
            needed = len(self.futures)
        have = clusters.slot_count(self.client)
        slots = {"needed": needed, "offered": have, "note": None}
        if have >= needed:
            return slots
        cluster = self._cluster or getattr(self.client, "cluster", None)
        if cluster is not None and hasattr(cluster, "scale"):
            cluster.scale(len(cluster.workers) + needed - have)
            self.client.wait_for_workers(needed, timeout=GROW_TIMEOUT_S)
            return {**slots, "offered": needed, "note": f"grew the cluster to {needed} SRL slots"}
        return {**slots, "note": f"the cluster offers {have} SRL slots but {needed} are needed; "
                                 f"{needed - have} worker(s) wait for free slots"}
