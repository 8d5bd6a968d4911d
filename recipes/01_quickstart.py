# ---
# jupyter:
#   jupytext:
#     formats: notebooks///ipynb,recipes///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Quickstart: CartPole in minutes
#
# SRL's dataflow on Dask: **actor workers** step rings of CartPole environments, a **trainer** runs
# PPO on the fragments they stream to it and publishes versioned weights back. No cluster given, so
# `srl_lab.launch` starts an embedded `LocalCluster(processes=True)` sized for the run.
#
# This notebook is the pair of `recipes/01_quickstart.py`: the same training runs from a shell with
# `python recipes/01_quickstart.py --actors 3 --minutes 5` or `srl-lab run recipes/01_quickstart.py`.

# %% tags=["parameters"]
ACTORS = 2  # actor worker processes
MINUTES = 3.0  # training budget; SRL_LAB_SHORT=1 shrinks it (tests, CI)
TARGET_RETURN = 475.0  # mean return of the last 20 episodes that counts as solved

# %%
import srl_lab
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    """CartPole with inline inference: the policy runs inside each actor, the right default on CPUs."""
    return srl_lab.ExperimentConfig(
        name="cartpole",
        actors=srl_lab.ActorConfig(workers=args.actors, ring_size=2, envs_per_group=8 if args.short else 16),
        metrics_interval_s=0.5,
    )


def main(argv: list[str] | None = None) -> dict:
    """Train until solved or out of time (with a progress bar); returns the run's final counters."""
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, description="CartPole PPO on Dask")
    run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
    try:
        run.wait(seconds=60 * args.minutes, target_return=TARGET_RETURN)
    finally:
        result = run.stop()
    print(f"{result['env_steps']:,} env steps in {result['seconds']:.0f} s, return (last 20) "
          f"{result['mean_return_last_20']:.1f}; curves and metrics in {run.run_dir}")
    return result


# %% [markdown]
# ## Launch and watch
#
# The panel shows the workers (state, env steps/s, policy-version lag), the learning curves and the
# throughput, refreshed by its own thread a few times a second. The actor control adds or removes
# actor workers live, growing the embedded cluster when it runs out of slots.

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES)
# run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
# panel = run.panel()
# panel

# %% [markdown]
# This cell blocks until CartPole is solved or the budget is spent, with a progress bar. The panel
# keeps refreshing meanwhile; its controls answer once the cell returns (notebook 02 shows a run
# steered while it trains). Then the run stops: actors first, then the trainer drains every fragment.

# %% tags=["active-ipynb"]
# run.wait(seconds=60 * args.minutes, target_return=TARGET_RETURN)
# result = run.stop()
# result

# %% [markdown]
# ## After a kernel restart
#
# Everything a run produced is in its run directory: `config.json`, `metrics.jsonl`, checkpoints,
# `curve.png` and `result.json`. `srl_lab.open_run` reopens one, finished or interrupted, and
# re-plots it; `.panel()` shows the workers' last reports next to the curves.

# %% tags=["active-ipynb"]
# print(run.run_dir)
# history = srl_lab.open_run(run.run_dir)
# history

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
