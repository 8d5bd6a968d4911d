"""Does a hider learn forts when the seeker stops adapting? A fresh hider against a frozen trained one.

Trains a fresh ``showcase_config`` policy in this process (``single_process``'s ring and learner, no
Dask) on its hider rows only; the seekers are played by the final policy of ``--run-dir`` (a finished
1v1 lite-quadrant run), sampling its actions and never updated. Every ``--report-every`` minutes and
at the end it reports, over the recent training episodes: the fraction of play steps hidden, the
fort rate (every door closed by hider-locked cubes when preparation ends), ``doors_blocked_prep``,
``hider_in_room``, locked cubes per preparation and ``max_box_move_prep``.

Why: in self-play the seekers learn to enter the room within minutes and the hiders answer by
leaving it, so a fort has to be found while the opponent keeps changing. Against a seeker that does
not change, a fort pays a fixed amount (``hide_and_seek_fort_reach.py --run-dir`` measures it: scripted
forts kept the hider hidden on 91-97 % of play steps against the final seekers of five runs). If a
fresh hider still does not find forts here, the barrier is exploration, not the moving opponent.

How it could mislead: a frozen opponent can be exploited in ways a learning one would answer, so a
strategy found here may not survive self-play (and this is no substitute for
``hide_and_seek_learning.py``, whose opponents are only the policy and its past versions). Acting
and training alternate in one process, and the frozen seeker's forward pass is paid on every step,
so a minute here trains fewer samples than a minute of the distributed runtime. One run, one seed.

What it has shown (2 cores, 30 minutes, against the final seeker of a win-rate pool run, from which
scripted forts keep the hider hidden on 97 % of play steps): the hider stayed in the room and settled
at 0.83 hidden with a fort rate of 0.003; with ``--ppo ent_coef=0.01`` it learned to carry a cube
through preparation and reached 0.94 with no forts at all. Against the final seeker of a later
run (scripted forts: 94 %), the fresh hider left the room and reached 0.80, fort rate 0.004
(``docs/hide_and_seek_learning.md``).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.config import with_overrides
from srl_lab.envs import registry
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.showcase import SIZES, showcase_config
from srl_lab.system.actor_ring import flatten_rows
from srl_lab.system.learner import Learner
from srl_lab.system.single_process import SharedPolicyInference, learner_ring

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hide_and_seek_fort_payoff import trained_policy  # noqa: E402

ENV_ID = "hide_and_seek_lite_frozen_seekers"
STATS = ("hidden_fraction", "fort_prep", "doors_blocked_prep", "hider_in_room", "num_box_lock_prep",
         "max_box_move_prep")


class FrozenSeekers(HideAndSeekLite):
    """The lite env with its seekers played by ``seeker`` (sampled, never trained): only the hiders'
    rows reach the trainer (``trained_rows``)."""

    def __init__(self, num_envs: int, seeker: Policy, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(num_envs, seed=seed, **kwargs)
        self.seeker = seeker
        hiders = self.layout.n_hiders
        self.trained_rows = np.array([e * self.num_agents + i for e in range(self.num_envs) for i in range(hiders)])
        self._obs: dict[str, np.ndarray] | None = None

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        self._obs = super().reset(seed)
        return self._obs

    def step(self, actions: np.ndarray):
        if self._obs is None:
            self.reset()
        actions = np.array(actions, np.int64)
        rows, hiders = self.num_envs * self.num_agents, self.layout.n_hiders
        with torch.no_grad():
            seeker_actions = self.seeker.act(obs_to_tensor(flatten_rows(self._obs, rows))).actions.numpy()
        actions[:, hiders:] = seeker_actions.reshape(actions.shape)[:, hiders:]
        result = super().step(actions)
        self._obs = result.obs
        return result


def summary(episodes: list[dict[str, float]]) -> dict[str, float | None]:
    return {key: (float(np.mean(values)) if (values := [e[key] for e in episodes if key in e]) else None)
            for key in STATS}


def train_reporting(ring: Any, learner: Learner, minutes: float, report_every: float,
                    report: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
    """Step ``ring`` for ``minutes`` (one update at least), then close it; every ``report_every``
    minutes print and keep ``{"minute", "updates", **report()}``. The reports, in order."""
    start, reports = time.monotonic(), []
    while (elapsed := time.monotonic() - start) < 60 * minutes or not learner.version:
        ring.step(lambda: False)
        if elapsed >= 60 * report_every * (len(reports) + 1) and learner.episodes:
            reports.append({"minute": round(elapsed / 60, 1), "updates": learner.version, **report()})
            print(json.dumps(reports[-1]), flush=True)
    ring.close()
    return reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a finished 1v1 lite-quadrant run: its final policy seeks")
    parser.add_argument("--minutes", type=float, default=30.0, help="training time (one update at least)")
    parser.add_argument("--report-every", type=float, default=2.0, metavar="MINUTES")
    parser.add_argument("--size", default="laptop", choices=SIZES, help="the fresh hider's showcase size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (acting and training alternate)")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE", help="PPOConfig overrides")
    args = parser.parse_args(argv)
    path, version, seeker, seeker_config = trained_policy(args.run_dir, parser)
    if seeker.recurrent:
        parser.error(f"{args.run_dir}: a recurrent seeker is not supported here")
    config = showcase_config(args.size)
    if {k: seeker_config.env.kwargs.get(k) for k in ("n_hiders", "n_seekers")} != {"n_hiders": 1, "n_seekers": 1}:
        parser.error(f"{args.run_dir} is not a 1v1 run")
    try:
        config.ppo = with_overrides(config.ppo, args.ppo)
    except ValueError as error:
        parser.error(f"--ppo: {error}")
    registry.register(ENV_ID, lambda num_envs, seed=None, **kwargs: FrozenSeekers(num_envs, seeker, seed, **kwargs))
    config.env.id, config.seed = ENV_ID, args.seed
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    learner = Learner(config)
    ring = learner_ring(config, learner, SharedPolicyInference(learner))
    reports = train_reporting(ring, learner, args.minutes, args.report_every,
                              lambda: {"env_steps": ring.counters["env_steps"], **summary(learner.episodes[-2000:])})
    episodes = learner.episodes
    tenth = max(1, len(episodes) // 10)
    print(json.dumps({"seeker_checkpoint": path, "seeker_version": version, "minutes": args.minutes,
                      "size": args.size, "seed": args.seed, "ppo_overrides": args.ppo,
                      "updates": learner.version, "env_steps": ring.counters["env_steps"],
                      "episodes": len(episodes), "first_10pct": summary(episodes[:tenth]),
                      "last_10pct": summary(episodes[-tenth:]), "reports": reports}))


if __name__ == "__main__":
    main()
