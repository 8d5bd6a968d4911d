"""How fast can the showcase's network and PPO learn forts when paid for them directly? A diagnostic.

The lite quadrant game (1 hider vs 1 seeker, hiders in the room) cut to its preparation phase: each
episode ends when preparation does, and the hider is paid then, once, ``play steps x doors blocked``
(the share of the room's doors closed by hider-locked cubes, ``doors_blocked_prep``): what a hider
hidden on every play step behind each closed door could earn. ``--pay fort`` pays the play steps only
when every door is closed (``fort_prep``), as a seeker would, who walks through the door left open. The seeker is frozen through
preparation anyway; its rows are not trained. A fresh ``showcase_config`` policy trains on the
hider's rows in this process (``single_process``'s ring and learner, no Dask), and every
``--report-every`` minutes the fort rate (every door closed when preparation ends), the doors
blocked, locked cubes per preparation and cube movement are reported over the recent episodes, with
the hider samples trained so far.

Why: in self-play a fort pays only through the seeker's later failure to see the hider, against a
seeker that keeps changing, and hiders that leave the room earn nearly as much. Here the pay is
immediate, per door, and nothing else pays, so the samples this takes to reach a fort rate of 0.5
bound from below what self-play needs with the same network, optimiser and budget of samples.
A 30-minute self-play run of the laptop default makes 19-32 M env steps (the machines differ), 40 %
of them in preparation: 8-13 M hider samples in which a fort can be built.

How it could mislead: this is reward shaping, the thing the learning benchmark forbids; it is a
measure of learnability, never a way to train. Acting and training alternate in one process, so a
minute here trains fewer samples than a minute of the distributed runtime: compare samples, not
minutes. Every prep step is a sample here, where self-play also trains the play steps, so the
comparison is per preparation sample. One run, one seed.

What it has shown (2 cores, 20 minutes each, ``docs/hide_and_seek_learning.md``): paid per door, the
fort rate rose in every minute, to 0.34 at 7.8 M hider samples and 0.49 at 14.2 M; with three PPO
epochs it rose faster per sample, then stalled near 0.32; paid only for a closed room (``--pay
fort``), 0.22 at 8.0 M and 0.46 at 15.9 M (0.63 in one-door rooms, 0.30 in two-door ones).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np
import torch

from srl_lab.config import with_overrides
from srl_lab.envs import registry
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.showcase import SIZES, showcase_config
from srl_lab.system.learner import Learner
from srl_lab.system.single_process import SharedPolicyInference, learner_ring

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hide_and_seek_frozen_seeker import train_reporting  # noqa: E402

ENV_ID = "hide_and_seek_lite_fort_paid"
PAID_STATS = {"doors": "doors_blocked_prep", "fort": "fort_prep"}  # --pay: per door closed, or per room
STATS = ("fort_prep", "doors_blocked_prep", "num_box_lock_prep", "max_box_move_prep")


class FortPaid(HideAndSeekLite):
    """The lite env ending at preparation's end and paying the hiders then for the doors blocked;
    only the hiders' rows train (``trained_rows``)."""

    def __init__(self, num_envs: int, seed: int | None = None, pay: str = "doors", **kwargs: Any) -> None:
        super().__init__(num_envs, seed=seed, **kwargs)
        self.paid_stat = PAID_STATS[pay]
        self.play_steps = self.horizon - self.prep_steps
        self.horizon = self.prep_steps  # the kernels end an episode at the horizon; prep_steps stays
        hiders = self.layout.n_hiders
        self.trained_rows = np.array([e * self.num_agents + i for e in range(self.num_envs) for i in range(hiders)])

    def _step(self, actions: np.ndarray):
        result = super()._step(actions)
        if result.episodes:
            ended = np.flatnonzero(result.terminated)
            closed = np.array([np.nan_to_num(e[self.paid_stat]) for e in result.episodes])
            result.reward[ended, :self.layout.n_hiders] = (self.play_steps * closed)[:, None]
        return result


def summary(episodes: list[dict[str, float]]) -> dict[str, Any]:
    """The mean of each of ``STATS``, and the fort rate by the room's door count."""
    means = {key: (float(np.nanmean(values)) if (values := [e[key] for e in episodes if key in e]) else None)
             for key in STATS}
    by_doors: dict[str, list[float]] = {}
    for e in episodes:
        by_doors.setdefault(str(int(e["num_doors"])), []).append(e["fort_prep"])
    return {**means, "fort_prep_by_doors": {k: round(float(np.mean(v)), 4) for k, v in sorted(by_doors.items())}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training time (one update at least)")
    parser.add_argument("--report-every", type=float, default=2.0, metavar="MINUTES")
    parser.add_argument("--size", default="laptop", choices=SIZES, help="the hider's showcase size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pay", default="doors", choices=PAID_STATS,
                        help="pay for each door closed (the share of them), or only for a room with every door closed")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (acting and training alternate)")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE", help="PPOConfig overrides")
    args = parser.parse_args(argv)
    config = showcase_config(args.size)
    try:
        config.ppo = with_overrides(config.ppo, args.ppo)
    except ValueError as error:
        parser.error(f"--ppo: {error}")
    registry.register(ENV_ID, lambda num_envs, seed=None, **kwargs: FortPaid(num_envs, seed, args.pay, **kwargs))
    config.env.id, config.seed = ENV_ID, args.seed
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    learner = Learner(config)
    ring = learner_ring(config, learner, SharedPolicyInference(learner))
    hider_samples = lambda: ring.counters["env_steps"]  # one hider per env step  # noqa: E731
    reports = train_reporting(ring, learner, args.minutes, args.report_every,
                              lambda: {"hider_samples": hider_samples(), **summary(learner.episodes[-2000:])})
    episodes = learner.episodes
    tenth = max(1, len(episodes) // 10)
    first_half = next((r["hider_samples"] for r in reports if (r["fort_prep"] or 0) >= 0.5), None)
    print(json.dumps({"minutes": args.minutes, "size": args.size, "seed": args.seed, "pay": args.pay, "ppo_overrides": args.ppo,
                      "updates": learner.version, "hider_samples": hider_samples(), "episodes": len(episodes),
                      "hider_samples_to_fort_rate_half": first_half,
                      "first_10pct": summary(episodes[:tenth]), "last_10pct": summary(episodes[-tenth:]),
                      "reports": reports}))


if __name__ == "__main__":
    main()
