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
# # 02 · Hide-and-seek, steered live
#
# A hider and a seeker in a quadrant room with boxes and a ramp (`hide_and_seek_lite`: a fast top-down
# 2-D version of the hide-and-seek game, same observations, actions and rewards as the MuJoCo scene).
# Each agent sees entities — teammates, opponents, boxes, ramps — through a
# masked **entity-attention** policy: what an agent cannot see is masked out of its attention, while
# the critic sees everything. Hiders are rewarded while all of them are hidden from every seeker,
# seekers for the opposite; during the preparation phase seekers are frozen and hiders may move and
# lock boxes and ramps.
#
# The panel below steers the run **while it trains**: this notebook does not block, so move the actor
# control to add or remove actor workers (the embedded cluster grows when it runs out of slots), pause,
# resume, checkpoint or stop. The curves (rolling means over the faint raw points) follow hider and
# seeker returns, the fraction of play steps the hider was hidden, the fort and room statistics (doors
# blocked by hider-locked boxes at the end of preparation, who is inside the room), box and ramp
# movement and locks, env steps/s and the losses. The first thing to watch for: the seeker learning to
# enter the room (hidden fraction falls), then the hider answering it by locking boxes.
#
# Below the curves, the **episode viewer** tab plays an episode of the current policy every 100
# versions (or on its "new episode" button, or from a checkpoint): play, pause and scrub through it to
# see where the hider goes and which boxes it locks; each episode is also saved under the run's
# `videos/`. The **compare runs** tab overlays this run with others in the same runs folder, and
# `tensorboard --logdir runs` shows every run's metrics and episodes.

# %% tags=["parameters"]
ACTORS = 1  # actor worker processes (on 2 cores one actor keeps the trainer fed); the batch follows the actors sending, also when changed live
# launched, so actors added live from the panel act further behind the trainer: relaunch to keep more
MINUTES = 30.0  # budget of the recipe and of headless runs; interactively, train until you press stop
SIZE = "laptop"  # "cluster": 2 v 2 and the 128-wide model, for many actor cores and a GPU trainer

# %%
import srl_lab
from srl_lab.envs.hide_and_seek.showcase import showcase_config
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    """The showcase configuration (the one `make demo` and the benchmarks use); short mode is tiny."""
    return showcase_config("short" if args.short else SIZE, actors=args.actors)


def main(argv: list[str] | None = None) -> dict:
    """Train for the budget (with a progress bar); returns the run's final counters."""
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, description="hide-and-seek on Dask")
    run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
    try:
        run.wait(seconds=60 * args.minutes)
    finally:
        result = run.stop()
    print(f"{result['env_steps']:,} env steps in {result['seconds']:.0f} s, policy version "
          f"{result['version']}; curves and metrics in {run.run_dir}")
    return result


# %% [markdown]
# ## Launch and steer

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES)
# run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
# panel = run.panel()
# panel

# %% [markdown]
# The run keeps training in the background; the panel's **stop** button (or `run.stop()`) ends it.
# Headless executions (`SRL_LAB_HEADLESS=1`: tests, `jupyter nbconvert --execute`) have nobody at the
# panel, so there this cell waits for the budget and stops the run.

# %% tags=["active-ipynb"]
# if args.headless:
#     run.wait(seconds=60 * args.minutes)
#     result = run.stop()
#     print("panel refresh intervals (s):", panel.timing.summary())

# %% [markdown]
# ## Another kernel
#
# The panel's header shows how to follow this run from a second notebook on the same scheduler:
# `srl_lab.notebook.attach(name, scheduler=address).panel()` backfills the recent metrics from the
# scheduler and then follows them live; pause, resume and checkpoints work from there too.

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
