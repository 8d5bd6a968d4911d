"""Hide-and-seek environment throughput: random-action env steps per CPU-second.

Env steps count environments × steps (not agent-steps); CPU time is ``time.process_time()`` of
this process, after a warm-up step has compiled everything; each figure is the median of 3
repeats. Also measures numba's first-use compile cost of the lite kernels in fresh processes:
cold (empty ``NUMBA_CACHE_DIR``) and cached (same directory again).

    python benchmarks/hide_and_seek_env.py [--quick]

The last stdout line is one JSON object (``null`` for a variant that is not installed).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from srl_lab.envs import registry

_FIRST_USE = """
import time
t0 = time.perf_counter()
import numpy as np
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
env = HideAndSeekLite(2, seed=0)
env.reset()
env.step(np.tile([5, 5, 5, 0, 0], (2, env.num_agents, 1)))
print(time.perf_counter() - t0)
"""


def steps_per_cpu_second(name: str, num_envs: int, steps: int, repeats: int = 3, **kwargs) -> float:
    env = registry.make(name, num_envs, seed=0, **kwargs)
    env.reset()
    rng = np.random.default_rng(0)
    nvec = env.action_space.nvec
    pool = [rng.integers(0, nvec, (num_envs, env.num_agents, len(nvec))) for _ in range(16)]
    env.step(pool[0])  # warm-up: compiles / loads every kernel
    rates = []
    for _ in range(repeats):
        start = time.process_time()
        for k in range(steps):
            env.step(pool[k % len(pool)])
        rates.append(num_envs * steps / (time.process_time() - start))
    env.close()
    return statistics.median(rates)


def first_use_seconds(cache_dir: str) -> float:
    """Wall time of importing, building and stepping the lite env in a fresh process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", _FIRST_USE], env=env, check=True, capture_output=True,
                         text=True, timeout=900)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    result: dict[str, float | None] = {}
    result["lite_2v2_steps_per_cpu_s"] = steps_per_cpu_second(
        "hide_and_seek_lite", 1024, int(160 * scale) or 1, scenario="quadrant", n_hiders=2, n_seekers=2,
        n_boxes=4)
    print(f"lite quadrant 2v2, 4 boxes, 1024 envs: {result['lite_2v2_steps_per_cpu_s']:,.0f} steps/CPU-s")
    result["lite_3v3_steps_per_cpu_s"] = steps_per_cpu_second(
        "hide_and_seek_lite", 1024, int(120 * scale) or 1, scenario="randomwalls", n_hiders=3, n_seekers=3,
        n_boxes=9, n_ramps=2)
    print(f"lite randomwalls 3v3, 9 boxes, 1024 envs: {result['lite_3v3_steps_per_cpu_s']:,.0f} steps/CPU-s")
    result["mujoco_full_steps_per_cpu_s"] = None
    if importlib.util.find_spec("mujoco") and importlib.util.find_spec("srl_lab.envs.hide_and_seek.mujoco_env"):
        result["mujoco_full_steps_per_cpu_s"] = steps_per_cpu_second(
            "hide_and_seek", 4, int(100 * scale) or 1, scenario="randomwalls", n_hiders=3, n_seekers=3,
            n_boxes=9, n_ramps=2)
        print(f"mujoco full scene (6 agents, 9 boxes, 2 ramps): "
              f"{result['mujoco_full_steps_per_cpu_s']:,.0f} steps/CPU-s")
    else:
        print("mujoco variant not available")
    with tempfile.TemporaryDirectory() as cache:
        result["numba_compile_cold_s"] = first_use_seconds(cache)
        result["numba_compile_cached_s"] = first_use_seconds(cache)
    print(f"lite first use: {result['numba_compile_cold_s']:.1f} s cold, "
          f"{result['numba_compile_cached_s']:.1f} s from numba's cache")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
