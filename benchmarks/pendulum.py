"""PPO with a Gaussian action head on Pendulum-v1, through the runtime (embedded cluster, inline inference).

Trains until the mean return of the last 20 episodes reaches ``--target`` (or ``--seconds`` pass)
and reports it; a random policy scores about -1200, a swing-up controller about -150. Pendulum's
rewards are dense and its episodes are cut at 200 steps, so it checks Box actions, truncation
bootstrapping and value normalisation together.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import time

from srl_lab.config import (
    ActorConfig,
    EnvConfig,
    ExperimentConfig,
    InferenceConfig,
    PolicyConfig,
    PPOConfig,
    TrainerConfig,
)
from srl_lab.models.mlp_lstm import MLPLSTMPolicy
from srl_lab.system.controller import launch


def config(seed: int = 0) -> ExperimentConfig:
    return ExperimentConfig(
        name="pendulum", env=EnvConfig(id="Pendulum-v1"), seed=seed,
        actors=ActorConfig(workers=1, ring_size=2, envs_per_group=4, fragment_length=256),
        inference=InferenceConfig(mode="inline"),
        trainer=TrainerConfig(batch_steps=4096, max_version_lag=1),
        # short horizon (gamma 0.9) and many small steps per batch: the usual PPO settings for Pendulum
        ppo=PPOConfig(lr=1e-3, gamma=0.9, gae_lambda=0.95, epochs=10, minibatch_size=256, ent_coef=0.0,
                      norm_value=True),
        policy=PolicyConfig(factory=MLPLSTMPolicy))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=-250.0, help="stop once the last 20 episodes average this")
    parser.add_argument("--seconds", type=float, default=600.0, help="give up after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default="runs/bench/pendulum")
    args = parser.parse_args()

    start = time.perf_counter()
    run = launch(config(args.seed), run_dir=args.run_dir)
    try:
        run.wait(target_return=args.target, seconds=args.seconds, progress=False)
    finally:
        result = run.stop()
    print(json.dumps({"mean_return_last_20": result["mean_return_last_20"], "target": args.target,
                      "reached": result["mean_return_last_20"] >= args.target, "env_steps": result["env_steps"],
                      "versions": result["version"], "dropped_stale": result["dropped_stale"],
                      "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
