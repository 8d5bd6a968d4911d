"""Data-parallel trainers: N trainer workers of one policy, kept identical with torch.distributed.

Each trainer consumes its own share of the fragments (actor ``i`` sends to trainer ``i % N``) and the
trainers take every step together: gradients are averaged across them right before each optimiser
step (a hook on each optimiser the algorithm declares in ``Algorithm.optimizers()``), and
the statistics that are not gradients (observation normaliser buffers, the value normaliser) are
averaged after each update. Every step ends with a digest comparison of the weights, so ranks that
drift apart stop the run with an error instead of training silently on different policies.

Rendezvous goes through Dask: rank 0 opens a ``TCPStore`` on its Dask worker's host address and
publishes it in a ``distributed.Variable``; the other ranks read it. CPU tensors travel over gloo and,
when the trainers run on CUDA, CUDA tensors over nccl (one process group serves both). Only rank 0 runs the parameter service and
writes checkpoints; the other ranks' books (counters and ledger) are gathered into them. A collective
that fails because a peer went away raises ``TrainerGroupBroken``.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import time
from typing import Any, Callable, TypeVar

import numpy as np
import psutil
import torch
import torch.distributed as dist

from srl_lab.policies import DEFAULT
from srl_lab.system.control import StopRequested, WorkerContext
from srl_lab.system.streams import host_ip

RENDEZVOUS_POLL_S = 0.2
T = TypeVar("T")


class TrainerGroupBroken(RuntimeError):
    """A data-parallel trainer lost a peer mid-collective (or while forming the group).

    An infrastructure fault, not a bug in the user's code: the group is not rebuilt in place;
    ``Run.resume(run_dir)`` continues from the newest checkpoint (which holds every rank's books).
    Raised from the failed torch.distributed call, which is chained as its cause.
    """


def collective(rank: int, what: str, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, a torch.distributed call; its failure raises ``TrainerGroupBroken``.

    Every rank makes the same calls in the same order, so a collective that fails means a peer (or
    the store) went away; torch reports that as a ``RuntimeError`` (``DistError`` among them).
    """
    try:
        return call(*args, **kwargs)
    except RuntimeError as error:
        raise TrainerGroupBroken(f"trainer-{rank} lost a peer of its data-parallel group in {what} "
                                 f"({error}); stop the run and continue it with Run.resume(run_dir)") from error


def rendezvous_name(run_id: str, policy: str = DEFAULT) -> str:
    """Where a policy's rank 0 publishes its store (each policy's trainers form their own group)."""
    return f"{run_id}/trainer-rendezvous" + ("" if policy == DEFAULT else f"@{policy}")


def _published_store(ctx: WorkerContext, variable: Any) -> dict[str, Any]:
    """Rank 0's store address once published; heart-beats and honours stop meanwhile."""
    while True:
        try:
            address = variable.get(timeout=1.0)
        except TimeoutError:
            address = None
        if address:
            return address
        if ctx.should_stop():
            raise StopRequested("trainer-0 rendezvous")
        time.sleep(RENDEZVOUS_POLL_S)


def _interface_of(ip: str) -> str | None:
    """The network interface holding ``ip`` (gloo must use the one the other hosts can reach)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == ip for a in addresses):
            return name
    return None


class TrainerGroup:
    """The process group of a run's data-parallel trainers, seen from one rank.

    ``join`` forms it through Dask; the constructor takes a process group already initialised.
    Every collective goes through ``collective``, so a lost peer raises ``TrainerGroupBroken``.
    """

    def __init__(self, rank: int, world: int, store: Any = None):
        self.rank, self.world = rank, world
        self.store = store  # rank 0's TCPStore: kept alive as long as the group
        self.digests: list[tuple[int, str]] = []  # (version, weight digest) after every step

    @classmethod
    def join(cls, ctx: WorkerContext, rank: int, world: int, timeout_s: float, cuda: bool = False,
             policy: str = DEFAULT) -> "TrainerGroup":
        """Rendezvous: rank 0 opens the store and publishes it, the others wait for it and join."""
        from distributed import Variable

        ip = host_ip()
        interface = _interface_of(ip)
        if interface is not None:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
        backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
        timeout = datetime.timedelta(seconds=timeout_s)
        variable = Variable(rendezvous_name(ctx.run_id, policy))
        if rank == 0:
            store = dist.TCPStore(ip, 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
            variable.set({"host": ip, "port": store.port, "inc": ctx.incarnation})
        else:
            address = _published_store(ctx, variable)
            store = collective(rank, "rendezvous", dist.TCPStore, address["host"], address["port"], world,
                               is_master=False, timeout=timeout)
        collective(rank, "rendezvous", dist.init_process_group, backend, store=store, rank=rank,
                   world_size=world, timeout=timeout)
        return cls(rank, world, store)

    def _collective(self, what: str, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return collective(self.rank, what, call, *args, **kwargs)

    # ------------------------------------------------------------ agreement
    def agree(self, ready: bool, stop: bool, checkpoint: bool) -> tuple[bool, bool, bool]:
        """(every rank has a batch, some rank was told to stop, rank 0 wants a checkpoint)."""
        flags = torch.tensor([int(not ready), int(stop), int(checkpoint and self.rank == 0)])
        self._collective("agree", dist.all_reduce, flags)
        return flags[0].item() == 0, flags[1].item() > 0, flags[2].item() > 0

    def common_batch_size(self, fragments: int) -> int:
        """Fragments every rank can train on this step (they must take the same number of steps)."""
        size = torch.tensor([fragments])
        self._collective("common_batch_size", dist.all_reduce, size, op=dist.ReduceOp.MIN)
        return int(size.item())

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        values: list[Any] = [None] * self.world
        self._collective("gather", dist.all_gather_object, values, value)
        return values

    # ------------------------------------------------------------ keeping ranks identical
    def attach(self, algorithm: Any) -> None:
        """Average gradients across ranks before every optimiser step of ``algorithm``."""
        optimizers = list(algorithm.optimizers())
        if not optimizers:
            raise TypeError(f"{type(algorithm).__name__}.optimizers() returns no torch optimiser; data-parallel "
                            "trainers average gradients in an optimiser hook (declare them, or set trainer.trainers=1)")
        for optimizer in optimizers:
            optimizer.register_step_pre_hook(lambda opt, args, kwargs: self._average_gradients(opt))

    def _average_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for p in params:  # every rank must reduce the same shapes: a missing gradient is a zero one
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        self._collective("gradient averaging", dist.all_reduce, flat)
        flat /= self.world
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    def broadcast_from_rank0(self, algorithm: Any) -> None:
        """Start every rank from rank 0's weights, buffers and optimiser state (e.g. after a restore)."""
        state = self.gather(algorithm.state_dict() if self.rank == 0 else None)[0]
        if self.rank != 0:
            algorithm.load_state_dict(state)

    def average_statistics(self, policy: torch.nn.Module, algorithm: Any) -> None:
        """Average what each rank learned outside the gradients: float buffers and value-norm moments."""
        buffers = [b for b in policy.buffers() if b.is_floating_point()]
        if buffers:
            flat = torch.cat([b.reshape(-1).double() for b in buffers])
            self._collective("statistics averaging", dist.all_reduce, flat)
            flat /= self.world
            offset = 0
            for b in buffers:
                b.copy_(flat[offset:offset + b.numel()].view_as(b))
                offset += b.numel()
        normalizer = algorithm.value_normalizer
        if normalizer is not None:
            state = normalizer.state_dict()
            moments = torch.tensor([float(v) for v in state.values()], dtype=torch.float64)
            self._collective("statistics averaging", dist.all_reduce, moments)
            normalizer.load_state_dict(dict(zip(state, (moments / self.world).tolist())))

    def check_identical(self, policy: torch.nn.Module, version: int) -> None:
        """Compare a digest of every parameter and buffer across ranks; raise if any rank differs."""
        digest = weights_digest(policy)
        digests = self.gather(digest)
        if len(set(digests)) != 1:
            raise RuntimeError(f"data-parallel trainers diverged at version {version}: weight digests {digests}")
        self.digests.append((version, digest))

    def close(self) -> None:
        """Leave the group and drop rank 0's store."""
        if dist.is_initialized():
            with contextlib.suppress(RuntimeError):  # a group a peer already left may fail to tear down
                dist.destroy_process_group()
        self.store = None


def weights_digest(policy: torch.nn.Module) -> str:
    """A short hash of every parameter and buffer, in state-dict order."""
    h = hashlib.sha1()
    for tensor in policy.state_dict().values():
        h.update(np.ascontiguousarray(tensor.detach().cpu().numpy()).tobytes())
    return h.hexdigest()[:16]
