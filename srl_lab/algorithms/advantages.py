"""Advantage estimators on ``[T, B]`` arrays: GAE and V-trace, with truncation bootstrapped correctly.

At a step where the episode ends, the next value is 0 if it *terminated* and the value of the final
observation (``trunc_values``) if it was *truncated* (time limit): cutting a time-limited episode is
not the MDP ending, so its return must be bootstrapped.
"""
from __future__ import annotations

import numpy as np


def gae(rewards: np.ndarray, values: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
        trunc_values: np.ndarray, last_value: np.ndarray, gamma: float, lam: float
        ) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation; returns ``(advantages, returns)`` shaped ``[T, B]``.

    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), where V(s_{t+1}) is 0 after termination,
    ``trunc_values[t]`` after truncation, else ``values[t+1]`` (``last_value`` at t = T-1);
    A_t = delta_t + gamma * lam * A_{t+1}, with the recursion cut where the episode ended.
    """
    T = rewards.shape[0]
    ended = terminated | truncated
    next_values = np.concatenate([values[1:], last_value[None]], axis=0)
    next_values = np.where(terminated, 0.0, np.where(truncated, trunc_values, next_values))
    deltas = rewards + gamma * next_values - values
    advantages = np.zeros_like(values, dtype=np.float32)
    running = np.zeros_like(last_value, dtype=np.float32)
    for t in reversed(range(T)):
        running = deltas[t] + gamma * lam * np.where(ended[t], 0.0, running)
        advantages[t] = running
    return advantages, (advantages + values).astype(np.float32)


def vtrace(rewards: np.ndarray, values: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
           trunc_values: np.ndarray, last_value: np.ndarray, log_rhos: np.ndarray, gamma: float,
           rho_bar: float = 1.0, c_bar: float = 1.0, lam: float = 1.0, weight_advantages: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:
    """V-trace (Espeholt et al. 2018); returns ``(advantages, vs)`` shaped ``[T, B]``.

    ``log_rhos = log pi(a_t|s_t) - log mu(a_t|s_t)`` (target policy against the behaviour one);
    rho_t = min(rho_bar, e^log_rho), c_t = lam * min(c_bar, e^log_rho), and V(s_{t+1}) as in ``gae``:

        vs_t - V(s_t) = rho_t * (r_t + gamma * V(s_{t+1}) - V(s_t)) + gamma * c_t * (vs_{t+1} - V(s_{t+1}))
        A_t           = rho_t * (r_t + gamma * vs_{t+1} - V(s_t))

    with the recursion cut where the episode ended, and vs_{t+1} there replaced by the next value
    (0 after termination, ``trunc_values[t]`` after truncation). ``weight_advantages=False`` leaves
    rho_t out of A_t, for a loss whose own ratio against the behaviour policy weights each row.
    """
    T = rewards.shape[0]
    rhos = np.exp(log_rhos)
    clipped_rhos = np.minimum(rho_bar, rhos)
    cs = lam * np.minimum(c_bar, rhos)
    ended = terminated | truncated
    next_values = np.concatenate([values[1:], last_value[None]], axis=0)
    next_values = np.where(terminated, 0.0, np.where(truncated, trunc_values, next_values))
    deltas = clipped_rhos * (rewards + gamma * next_values - values)
    vs_minus_v = np.zeros_like(values, dtype=np.float32)
    running = np.zeros_like(last_value, dtype=np.float32)
    for t in reversed(range(T)):
        running = deltas[t] + gamma * cs[t] * np.where(ended[t], 0.0, running)
        vs_minus_v[t] = running
    vs = values + vs_minus_v
    next_vs = np.concatenate([vs[1:], last_value[None]], axis=0)
    next_vs = np.where(terminated, 0.0, np.where(truncated, trunc_values, next_vs))
    advantages = rewards + gamma * next_vs - values
    if weight_advantages:
        advantages = clipped_rhos * advantages
    return advantages.astype(np.float32), vs.astype(np.float32)
