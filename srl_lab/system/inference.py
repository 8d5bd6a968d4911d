"""The inference stream as the actor sees it: post observations for a group, wait for its actions.

``InlineInference`` runs the policy in the actor's own process (CPU; the right default on small
machines); ``RemoteInference`` sends the rows to a policy worker over a DEALER socket and follows the
policy worker to its replacement if it dies. The actor's ring loop is the same for both.

Recurrent policies: a request may carry ``state`` (one row per observation row, the policy state
before this step); without it every row starts from the initial state. The reply then carries the
state after the step. Feed-forward policies send and receive no state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
import zmq

from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.api.tree import tree_first_leaf
from srl_lab.system import codec
from srl_lab.system.control import ENDPOINT_REREAD_S, StopRequested
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import EndpointSource, PeerSocket, Refused, ReportsPeer

RESEND_S = 5.0  # unanswered requests are sent again after this long without any reply


@dataclass
class Reply:
    actions: np.ndarray  # [rows, ...]
    logp: np.ndarray  # [rows]
    values: np.ndarray  # [rows]
    version: int
    state: np.ndarray | None = None  # [rows, ...] policy state after this step (recurrent policies)


def run_policy(policy: Policy, obs, device: str = "cpu") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(actions, logp, values)`` of a feed-forward policy for rows of observations."""
    actions, logp, values, _ = policy.act(obs_to_tensor(obs, device)).numpy()
    return actions, logp, values


def state_shape(policy: Policy) -> tuple[int, ...] | None:
    """The per-row state shape of a recurrent policy, None for a feed-forward one."""
    return tuple(policy.initial_state(1).shape[1:]) if policy.recurrent else None


