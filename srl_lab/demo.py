"""``make demo``: a short training run on the embedded Dask cluster with a progress bar.

Writes the run directory (config, metrics, checkpoints, learning-curve PNG) and prints where it is.
"""
from __future__ import annotations

import argparse

from srl_lab.presets import fast_cartpole
from srl_lab.system.controller import launch


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Train PPO on the numpy-vectorised CartPole-v1 on an embedded "
                                                 "Dask cluster (srl_lab.presets.fast_cartpole).")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=3.0, help="upper bound on training time")
    parser.add_argument("--run-dir", default=None)
    args = parser.parse_args(argv)
    config = fast_cartpole(actors=args.actors, name="demo-cartpole")
    run = launch(config, run_dir=args.run_dir)
    print(f"run directory: {run.run_dir}\nDask dashboard: {run.client.dashboard_link}")
    try:
        run.wait(env_steps=20_000_000, seconds=args.minutes * 60, target_return=490.0)
    finally:
        result = run.stop()
    print(f"mean return of the last 20 episodes: {result['mean_return_last_20']:.1f} "
          f"after {result['env_steps']:,} env steps in {result['seconds']:.0f} s")
    print(f"learning curve: {run.run_dir}/curve.png")
    return result


if __name__ == "__main__":
    main()
