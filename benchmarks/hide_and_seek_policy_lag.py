"""How far one PPO update moves the showcase's policy when the actors act on older weights.

Trains ``showcase_config`` (lite quadrant, 1 v 1) in this process (``single_process``'s ring and
learner, no Dask), with the actors' ring acting on the weights of ``L`` updates before the trainer's
own, for each ``--lags`` value, from the same seed. After every update the ring takes the weights of
version ``max(0, v - L)``; ``max_version_lag`` is raised to L + 1, so no fragment is dropped as
stale. Reports per lag the median, 95th percentile and maximum of the update's
``approx_kl`` (KL of the policy after each minibatch step from the policy the update began with,
the proximal one V-trace and the clip measure from), the median ``clip_frac`` and the mean entropy
of the last 20 updates.

Why: with many actor workers (twelve on a GPU machine, four on 2 cores) single updates moved the
policy far (approx_kl above 1, half the rows outside the clip) and the policy's entropy collapsed,
where one actor never passed an approx_kl of 0.009. This isolates the actors' lag from everything
else that changes with the actor count (processes, cores, fragment order).

How it could mislead: ``L`` is held fixed, where a cluster's lag varies from fragment to fragment;
80 updates are the first minutes of a run only; one seed per lag (runs differ a lot between seeds:
read several).

Figures (2-core machine, the defaults: ``--updates 80``, lags 0, 3, 8, 12; the two seeds run side
by side, one core each). approx_kl median / 95th percentile / maximum, then the entropy over the
last 20 updates (8.6 at the start):

| L | seed 0 | seed 1 |
| --- | --- | --- |
| 0 | 0.0008 / 0.0017 / 0.0024, 7.1 | 0.0012 / 0.0024 / 0.0032, 6.8 |
| 3 | 0.0010 / 0.0030 / 0.0084, 6.8 | 0.0016 / 0.0064 / 0.0118, 6.5 |
| 8 | 0.0016 / 0.018 / 0.043, 5.5 | 0.0038 / 0.045 / 0.125, 3.0 |
| 12 | 0.0020 / 0.074 / 0.140, 4.6 | 0.0100 / 0.073 / 0.120, 2.8 |

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import copy
import json

import numpy as np
import torch

from srl_lab.api.policy import Policy
from srl_lab.config import ExperimentConfig
from srl_lab.envs.hide_and_seek.showcase import showcase_config
from srl_lab.system.learner import Learner
from srl_lab.system.single_process import SharedPolicyInference, learner_ring


class LaggedInference(SharedPolicyInference):
    """Acts with a copy of the policy that ``follow`` keeps ``lag`` versions behind the learner's."""

    def __init__(self, learner: Learner, lag: int):
        super().__init__(learner)
        self.lag = lag
        self.policy = copy.deepcopy(learner.policy)
        self.version = 0
        self.history = {0: learner.policy.weights()}  # version -> weights, from the acting version on

    def acting(self) -> tuple[Policy, int]:
        return self.policy, self.version

    def follow(self) -> None:
        """After an update: keep the new version's weights and act with those ``lag`` versions behind."""
        self.history[self.learner.version] = self.learner.policy.weights()
        self.version = max(0, self.learner.version - self.lag)
        self.policy.load_weights(self.history[self.version])
        for old in [v for v in self.history if v < self.version]:
            del self.history[old]


def measure(config: ExperimentConfig, lag: int, updates: int) -> dict[str, float]:
    """Train ``updates`` updates with the actors ``lag`` versions behind; the update statistics."""
    torch.manual_seed(config.seed)
    learner = Learner(config)
    inference = LaggedInference(learner, lag)
    stats: list[dict[str, float]] = []

    def after_update() -> None:
        stats.append(learner.last_stats)
        inference.follow()

    ring = learner_ring(config, learner, inference, after_update)
    while learner.version < updates:
        ring.step(lambda: False)
    ring.close()
    kl = np.array([s["approx_kl"] for s in stats if "approx_kl" in s])
    return {"lag": lag, "updates": len(stats), "approx_kl_median": float(np.median(kl)),
            "approx_kl_p95": float(np.percentile(kl, 95)), "approx_kl_max": float(kl.max()),
            "clip_frac_median": float(np.median([s.get("clip_frac", 0.0) for s in stats])),
            "entropy_last20": float(np.mean([s["entropy"] for s in stats[-20:] if "entropy" in s])),
            "policy_lag_mean": float(np.mean([s["policy_lag_mean"] for s in stats]))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lags", type=int, nargs="+", default=[0, 3, 8, 12])
    parser.add_argument("--updates", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", default="laptop", help="showcase size (short: a CI smoke run)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for lag in args.lags:
        config = showcase_config(args.size)
        config.seed = args.seed
        config.trainer.max_version_lag = max(config.trainer.max_version_lag, lag + 1)
        rows.append(measure(config, lag, args.updates))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"size": args.size, "seed": args.seed, "updates": args.updates, "by_lag": rows}))


if __name__ == "__main__":
    main()
