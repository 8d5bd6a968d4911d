"""The inference stream as the actor sees it: post observations for a group, wait for its actions.

``InlineInference`` runs the policy in the actor's own process (CPU; the right default on small
machines); ``RemoteInference`` sends the rows to a policy worker over a DEALER socket. The actor's
ring loop is the same for both.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import zmq

from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.system import codec
from srl_lab.system.parameters import ParameterClient
from srl_lab.system.streams import Endpoint, Receiver, connect


@dataclass
class Reply:
    actions: np.ndarray  # [rows, ...]
    logp: np.ndarray  # [rows]
    values: np.ndarray  # [rows]
    version: int


def run_policy(policy: Policy, obs, device: str = "cpu") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    actions, logp, values = policy.act(obs_to_tensor(obs, device))
    return actions.cpu().numpy(), logp.cpu().numpy(), values.cpu().numpy()


class InlineInference:
    """Policy inside the actor process; weights refreshed from the parameter service between steps."""

    def __init__(self, policy: Policy, params: ParameterClient):
        self.policy = policy
        self.params = params
        self.policy.load_weights(params.wait_first())
        self._replies: dict[int, Reply] = {}
        self.latency_s = 0.0  # no stream in between

    def post(self, group: int, obs) -> None:
        weights = self.params.poll()
        if weights is not None:
            self.policy.load_weights(weights)
        self._replies[group] = Reply(*run_policy(self.policy, obs), self.params.version)

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Reply | None:
        return self._replies.pop(group)

    def close(self) -> None:
        self.params.close()


class RemoteInference:
    """Rows go to a policy worker; replies for other groups of the ring are kept until asked for."""

    def __init__(self, ctx: zmq.Context, endpoint: Endpoint, actor_index: int):
        self.sock = connect(ctx, zmq.DEALER, endpoint)
        self.receiver = Receiver(self.sock, frozenset({"actions"}))
        self.actor_index = actor_index
        self._replies: dict[int, Reply] = {}
        self.latency_s = 0.0  # exponential average of post -> reply time
        self._posted_at: dict[int, float] = {}

    def post(self, group: int, obs) -> None:
        self._posted_at[group] = time.monotonic()
        self.sock.send_multipart(codec.encode("infer", {"group": group}, {"obs": obs}), copy=False)

    def wait(self, group: int, should_stop: Callable[[], bool]) -> Reply | None:
        """The reply for ``group``; None if the worker was told to stop while waiting."""
        while group not in self._replies:
            msg = self.receiver.recv(timeout_ms=200)
            if msg is None:
                if should_stop():
                    return None
                continue
            _, _, meta, arrays = msg
            g = meta.get("group")
            if not isinstance(g, int) or g not in self._posted_at or not {"actions", "logp", "values"} <= arrays.keys():
                self.receiver.rejected += 1
                continue
            self.latency_s = 0.9 * self.latency_s + 0.1 * (time.monotonic() - self._posted_at.pop(g))
            self._replies[g] = Reply(arrays["actions"], arrays["logp"], arrays["values"],
                                     int(meta.get("version", -1)))
        return self._replies.pop(group)

    def close(self) -> None:
        self.sock.close(linger=0)

