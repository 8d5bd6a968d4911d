"""Can the quadrant fort be built in preparation at all? A scripted hider tries, with full knowledge.

``envs.hide_and_seek.fort_builder`` plays every plan (one cube per door, each pairing and order) from
the lite env's own random quadrant starts, with the learning benchmark's teams (1 hider vs 1 seeker
unless ``--hiders``), and keeps each start's best. Reports the share of starts in which every door was
closed when preparation ended, per door count, and how many of the preparation steps the closing
took (median and 90th percentile). If that share is far above ``hide_and_seek_learning.py``'s fort
target (0.5), the target asks for something the env allows, and a learner that misses it misses it
for finding, not for physics.

With ``--run-dir`` (a finished lite-quadrant run, its teams) the run's final policy plays the seekers
through the scripted hiders' episodes, and once more both teams from the same starts (the first
episode of ``evaluate.play``'s worlds with this seed), so the hidden fractions say what the forts
would have earned against the seeker the run trained, next to what its own hider earned; and the run's policy plays both teams through preparation from
those starts, to show whether its hiders take cubes towards the doors (``door_gaps``: per door, the
nearest cube's distance from the spot that closes it, at the start and when preparation ends) and
whether they keep the forts they build (``forts_in_preparation``, per door count: the share of starts
with every door closed at some preparation step and when it ends; locked cubes do not move and only
their team unlocks them, so a fort undone before the end was unlocked by its own hider).

How it could mislead: the controller reads true positions and plans with the room's geometry, so
its steps are a floor a policy seeing through a view cone and lidar will not reach; a controller
fault makes the share read low, never high (the env's own fort rule decides every start). Without
``--run-dir`` the seekers stand still, as the env freezes them in preparation anyway. The scripted
hider stands still through play once its cubes are locked, so against a seeker that never enters
the room it earns no more than a trained hider that also stays in.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from srl_lab.api.policy import obs_to_tensor
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.evaluate import play
from srl_lab.envs.hide_and_seek.fort_builder import door_gaps, doors_now, fort_reach, quadrant_starts, replicas
from srl_lab.system.actor_ring import flatten_rows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hide_and_seek_fort_payoff import trained_policy  # noqa: E402


def summary(episodes: list[dict[str, float]], doors: int | None = None) -> dict[str, float | int | None]:
    """Fort share and closing steps over the starts with ``doors`` doors (all starts if None)."""
    chosen = [e for e in episodes if doors is None or e["num_doors"] == doors]
    steps = np.array([e["fort_step"] for e in chosen if not np.isnan(e["fort_step"])])
    return {"starts": len(chosen),
            "fort_share": float(np.mean([e["fort_prep"] for e in chosen])) if chosen else None,
            "fort_step_median": float(np.median(steps)) if steps.size else None,
            "fort_step_p90": float(np.percentile(steps, 90)) if steps.size else None}


def acting(policy: Any) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """``policy`` as ``fort_reach``'s seekers: actions ``[envs, agents, 5]`` for every row, state kept
    for a recurrent one (all episodes run in step, one each)."""
    state = None

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        nonlocal state
        envs, agents = obs[spec.CLOCK_KEY].shape[:2]
        if policy.recurrent and state is None:
            state = policy.initial_state(envs * agents)
        with torch.no_grad():
            out = policy.act(obs_to_tensor(flatten_rows(obs, envs * agents)), state)
        state = out.state
        return out.actions.numpy().reshape(envs, agents, -1)

    return act


def gap_summary(gaps: list[float]) -> dict[str, float]:
    """How near the doors' closing spots the cubes stand: the median gap, the shares within 0.2 and 0.5 m."""
    gaps = np.asarray(gaps)
    return {"median_m": float(np.median(gaps)), "within_0.2m": float(np.mean(gaps <= 0.2)),
            "within_0.5m": float(np.mean(gaps <= 0.5))}


def fort_summary(fort: np.ndarray, doors: np.ndarray) -> dict[str, dict[str, float | int]]:
    """Per door count, from ``fort[prep step, start]`` (1.0 while every door is closed): the share of
    starts closed when preparation ends, closed at some step of it, and closed once but not at its end."""
    built, kept = fort.max(axis=0) == 1.0, fort[-1] == 1.0
    return {str(k): {"starts": int(np.sum(doors == k)), "at_prep_end": float(np.mean(kept[doors == k])),
                     "at_any_prep_step": float(np.mean(built[doors == k])),
                     "undone_before_prep_end": float(np.mean((built & ~kept)[doors == k]))}
            for k in (1, 2) if np.any(doors == k)}


