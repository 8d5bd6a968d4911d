"""Value normalisation: the value head predicts returns in units of their running mean and std."""
from __future__ import annotations

import numpy as np


class ValueNormalizer:
    """Debiased exponential moving mean and std of the value targets (one update per batch, or its parts).

    ``normalize(R) = (R - mean) / std`` is what the value head learns; ``denormalize`` turns its
    outputs (the behaviour values the actors recorded) back into returns for the advantages. It is
    the identity before the first update.
    """

    def __init__(self, beta: float = 0.99, min_var: float = 1e-4):
        self.beta = beta
        self.min_var = min_var
        self.first = 0.0  # EMA of E[R]
        self.second = 0.0  # EMA of E[R^2]
        self.debias = 0.0  # EMA of 1: divides out the zero start

    def update(self, returns: np.ndarray, share: float = 1.0) -> None:
        """One batch's returns; a part of it (``share`` of its rows) moves the statistics that much, so a
        batch fed in parts decays the old statistics by ``beta`` in all, as it would whole."""
        b = self.beta ** share
        self.first = b * self.first + (1 - b) * float(np.mean(returns))
        self.second = b * self.second + (1 - b) * float(np.mean(np.square(returns)))
        self.debias = b * self.debias + (1 - b)

    def mean_std(self) -> tuple[float, float]:
        if self.debias == 0.0:
            return 0.0, 1.0
        mean = self.first / self.debias
        var = max(self.second / self.debias - mean * mean, self.min_var)
        return mean, float(np.sqrt(var))

    def normalize(self, x: np.ndarray) -> np.ndarray:
        mean, std = self.mean_std()
        return ((x - mean) / std).astype(np.float32)

    def denormalize(self, x: np.ndarray) -> np.ndarray:
        mean, std = self.mean_std()
        return (x * std + mean).astype(np.float32)

    def state_dict(self) -> dict[str, float]:
        return {"first": self.first, "second": self.second, "debias": self.debias}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.first, self.second, self.debias = state["first"], state["second"], state["debias"]
