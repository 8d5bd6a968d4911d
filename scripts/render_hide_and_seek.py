"""Save a mid-episode top-down frame of each available hide-and-seek variant as a PNG.

    python scripts/render_hide_and_seek.py --out frames/
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from srl_lab.envs import registry


def _variants() -> list[tuple[str, dict]]:
    found = [("hide_and_seek_lite", {"scenario": "quadrant"}),
             ("hide_and_seek_lite", {"scenario": "randomwalls", "n_hiders": 3, "n_seekers": 3})]
    if importlib.util.find_spec("srl_lab.envs.hide_and_seek.mujoco_env") is not None:
        found.append(("hide_and_seek", {}))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for the PNG files")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, kwargs in _variants():
        try:
            env = registry.make(name, 1, seed=args.seed, **kwargs)
        except ImportError as exc:
            print(f"skipping {name}: {exc}")
            continue
        env.reset()
        rng = np.random.default_rng(args.seed)
        horizon = getattr(env, "horizon", 80)
        for _ in range(horizon // 2):  # past preparation: seekers move too
            env.step(rng.integers(0, env.action_space.nvec, size=(1, env.num_agents, 5)))
        frame = env.render(0)
        path = args.out / f"{name}_{kwargs.get('scenario', 'full')}.png"
        plt.imsave(path, frame)
        print(f"saved {path} ({frame.shape[1]}x{frame.shape[0]})")
        env.close()


if __name__ == "__main__":
    main()
