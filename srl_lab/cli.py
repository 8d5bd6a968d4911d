"""The ``srl-lab`` command.

    srl-lab run recipes/01_quickstart.py --actors 3 --minutes 5 [--scheduler ADDRESS] [--run-dir DIR]

``run`` loads a recipe file (a jupytext pair of a notebook) under a name other than ``__main__``, so
its ``if __name__ == "__main__"`` block stays quiet, then calls its ``main(flags)``. Classes a recipe
defines are not importable by Dask workers and travel by value, exactly as from a notebook.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Callable
from typing import Any

RECIPE_MODULE = "__srl_lab_recipe__"


def load_recipe(path: str) -> dict[str, Any]:
    """Execute a recipe file's top level (definitions only, thanks to its guard) and return its globals."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no recipe at {path}")
    namespace = runpy.run_path(path, run_name=RECIPE_MODULE)
    if not callable(namespace.get("main")):
        raise TypeError(f"{path} defines no main(argv); recipes run their training from main()")
    return namespace


def _run(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    sys.argv = [args.recipe, *args.flags]  # what the recipe's own --help and errors should name
    recipe["main"](args.flags)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="srl-lab", description="srl_lab: distributed RL on Dask.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a recipe's main() with its flags",
                              description="Run recipes/X.py's main(); flags after the path go to the recipe "
                                          "(--scheduler ADDRESS --actors N --minutes M --run-dir DIR).")
    run.add_argument("recipe", help="path to a recipe, e.g. recipes/01_quickstart.py")
    run.add_argument("flags", nargs=argparse.REMAINDER, help="the recipe's own flags")
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