def step_policy(policy: Policy, obs, state: np.ndarray | None, device: str = "cpu", values: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(actions, logp, values, next_state)`` for rows; ``next_state`` is None for feed-forward policies.

    A recurrent policy starts rows without a ``state`` from ``initial_state``; a feed-forward one
    ignores ``state``. ``values=False`` lets a feed-forward policy skip its critic (values are 0).
    """
    state_in = None
    if policy.recurrent:
        state_in = (policy.initial_state(len(tree_first_leaf(obs))) if state is None
                    else torch.as_tensor(np.asarray(state), dtype=torch.float32, device=device))
    return policy.act(obs_to_tensor(obs, device), state_in, values=values).numpy()


def read_actions(meta: dict[str, Any], arrays: dict[str, Any]) -> tuple[int, Reply]:
    """``(group, reply)`` of an ``actions`` message; raises ``Refused``."""
    group, version = meta.get("group"), meta.get("version", -1)
    if not isinstance(group, int) or not isinstance(version, int):
        raise Refused("inference reply: group and version must be integers")
    parts = [arrays.get(k) for k in ("actions", "logp", "values")]
    if any(p is None or isinstance(p, dict) or p.ndim < 1 for p in parts):
        raise Refused("inference reply: actions, logp and values must be arrays of rows")
    if parts[1].ndim != 1 or parts[2].ndim != 1 or not len(parts[0]) == len(parts[1]) == len(parts[2]):
        raise Refused("inference reply: logp and values must be 1-D, with one entry per action row")
    state = arrays.get("states")
    if state is not None and (isinstance(state, dict) or state.ndim < 1 or len(state) != len(parts[0])
                              or state.dtype.kind != "f"):
        raise Refused("inference reply: states must be float rows, one per action row")
    return group, Reply(parts[0], parts[1], parts[2], version, state)


def smoothed_latency(average_s: float, sample_s: float) -> float:
    """Exponential average of inference call times (the worker table's "inference ms"); the first
    call sets it, so it does not climb from 0 over the first tens of calls."""
    return sample_s if average_s == 0.0 else 0.9 * average_s + 0.1 * sample_s


class InlineInference(ReportsPeer):
    """Policy inside the actor process; weights refreshed from the parameter service between steps.

    ``values_every_step=False`` (the algorithm recomputes the values, as PPO with V-trace does): the
    critic runs only for requests whose values bootstrap a fragment's end or a truncated episode.
    """

    def __init__(self, policy: Policy, params: ParameterClient, should_stop: Callable[[], bool],
                 values_every_step: bool = True):
        self.policy = policy
        self.values_every_step = values_every_step
        self.params = params
        weights = params.wait_first(should_stop)
        if weights is None:
            raise StopRequested("inline inference")
        self.policy.load_weights(weights)
        self._replies: dict[int, Reply] = {}
        self.latency_s = 0.0  # the network's forward pass, averaged: no stream in between

    def counted_peer(self) -> ParameterClient:
        """Its only peer is the parameter service."""
        return self.params

    def post(self, group: int, obs, state: np.ndarray | None = None, bootstrap: bool = True) -> None:
        weights = self.params.poll()
        if weights is not None:
            self.policy.load_weights(weights)
        started = time.monotonic()
        actions, logp, values, next_state = step_policy(self.policy, obs, state,
                                                        values=self.values_every_step or bootstrap)
        self.latency_s = smoothed_latency(self.latency_s, time.monotonic() - started)
        self._replies[group] = Reply(actions, logp, values, self.params.version, next_state)

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Reply | None:
        return self._replies.pop(group)

    def close(self) -> None:
        self.params.close()


class RemoteInference(ReportsPeer):
    """Rows go to a policy worker; replies for other groups of the ring are kept until asked for.

    Requests are kept until answered. When replies stop coming, the actor re-reads the policy
    worker's endpoint: if a replacement has published a new one it reconnects and sends every
    unanswered request again; after ``RESEND_S`` of silence it re-sends them anyway (a duplicate
    answer is refused as a "late reply"). Refused replies are counted in ``refusals``.
    """

    def __init__(self, ctx: zmq.Context, source: EndpointSource, key: bytes):
        self.peer = PeerSocket(ctx, zmq.DEALER, source, key, kinds=frozenset({"actions"}))
        self.key = key
        self._replies: dict[int, Reply] = {}
        self._requests: dict[int, list] = {}  # group -> encoded request, until answered
        self._posted_at: dict[int, float] = {}
        self.latency_s = 0.0  # exponential average of post -> reply time

    def post(self, group: int, obs, state: np.ndarray | None = None, bootstrap: bool = True) -> None:
        """``bootstrap`` is the ring's hint that these values are needed; the policy worker always sends them."""
        self._posted_at[group] = time.monotonic()
        arrays = {"obs": obs} if state is None else {"obs": obs, "states": state}
        frames = codec.encode("infer", {"group": group}, arrays, key=self.key)
        self._requests[group] = frames
        self.peer.sock.send_multipart(frames, copy=False)

    def _recover(self, quiet_s: float) -> bool:
        """Nothing came back for ``quiet_s``: follow a replacement policy worker, or ask again.

        True if the unanswered requests were sent again."""
        moved = self.peer.follow(force=True)
        if not (moved or quiet_s >= RESEND_S):
            return False
        for frames in self._requests.values():
            self.peer.sock.send_multipart(frames, copy=False)
        return True

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Reply | None:
        """The reply for ``group``; None if the worker was told to stop while waiting."""
        quiet_since = next_check = time.monotonic()
        while group not in self._replies:
            msg = self.peer.receiver.recv(timeout_ms=200)
            if msg is None:
                if should_stop():
                    return None
                now = time.monotonic()
                if now - quiet_since >= ENDPOINT_REREAD_S and now >= next_check:
                    next_check = now + ENDPOINT_REREAD_S
                    if self._recover(now - quiet_since):
                        quiet_since = now
                continue
            quiet_since = time.monotonic()
            _, _, meta, arrays = msg
            try:
                g, reply = read_actions(meta, arrays)
            except Refused as refused:
                self.peer.receiver.refuse(str(refused))
                continue
            if g not in self._requests:
                self.peer.receiver.refuse("late reply", malformed=False)
                continue
            del self._requests[g]
            self.latency_s = smoothed_latency(self.latency_s, time.monotonic() - self._posted_at.pop(g))
            self._replies[g] = reply
        return self._replies.pop(group)

    def close(self) -> None:
        self.peer.close()
