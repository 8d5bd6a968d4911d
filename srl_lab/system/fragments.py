"""Trajectory fragments: what actors build step by step and trainers validate and batch.

A fragment holds ``T`` consecutive steps of one env group (``B`` = envs x agents rows). It is sent
once the value *after* its last step is known (the first inference of the next fragment), so the
trainer can bootstrap without a second network pass.

Fragments of a recurrent policy also carry ``states [T, B, ...]``: the policy state each row had
before each step (zero where an episode began), which PPO's recurrent chunks start from. Fragments
of feed-forward policies have no ``states`` key and cost nothing extra.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from srl_lab.api.tree import tree_concat, tree_first_leaf, tree_map, tree_stack

FRAGMENT_KEYS = ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated",
                 "trunc_values", "versions", "last_value")
STATE_KEY = "states"  # recurrent policies only
VALID_KEY = "valid"  # bool [T, B]: False where the env ignored the action (never trained on); absent: all valid
OPTIONAL_KEYS = (STATE_KEY, VALID_KEY)


class FragmentBuilder:
    """Collects one fragment step by step; ``keep`` (row indices) limits what ``arrays`` sends.

    Rows outside ``keep`` are played by the environment's own opponents (``EnvGroup.trained_rows``):
    the policy acts for them too, but the env ignores those actions, so they must not be trained on.
    """

    def __init__(self, length: int, rows: int, keep: np.ndarray | None = None):
        self.length = length
        self.rows = rows
        self.keep = keep
        self.obs: list[Any] = []
        self.actions: list[np.ndarray] = []
        self.logp: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.versions: list[int] = []
        self.states: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.terminated: list[np.ndarray] = []
        self.truncated: list[np.ndarray] = []
        self.trunc_values = np.zeros((length, rows), dtype=np.float32)
        self.valid: np.ndarray | None = None  # allocated at the first invalid row
        self.episodes: list[dict[str, float]] = []
        self.env_errors = 0

    @property
    def steps(self) -> int:
        return len(self.rewards)

    @property
    def full(self) -> bool:
        return self.steps == self.length

    def add_policy_step(self, obs: Any, actions: np.ndarray, logp: np.ndarray, values: np.ndarray,
                        version: int, state: np.ndarray | None = None) -> None:
        """One step's inference; ``state`` is a recurrent policy's state before it (give it every step)."""
        if state is not None:
            self.states.append(state)
        self.obs.append(obs)
        self.actions.append(actions)
        self.logp.append(logp)
        self.values.append(values)
        self.versions.append(version)

    def add_env_step(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                     valid: np.ndarray | None = None) -> None:
        """One env step; ``valid`` (bool rows) marks the rows whose step really happened."""
        if valid is not None and not valid.all():
            if self.valid is None:
                self.valid = np.ones((self.length, self.rows), dtype=bool)
            self.valid[self.steps] = valid
        self.rewards.append(rewards)
        self.terminated.append(terminated)
        self.truncated.append(truncated)

    def arrays(self, last_value: np.ndarray) -> dict[str, Any]:
        out = {
            "obs": tree_stack(self.obs),
            "actions": np.stack(self.actions),
            "logp": np.stack(self.logp).astype(np.float32, copy=False),
            "values": np.stack(self.values).astype(np.float32, copy=False),
            "rewards": np.stack(self.rewards).astype(np.float32, copy=False),
            "terminated": np.stack(self.terminated),
            "truncated": np.stack(self.truncated),
            "trunc_values": self.trunc_values,
            "versions": np.asarray(self.versions, dtype=np.int64),
            "last_value": np.asarray(last_value, dtype=np.float32),
        }
        if self.states:
            out[STATE_KEY] = np.stack(self.states).astype(np.float32, copy=False)
        if self.valid is not None:
            out[VALID_KEY] = self.valid
        if self.keep is not None:  # rows are axis 1 of every [T, B, ...] array, axis 0 of last_value
            keep = self.keep
            for key, value in out.items():
                if key == "last_value":
                    out[key] = value[keep]
                elif key != "versions":
                    out[key] = tree_map(lambda x: x[:, keep], value)
        return out


def check_fragment(arrays: dict[str, Any], length: int) -> str | None:
    """Why a decoded fragment is unusable, or None if it is well formed."""
    if set(arrays) - set(OPTIONAL_KEYS) != set(FRAGMENT_KEYS):
        return f"keys {sorted(arrays)} differ from {sorted(FRAGMENT_KEYS)} (+ optional {OPTIONAL_KEYS})"
    if any(isinstance(v, dict) for k, v in arrays.items() if k != "obs"):
        return "only obs may be a dict of arrays"
    rows = arrays["last_value"].shape
    if len(rows) != 1:
        return "last_value must be 1-D"
    expect = (length, rows[0])
    for key in ("logp", "values", "rewards", "terminated", "truncated", "trunc_values"):
        if arrays[key].shape != expect:
            return f"{key} has shape {arrays[key].shape}, expected {expect}"
    if VALID_KEY in arrays and arrays[VALID_KEY].shape != expect:
        return f"valid has shape {arrays[VALID_KEY].shape}, expected {expect}"
    for key in ("terminated", "truncated", *((VALID_KEY,) if VALID_KEY in arrays else ())):
        if arrays[key].dtype != np.bool_:
            return f"{key} must be boolean"
    if arrays["versions"].shape != (length,):
        return "versions must have one entry per step"
    leaves = [arrays["actions"], tree_first_leaf(arrays["obs"])]
    if isinstance(arrays["obs"], dict):
        leaves += list(arrays["obs"].values())
    if any(leaf.shape[:2] != expect for leaf in leaves):
        return "obs/actions rows do not match"
    finite = ["logp", "values", "rewards", "trunc_values", "last_value"]
    if STATE_KEY in arrays:
        states = arrays[STATE_KEY]
        if states.shape[:2] != expect or states.dtype != np.float32:
            return f"states must be float32 [{length}, {rows[0]}, ...], got {states.dtype} {states.shape}"
        finite.append(STATE_KEY)
    for key in finite:
        if not np.isfinite(arrays[key]).all():
            return f"{key} holds non-finite numbers"
    return None


def check_spaces(arrays: dict[str, Any], observation_space: Any, action_space: Any) -> str | None:
    """Why a well-formed fragment's rows do not fit a policy's spaces, or None: a trainer takes only
    rows shaped like its own policy's observations and actions (not another policy's)."""
    obs = arrays["obs"]
    if isinstance(observation_space, gym.spaces.Dict):
        if not isinstance(obs, dict) or set(obs) != set(observation_space.spaces):
            keys = sorted(obs) if isinstance(obs, dict) else "none"
            return f"obs keys {keys} differ from the policy's {sorted(observation_space.spaces)}"
        parts = [(f"obs[{k!r}]", obs[k], space.shape) for k, space in observation_space.spaces.items()]
    else:
        parts = [("obs", obs, observation_space.shape)]
    if isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        parts.append(("actions", arrays["actions"], action_space.shape))
    for name, leaf, shape in parts:
        if shape is not None and not isinstance(leaf, dict) and tuple(leaf.shape[2:]) != tuple(shape):
            return f"{name} rows have shape {tuple(leaf.shape[2:])}, the policy's space {tuple(shape)}"
    return None


def batch_fragments(fragments: list[dict[str, Any]]) -> dict[str, Any]:
    """Concatenate fragments along the row axis: ``[T, B1+B2+...]`` (``last_value`` along rows).

    ``states`` is kept when every fragment has it (PPO refuses a recurrent batch without it); ``valid``
    when any fragment has it (the others' rows all valid)."""
    keys = [k for k in FRAGMENT_KEYS if k not in ("versions", "last_value")]
    if all(STATE_KEY in f for f in fragments):
        keys.append(STATE_KEY)
    batch = {k: tree_concat([f[k] for f in fragments], axis=1) for k in keys}
    batch["last_value"] = np.concatenate([f["last_value"] for f in fragments])
    if any(VALID_KEY in f for f in fragments):
        batch[VALID_KEY] = np.concatenate([f.get(VALID_KEY, np.ones(f["rewards"].shape, bool)) for f in fragments],
                                          axis=1)
    batch["versions"] = np.concatenate(
        [np.repeat(f["versions"][:, None], f["last_value"].shape[0], axis=1) for f in fragments], axis=1)
    return batch
