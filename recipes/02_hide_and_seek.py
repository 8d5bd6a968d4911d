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
# Hiders and seekers in a quadrant room with boxes and a ramp (`hide_and_seek_lite`: a fast top-down
# 2-D version of the hide-and-seek game, same observations, actions and rewards as the MuJoCo scene).
# Each agent sees entities — teammates, opponents, boxes, ramps — through a
# masked **entity-attention** policy: what an agent cannot see is masked out of its attention, while
# the critic sees everything. Hiders are rewarded while all of them are hidden from every seeker,
# seekers for the opposite; during the preparation phase seekers are frozen and hiders may move and
# lock boxes and ramps.
#
# The panel below steers the run **while it trains**: this notebook does not block, so move the actor
# control to add or remove actor workers (the embedded cluster grows when it runs out of slots), pause,
# resume, checkpoint or stop. The curves follow hider and seeker returns, the fraction of play steps
# the hiders were all hidden, box and ramp movement and locks (preparation phase and whole episode),
# env steps/s and the losses.

# %% tags=["parameters"]
ACTORS = 2  # actor worker processes
MINUTES = 30.0  # budget of the recipe and of headless runs; interactively, train until you press stop
HIDERS = 2
SEEKERS = 2

# %%
import functools

import srl_lab
from srl_lab.models.entity_attention import EntityAttentionPolicy
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    """Quadrant hide-and-seek with the entity-attention policy; short mode plays 1 v 1 with a small model."""
    teams = {"n_hiders": 1, "n_seekers": 1} if args.short else {"n_hiders": HIDERS, "n_seekers": SEEKERS}
    model = functools.partial(EntityAttentionPolicy, hidden=64, embed=32, heads=2) if args.short \
        else EntityAttentionPolicy
    return srl_lab.ExperimentConfig(
        name="hide_and_seek",
        env=srl_lab.EnvConfig(id="hide_and_seek_lite", kwargs={"scenario": "quadrant", **teams}),
        actors=srl_lab.ActorConfig(workers=args.actors, ring_size=2, envs_per_group=4 if args.short else 16,
                                   fragment_length=40 if args.short else 80),
        trainer=srl_lab.TrainerConfig(batch_steps=1280 if args.short else 16384),
        ppo=srl_lab.PPOConfig(lr=3e-4, gamma=0.998, ent_coef=0.01, epochs=2 if args.short else 4,
                              minibatch_size=640 if args.short else 4096),
        policy=srl_lab.PolicyConfig(factory=model),
        metrics_interval_s=0.5,
    )


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
