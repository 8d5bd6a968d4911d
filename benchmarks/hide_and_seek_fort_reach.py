"""Can the quadrant fort be built in preparation at all? A scripted hider tries, with full knowledge.

``envs.hide_and_seek.fort_builder`` plays every plan (one cube per door, each pairing and order) from
the lite env's own random quadrant starts, with the learning benchmark's teams (1 hider vs 1 seeker
unless ``--hiders``), and keeps each start's best. Reports the share of starts in which every door was
closed when preparation ended, per door count, and how many of the preparation steps the closing
took (median and 90th percentile). If that share is far above ``hide_and_seek_learning.py``'s fort
target (0.5), the target asks for something the env allows, and a learner that misses it misses it
for finding, not for physics.

How it could mislead: the controller reads true positions and plans with the room's geometry, so
its steps are a floor a policy seeing through a view cone and lidar will not reach; a controller
fault makes the share read low, never high (the env's own fort rule decides every start). The
seekers stand still, as the env freezes them in preparation anyway.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.fort_builder import fort_reach


def summary(episodes: list[dict[str, float]], doors: int | None = None) -> dict[str, float | int | None]:
    """Fort share and closing steps over the starts with ``doors`` doors (all starts if None)."""
    chosen = [e for e in episodes if doors is None or e["num_doors"] == doors]
    steps = np.array([e["fort_step"] for e in chosen if e["fort_step"] == e["fort_step"]])
    return {"starts": len(chosen),
            "fort_share": float(np.mean([e["fort_prep"] for e in chosen])) if chosen else None,
            "fort_step_median": float(np.median(steps)) if steps.size else None,
            "fort_step_p90": float(np.percentile(steps, 90)) if steps.size else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=400, help="random quadrant starts")
    parser.add_argument("--hiders", type=int, default=1, choices=spec.TEAM_SIZES)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    episodes = fort_reach(args.starts, n_hiders=args.hiders, seed=args.seed)
    result = {"hiders": args.hiders, "seekers": 1, "prep_steps": spec.prep_steps(spec.DEFAULT_HORIZON["quadrant"]),
              "plans_per_start": float(np.mean([e["plans"] for e in episodes])),
              **summary(episodes), "by_doors": {str(d): summary(episodes, d) for d in (1, 2)},
              "seconds": round(time.perf_counter() - began, 1)}
    for doors, row in result["by_doors"].items():
        print(f"{doors} door(s): {row['starts']} starts, every door closed in {row['fort_share']:.1%}, "
              f"after {row['fort_step_median']} steps (median) of {result['prep_steps']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
