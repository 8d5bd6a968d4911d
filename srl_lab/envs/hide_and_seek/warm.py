"""Compile the lite variant's numba kernels into their on-disk cache ahead of the first run.

A fresh checkout otherwise compiles them on first use, about 30 s on one core, inside whatever
starts first: a ``make demo`` spent its first half-minute compiling. ``make`` runs
``python -m srl_lab.envs.hide_and_seek.warm`` after installing; with the cache in place, this and
every later process load the kernels in about a second.
"""
from __future__ import annotations

import time

import numpy as np

from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.lite_jit import NUMBA


def warm(horizon: int = 10) -> float:
    """Play one short episode of each scenario, past its end; return the seconds it took."""
    start = time.perf_counter()
    for scenario in ("quadrant", "randomwalls"):
        env = HideAndSeekLite(2, scenario=scenario, n_hiders=1, n_seekers=1, horizon=horizon, seed=0)
        env.reset()
        for _ in range(horizon + 1):
            env.step(np.zeros((env.num_envs, env.num_agents, 5), np.int64))
    return time.perf_counter() - start


if __name__ == "__main__":
    seconds = warm()
    print(f"hide-and-seek lite kernels {'compiled or loaded' if NUMBA else 'interpreted (no numba)'} "
          f"in {seconds:.1f} s")
