"""How far one PPO update moves the showcase's policy when the actors act on older weights.

Trains ``showcase_config`` (lite quadrant, 1 v 1) in this process (``single_process``'s ring and
learner, no Dask), with the actors' ring acting on the weights of ``L`` updates before the trainer's
own, for each ``--lags`` value, from the same seed. After every update the ring takes the weights of
version ``max(0, v - L)``; ``max_version_lag`` is raised to L + 1, so no fragment is dropped as
stale. Reports per lag the median, 95th percentile and maximum of the update's
``approx_kl`` (KL of the policy after each minibatch step from the policy the update began with,
the proximal one V-trace and the clip measure from), the median ``clip_frac``, the mean entropy
of the last 20 updates, and, for how far learning got, ``seeker_in_room`` and the hidden fraction over
the last quarter of the training episodes (the first phase: seekers learn to enter the room).
``--ppo FIELD=VALUE`` overrides a PPO setting, to try a remedy at a given lag.

Why: with many actor workers (twelve on a GPU machine, four on 2 cores) single updates moved the
policy far (approx_kl above 1, half the rows outside the clip) and the policy's entropy collapsed,
where one actor never passed an approx_kl of 0.009. This isolates the actors' lag from everything
else that changes with the actor count (processes, cores, fragment order).

How it could mislead: ``L`` is held fixed, where a cluster's lag varies from fragment to fragment;
80 updates are the first minutes of a run only; at lag L the last quarter's episodes were acted by
versions up to L older than at lag 0 (a bias of at most 12 of 80 updates against the lagged rows);
runs differ a lot between seeds: read several.

Figures (2-core machine, the defaults: ``--updates 80``; the two seeds run side by side, one core
each). approx_kl median / 95th percentile / maximum; the entropy over the last 20 updates (8.6 at the
start); seeker_in_room over the last quarter of the episodes:

| L | seed 0 | seed 1 |
| --- | --- | --- |
| 0 | 0.0008 / 0.0019 / 0.0024; 7.5; 0.16 | 0.0011 / 0.0022 / 0.0025; 7.6; 0.16 |
| 3 | 0.0009 / 0.0028 / 0.0077; 7.0; 0.13 | 0.0014 / 0.0064 / 0.0121; 7.0; 0.12 |
| 8 | 0.0017 / 0.019 / 0.047; 5.4; 0.08 | 0.0027 / 0.049 / 0.117; 3.1; 0.08 |
| 12 | 0.0020 / 0.075 / 0.140; 4.6; 0.09 | 0.0097 / 0.071 / 0.121; 2.9; 0.09 |

Lag both collapses the entropy and slows learning: at L = 8 and 12 the seekers got half as far.
Remedies tried at L = 12 on both seeds; none fixes it, none is shipped:

- A whole-update trust region (after an update whose mean approx_kl passed twice a target of 0.01
  the learning rate was divided by 1.5, and multiplied back, up to ``lr``, after one under half of
  it): the 95th percentile of approx_kl fell to 0.024 / 0.024, but the entropy fell as far (4.3 /
  1.6) and the seekers learned less (seeker_in_room 0.09 / 0.05). Overshooting updates are a
  symptom, not the cause.
- V-trace without its truncations (``--ppo vtrace_rho_bar=100 --ppo vtrace_c_bar=100``): the
  entropy stayed up (8.3 / 6.8) and approx_kl small (95th percentile 0.0009 / 0.015), but the
  seekers learned no more than with them (0.10 / 0.11).
- One gradient step per update (``--ppo minibatches=1``, so that 12 versions are 12 steps
  instead of 48): seed 0 as at lag 0 (entropy 6.8, seeker_in_room 0.14), seed 1 collapsed as before
  (3.2, 0.08). At lag 0 the same change cost the seekers little (0.14 / 0.13 against 0.16 / 0.16).

What the lag costs is feedback: for L updates the policy keeps moving on evidence gathered before
its own last moves, and no correction of the samples gives it back. The remedy left is fewer
versions between acting and training. Rows in flight grow with the actor count; at a given count,
larger batches (and minibatches) make fewer versions of the same rows, which the last experiment
suggests costs little per sample. So ``showcase_config`` sizes its batch per actor worker
sending, in a fixed count of minibatches (``hide_and_seek_learning.py`` has the four-actor runs both
ways).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import copy
import json

import numpy as np
import torch

from srl_lab.api.policy import Policy
from srl_lab.config import ExperimentConfig, with_overrides
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
    recent = learner.episodes[-max(1, len(learner.episodes) // 4):]  # the last quarter: what was learned
    return {"lag": lag, "updates": len(stats), "approx_kl_median": float(np.median(kl)),
            "approx_kl_p95": float(np.percentile(kl, 95)), "approx_kl_max": float(kl.max()),
            "clip_frac_median": float(np.median([s.get("clip_frac", 0.0) for s in stats])),
            "entropy_last20": float(np.mean([s["entropy"] for s in stats[-20:] if "entropy" in s])),
            "policy_lag_mean": float(np.mean([s["policy_lag_mean"] for s in stats])),
            "seeker_in_room_last": float(np.mean([e["seeker_in_room"] for e in recent])),
            "hidden_fraction_last": float(np.mean([e["hidden_fraction"] for e in recent]))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lags", type=int, nargs="+", default=[0, 3, 8, 12])
    parser.add_argument("--updates", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", default="laptop", help="showcase size (short: a CI smoke run)")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE",
                        help="PPOConfig overrides, e.g. --ppo vtrace_rho_bar=100 (repeatable)")
    args = parser.parse_args(argv)
    try:
        ppo = with_overrides(showcase_config(args.size).ppo, args.ppo)
    except ValueError as error:
        parser.error(f"--ppo: {error}")
    torch.set_num_threads(1)
    rows = []
    for lag in args.lags:
        config = showcase_config(args.size)
        config.seed = args.seed
        config.ppo = ppo
        config.trainer.max_version_lag = max(config.trainer.max_version_lag, lag + 1)
        rows.append(measure(config, lag, args.updates))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"size": args.size, "seed": args.seed, "updates": args.updates, "ppo_overrides": args.ppo,
                      "by_lag": rows}))


if __name__ == "__main__":
    main()
