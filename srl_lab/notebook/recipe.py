"""What every recipe / notebook pair shares: its flags, and the short mode tests and CI run.

A recipe's ``main(argv)`` parses ``--scheduler ADDRESS --actors N --minutes M --run-dir DIR``; the
notebook built from the same file calls ``recipe_args([])`` so that only the environment applies:

- ``SRL_LAB_SHORT=1``: tiny sizes and a short budget (headless notebook tests, CI, binder smoke runs);
- ``SRL_LAB_HEADLESS=1``: no one watches a panel, so notebooks wait for the budget and stop the run;
- ``SRL_LAB_SCHEDULER``, ``SRL_LAB_RUN_DIR``: defaults for ``--scheduler`` and ``--run-dir``.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class RecipeArgs:
    scheduler: str | None  # None: an embedded LocalCluster
    actors: int
    minutes: float
    run_dir: str | None
    short: bool
    headless: bool


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def recipe_args(argv: list[str] | None = None, *, actors: int, minutes: float, short_minutes: float = 0.15,
                description: str | None = None) -> RecipeArgs:
    """Parse a recipe's flags; ``argv=None`` reads the command line, ``[]`` only the environment.

    ``actors`` / ``minutes`` are the recipe's defaults; in short mode the budget is ``short_minutes``
    unless ``--minutes`` is given.
    """
    short = _flag("SRL_LAB_SHORT")
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--scheduler", default=os.environ.get("SRL_LAB_SCHEDULER") or None,
                        help="Dask scheduler address (default: an embedded LocalCluster)")
    parser.add_argument("--actors", type=int, default=actors, help=f"actor workers (default {actors})")
    parser.add_argument("--minutes", type=float, default=short_minutes if short else minutes,
                        help=f"training budget in minutes (default {minutes})")
    parser.add_argument("--run-dir", default=os.environ.get("SRL_LAB_RUN_DIR") or None,
                        help="run directory (default runs/<run id>)")
    args = parser.parse_args(argv)
    if args.actors < 1:
        parser.error("--actors must be at least 1")
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    return RecipeArgs(scheduler=args.scheduler, actors=args.actors, minutes=args.minutes,
                      run_dir=args.run_dir, short=short, headless=_flag("SRL_LAB_HEADLESS"))
