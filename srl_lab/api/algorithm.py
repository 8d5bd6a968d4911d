"""The algorithm interface the trainer worker drives.

An algorithm owns a policy and its optimiser. The trainer hands it a ``Batch``: a dict of arrays
``[T, B, ...]`` built from whole fragments (T = fragment length, B = env x agent rows of all fragments
in the batch) with the keys listed below. ``train`` does one update and returns scalar statistics.

Batch keys: ``obs`` (array or dict), ``actions``, ``logp`` (behaviour log-prob), ``values``
(behaviour value; 0 where inline actors skipped the critic, which they do only for the built-in PPO
with V-trace: ``srl_lab.system.learner.needs_behaviour_values``), ``rewards``, ``terminated``,
``truncated``, ``trunc_values`` (value of the final observation where an episode was truncated),
``last_value`` [B] (value after the last step),
``versions`` [T, B] (policy version that chose each action); optional ``valid`` (bool [T, B],
present when some env ignored an action, e.g. a vector env's delayed reset): rows where it is False
must not be trained on.

Writing a new algorithm (``srl_lab/algorithms/a2c.py`` is a complete one in under 60 lines):

1. subclass ``Algorithm``; the trainer builds it as ``MyAlgo(policy, config.ppo, device)``, so its
   hyper-parameters come from ``PPOConfig`` (or from a closure: any callable with that signature
   works, e.g. ``functools.partial(MyAlgo, beta=0.1)``);
2. in ``train(batch, version=None)``, compute targets with ``srl_lab.algorithms.advantages``
   (``gae``, ``vtrace``: they bootstrap truncated episodes from ``trunc_values``), turn arrays into
   tensors with ``obs_to_tensor`` / ``flatten_time_batch``, get ``(log_probs, entropy, values)``
   with gradients from ``self.policy.evaluate(obs, actions)``, step your optimiser, and return a
   dict of floats (they appear in the run's metrics under ``train``);
3. return every torch optimiser you step from ``optimizers()``: checkpoints save and restore their
   state through the base ``state_dict``, and data-parallel trainers average gradients in a hook on
   each of them (an algorithm that declares none runs with one trainer only); override
   ``state_dict`` / ``load_state_dict`` (calling the base) to add any other statistics, so
   checkpoints resume exactly;
4. run it with ``ExperimentConfig(algorithm=MyAlgo)``. After every ``train`` call the trainer
   publishes ``policy.weights()`` as the next version; actors act with those weights, so anything
   they need (e.g. observation statistics) must live in the policy's parameters or buffers.

A class defined in a notebook cell works too (it travels to the workers by value); see
notebooks/04_custom_env_and_algorithm.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

from srl_lab.api.policy import Policy

Batch = dict[str, Any]


class Moments(Protocol):
    """Running statistics data-parallel trainers average across ranks (e.g. ``ValueNormalizer``)."""

    def state_dict(self) -> dict[str, float]: ...

    def load_state_dict(self, state: dict[str, float]) -> None: ...


class Algorithm:
    """Base class: ``train(batch) -> stats``; ``optimizers()`` and ``state_dict`` for checkpoints."""

    # Optional: running statistics kept outside the policy (PPO's value normaliser), which
    # data-parallel trainers average across ranks after every update. None: there are none.
    value_normalizer: Moments | None = None

    def __init__(self, policy: Policy, config: Any, device: str = "cpu"):
        self.policy = policy.to(device)
        self.config = config
        self.device = device

    def train(self, batch: Batch, version: int | None = None) -> dict[str, float]:
        """One update on ``batch``; ``version`` is the trainer's policy version (what samples are stale against)."""
        raise NotImplementedError

    def optimizers(self) -> Sequence[torch.optim.Optimizer]:
        """Every torch optimiser ``train`` steps; none by default (then nothing is averaged or saved)."""
        return ()

    def state_dict(self) -> dict[str, Any]:
        """The policy and the optimisers' state (key ``optimizer``: one state, or a list of several)."""
        state: dict[str, Any] = {"policy": self.policy.state_dict()}
        optimizers = [o.state_dict() for o in self.optimizers()]
        if optimizers:
            state["optimizer"] = optimizers[0] if len(optimizers) == 1 else optimizers
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        saved = state.get("optimizer")
        if saved is None:  # a checkpoint of an algorithm that declared no optimisers
            return
        saved = saved if isinstance(saved, list) else [saved]
        optimizers = list(self.optimizers())
        if len(saved) != len(optimizers):
            raise ValueError(f"the checkpoint holds {len(saved)} optimiser states, "
                             f"{type(self).__name__} has {len(optimizers)} optimisers")
        for optimizer, optimizer_state in zip(optimizers, saved):
            optimizer.load_state_dict(optimizer_state)


def flatten_time_batch(x: np.ndarray) -> np.ndarray:
    """[T, B, ...] -> [T*B, ...]."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])
