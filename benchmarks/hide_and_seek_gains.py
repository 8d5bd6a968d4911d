"""A finished run's gains again, from its checkpoints: on several seed sets, or at every kept checkpoint.

Evaluates ``--run-dir``'s newest checkpoint (with ``--all``, every checkpoint kept) as
``hide_and_seek_learning.py`` does (``evaluate.gains``: ``--episodes`` per arm, the scenes and every
team's sampling seeded) once per seed in ``--seeds``, and reports per checkpoint the seeker and hider
gains on each seed, with their mean and standard deviation over the seeds.

Why: one benchmark run gives one figure. The spread over seeds is the evaluation's own; the spread
over checkpoints is what the run's last updates move; what is left of the spread between runs of one
config is the training's.

How it could mislead: a run keeps only its last few checkpoints (``trainer.checkpoint_keep``), so the
spread over them covers the end of the run alone; every seed draws new scenes and actions, but each
checkpoint's hider is measured against that checkpoint's own seeker, as in the benchmark.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from srl_lab.envs.hide_and_seek.evaluate import gains
from srl_lab.system import checkpoints

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hide_and_seek_fort_payoff import policy_in  # noqa: E402

BENCHMARK_SEED = 12345  # the learning benchmark's evaluation seed


def seed_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers separated by commas, e.g. 12345,1,2") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a finished lite hide-and-seek run with checkpoints")
    parser.add_argument("--seeds", type=seed_list, default=[BENCHMARK_SEED, 1, 2, 3, 4, 5],
                        help="evaluation seeds, comma-separated (the benchmark's is 12345)")
    parser.add_argument("--episodes", type=int, default=200, help="episodes per arm and seed")
    parser.add_argument("--all", action="store_true", help="every checkpoint kept, not only the newest")
    args = parser.parse_args(argv)
    paths = checkpoints.paths(checkpoints.folder(args.run_dir))
    if not paths:
        parser.error(f"{args.run_dir} has no checkpoint to evaluate")
    rows = []
    for path in paths if args.all else paths[-1:]:
        version, policy, config = policy_in(checkpoints.load(path))
        if config.env.id != "hide_and_seek_lite":
            parser.error(f"{args.run_dir} trained {config.env.id!r}; this evaluates the lite env")
        env = {key: value for key, value in config.env.kwargs.items() if key != "random_opponents"}
        per_seed = [gains(policy, args.episodes, seed=seed, **env) for seed in args.seeds]
        row = {"checkpoint": path, "version": version}
        for team in ("seeker", "hider"):
            figures = np.array([result[f"{team}_gain_pts"] for result in per_seed])
            row[f"{team}_gain_pts"] = {"by_seed": figures.tolist(), "mean": float(figures.mean()),
                                       "sd": float(figures.std(ddof=1)) if len(figures) > 1 else None}
        rows.append(row)
        spread = "" if row["hider_gain_pts"]["sd"] is None else (
            f" (sd {row['seeker_gain_pts']['sd']:.1f} / {row['hider_gain_pts']['sd']:.1f})")
        print(f"version {version}: seeker / hider gains {row['seeker_gain_pts']['mean']:.1f} / "
              f"{row['hider_gain_pts']['mean']:.1f} over {len(args.seeds)} seed(s){spread}", flush=True)
    print(json.dumps({"run_dir": args.run_dir, "seeds": args.seeds, "episodes_per_arm": args.episodes,
                      "checkpoints": rows}))


if __name__ == "__main__":
    main()
