"""Throughput of the MuJoCo hide-and-seek variant on the full scene, in env steps per CPU-second.

Full scene: randomwalls, 3 hiders vs 3 seekers, 9 boxes, 2 ramps, uniformly random actions (episode
resets included). CPU time (``time.process_time``) keeps the figure fair on a shared machine. The
last line printed is one JSON object.

    python benchmarks/bench_hide_and_seek_mujoco.py --steps 1000
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.mujoco_env import HideAndSeekMujoco

GOAL = 200.0  # env steps per CPU-second, from the hide-and-seek specification


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=500, help="group steps (each steps every env)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = HideAndSeekMujoco(args.envs, scenario="randomwalls", n_hiders=3, n_seekers=3, n_boxes=9, n_ramps=2,
                            seed=args.seed)
    env.reset()
    actions = np.random.default_rng(args.seed).integers(
        0, spec.ACTION_NVEC, size=(args.steps, args.envs, env.num_agents, len(spec.ACTION_NVEC)))
    cpu, wall = time.process_time(), time.perf_counter()
    for a in actions:
        env.step(a)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = args.steps * args.envs
    print(json.dumps({
        "bench": "hide_and_seek_mujoco_full_scene",
        "env_steps": steps,
        "steps_per_cpu_second": round(steps / cpu, 1),
        "steps_per_wall_second": round(steps / wall, 1),
        "goal_steps_per_cpu_second": GOAL,
    }))


if __name__ == "__main__":
    main()
