"""The algorithm interface the trainer worker drives.

An algorithm owns a policy and its optimiser. The trainer hands it a ``Batch``: a dict of arrays
``[T, B, ...]`` built from whole fragments (T = fragment length, B = env x agent rows of all fragments
in the batch) with the keys listed below. ``train`` does one update and returns scalar statistics.
Writing a new algorithm means subclassing ``Algorithm`` and passing ``algorithm=MyAlgo`` in the
experiment config; see notebooks/04_custom_env_and_algorithm.

Batch keys: ``obs`` (array or dict), ``actions``, ``logp`` (behaviour log-prob), ``values``
(behaviour value), ``rewards``, ``terminated``, ``truncated``, ``trunc_values`` (value of the final
observation where an episode was truncated), ``last_value`` [B] (value after the last step),
``versions`` [T, B] (policy version that chose each action).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from srl_lab.api.policy import Policy

Batch = dict[str, Any]


class Algorithm:
    """Base class: ``train(batch) -> stats``; state for checkpoints via ``state_dict``."""

    def __init__(self, policy: Policy, config: Any, device: str = "cpu"):
        self.policy = policy.to(device)
        self.config = config
        self.device = device

    def train(self, batch: Batch) -> dict[str, float]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])


def flatten_time_batch(x: np.ndarray) -> np.ndarray:
    """[T, B, ...] -> [T*B, ...]."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])