def learned_preparation(policy: Any, starts: int, seed: int, teams: dict[str, int]) -> dict[str, Any]:
    """``policy`` playing both teams through preparation from the same starts: per door, the nearest
    cube's distance from its closing spot at the start and when preparation ends (do its hiders take
    cubes to doors?), and how often every door was closed at some step and at the end (do they keep
    the forts they build?)."""
    origin = quadrant_starts(starts, seed=seed, **teams)
    env, obs = replicas(origin, list(range(starts)))
    act = acting(policy)
    fort = np.zeros((env.prep_steps, starts))
    for step in range(env.prep_steps):
        obs = env.step(act(obs)).obs
        stats = np.array([doors_now(env, e) for e in range(starts)])  # rows: (share closed, fort, doors)
        fort[step] = stats[:, 1]
    doors = stats[:, 2]
    before = [gap for s in range(starts) for gap in door_gaps(origin, s)]
    after = [gap for e in range(starts) for gap in door_gaps(env, e)]
    return {"door_gaps": {"at_start": gap_summary(before), "prep_end": gap_summary(after)},
            "forts_in_preparation": fort_summary(fort, doors)}


def against_trained_seeker(run_dir: str, starts: int, seed: int,
                           parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Hidden fractions against ``run_dir``'s final seeker: scripted forts, and its own hider."""
    path, version, policy, config = trained_policy(run_dir, parser)
    kwargs = config.env.kwargs
    if (config.env.id, kwargs.get("scenario", "quadrant"), kwargs.get("hider_spawn", "room")) != (
            "hide_and_seek_lite", "quadrant", "room"):
        parser.error(f"{run_dir} did not train the lite quadrant with hiders starting in the room; "
                     "this benchmark plays only that")
    teams = {"n_hiders": kwargs.get("n_hiders", 2), "n_seekers": kwargs.get("n_seekers", 2)}
    torch.manual_seed(seed)
    scripted = fort_reach(starts, seed=seed, seekers=acting(policy), **teams)
    forts = [e["hidden_fraction"] for e in scripted if e["fort_prep"] == 1.0]
    own = play(policy, policy, starts, seed=seed, num_envs=starts, scenario="quadrant", **teams)
    return {"checkpoint": path, "version": version, **teams, **learned_preparation(policy, starts, seed, teams),
            "scripted_hider_hidden": float(np.mean([e["hidden_fraction"] for e in scripted])),
            "scripted_hider_hidden_in_forts": float(np.mean(forts)) if forts else None,
            "trained_hider_hidden": own}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=400, help="random quadrant starts")
    parser.add_argument("--hiders", type=int, default=1, choices=spec.TEAM_SIZES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default=None, help="a finished lite-quadrant run: its seeker plays")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    episodes = fort_reach(args.starts, n_hiders=args.hiders, seed=args.seed)
    result = {"hiders": args.hiders, "seekers": 1, "prep_steps": spec.prep_steps(spec.DEFAULT_HORIZON["quadrant"]),
              "plans_per_start": float(np.mean([e["plans"] for e in episodes])),
              **summary(episodes), "by_doors": {str(d): summary(episodes, d) for d in (1, 2)},
              "seconds": round(time.perf_counter() - began, 1)}
    if args.run_dir:
        result["vs_trained_seeker"] = against_trained_seeker(args.run_dir, args.starts, args.seed, parser)
        vs = result["vs_trained_seeker"]
        print(f"against the run's seeker: scripted forts hidden {vs['scripted_hider_hidden']:.1%} of play "
              f"steps, the run's own hider {vs['trained_hider_hidden']:.1%}")
        start, end = vs["door_gaps"]["at_start"], vs["door_gaps"]["prep_end"]
        print(f"the run's hiders: a cube within 0.2 m of a door's closing spot at {start['within_0.2m']:.1%} of "
              f"doors at the start, {end['within_0.2m']:.1%} when preparation ends")
        for doors, row in vs["forts_in_preparation"].items():
            print(f"the run's hiders, {doors} door(s): every door closed at some preparation step in "
                  f"{row['at_any_prep_step']:.1%} of {row['starts']} starts, when it ends in {row['at_prep_end']:.1%}")
    for doors, row in result["by_doors"].items():
        print(f"{doors} door(s): {row['starts']} starts, every door closed in {row['fort_share']:.1%}, "
              f"after {row['fort_step_median']} steps (median) of {result['prep_steps']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
