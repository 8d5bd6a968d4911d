"""``srl_lab/CueMemory-v0``: a cue shown once must be recalled later — solvable only with memory.

Importing this module registers the id with gymnasium; ``gym.make("srl_lab.envs.memory:srl_lab/CueMemory-v0")``
imports it on the fly.
"""
from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

ENV_ID = "srl_lab/CueMemory-v0"


class CueMemoryEnv(gym.Env):
    """One of ``num_cues`` cues appears (one-hot) in the first observation only; ``delay`` blank
    observations follow, then a query (last feature = 1) at t = delay + 1. The action at the query
    is rewarded 1 if it names the cue, 0 otherwise, and the episode terminates; earlier actions do
    nothing. A memoryless policy succeeds with probability 1 / num_cues."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, num_cues: int = 4, delay: int = 8):
        if num_cues < 2 or delay < 0:
            raise ValueError("CueMemory needs num_cues >= 2 and delay >= 0")
        self.num_cues = num_cues
        self.delay = delay
        self.observation_space = gym.spaces.Box(0.0, 1.0, (num_cues + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(num_cues)
        self._cue = 0
        self._t = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.num_cues + 1, np.float32)
        if self._t == 0:
            obs[self._cue] = 1.0
        if self._t == self.delay + 1:
            obs[-1] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(self.num_cues))
        self._t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._t == self.delay + 1:
            success = int(action) == self._cue
            return self._obs(), float(success), True, False, {"success": success}
        self._t += 1
        return self._obs(), 0.0, False, False, {}


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CueMemoryEnv)
