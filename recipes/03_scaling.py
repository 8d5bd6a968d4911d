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
# # 03 · Scaling: env steps/s against actor workers
#
# One CartPole run, scaled live from 1 to `ACTORS` actor workers. At each size the actors' own
# counters give the env steps/s over a measuring window; the plot sets them against perfect linear
# scaling from one actor. On a machine with few cores the curve flattens once the actors (plus the
# trainer) outnumber the cores — that knee is the point of the exercise: it tells you when to add
# machines rather than processes (notebook 05).
#
# Pair of `recipes/03_scaling.py`: `--actors N` is the largest size measured, `--minutes M` the
# whole budget, split evenly across the sizes. Short mode (`SRL_LAB_SHORT=1`) measures 1 and 2.

# %% tags=["parameters"]
ACTORS = 4  # the largest number of actor workers measured
MINUTES = 4.0  # whole budget, split across the sizes
SETTLE_S = 3.0  # after a resize, let new actors build their envs before measuring

# %%
import io
import json
import os
import time

from matplotlib.figure import Figure
from tqdm.auto import tqdm

import srl_lab
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    return srl_lab.ExperimentConfig(
        name="scaling",
        actors=srl_lab.ActorConfig(workers=1, ring_size=2, envs_per_group=16),
        metrics_interval_s=0.5,
    )


def actor_counts(args: RecipeArgs) -> list[int]:
    return list(range(1, (min(args.actors, 2) if args.short else args.actors) + 1))


def throughput(run: srl_lab.Run, seconds: float) -> float:
    """Env steps/s of all running actors over the next ``seconds``, from the counters they report."""
    start = time.time()
    run.wait(seconds=seconds, progress=False)
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    for record in list(run.metrics.records):
        if record.get("role") == "actor" and record.get("state") != "stopped" and record["time"] >= start:
            first.setdefault(record["srl_worker"], record)
            last[record["srl_worker"]] = record
    return sum((last[w]["env_steps"] - first[w]["env_steps"]) / (last[w]["time"] - first[w]["time"])
               for w in first if last[w]["time"] > first[w]["time"])


def measure(run: srl_lab.Run, counts: list[int], seconds: float) -> list[dict]:
    """Scale to each size in turn, wait until all its actors run, then measure."""
    points = []
    for n in tqdm(counts, desc="actor workers"):
        run.scale(actors=n)
        deadline = time.monotonic() + 120
        while run.status()["actors"] != n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} actor workers did not all start within 120 s")
            time.sleep(0.25)
        run.wait(seconds=SETTLE_S, progress=False)
        points.append({"actors": n, "env_steps_per_s": throughput(run, seconds)})
    return points


def plot(points: list[dict]) -> bytes:
    """Measured env steps/s against actors, with linear scaling from one actor for reference."""
    fig = Figure(figsize=(6, 4), dpi=90)
    ax = fig.add_subplot(1, 1, 1)
    actors = [p["actors"] for p in points]
    rates = [p["env_steps_per_s"] for p in points]
    ax.plot(actors, rates, "o-", label="measured")
    ax.plot(actors, [rates[0] * n for n in actors], "--", color="grey", label="linear from 1 actor")
    ax.set_xlabel("actor workers")
    ax.set_ylabel("env steps/s")
    ax.set_xticks(actors)
    ax.set_title(f"CartPole throughput on {os.cpu_count()} cores")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def save(run_dir: str, points: list[dict], png: bytes) -> None:
    with open(os.path.join(run_dir, "scaling.json"), "w") as f:
        json.dump({"cores": os.cpu_count(), "points": points}, f, indent=2)
    with open(os.path.join(run_dir, "scaling.png"), "wb") as f:
        f.write(png)


def main(argv: list[str] | None = None) -> list[dict]:
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, short_minutes=0.25,
                       description="env steps/s against actor workers")
    counts = actor_counts(args)
    run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
    try:
        points = measure(run, counts, seconds=max(2.0, 60 * args.minutes / len(counts) - SETTLE_S))
    finally:
        run.stop()
    save(run.run_dir, points, plot(points))
    for p in points:
        print(f"{p['actors']} actor workers: {p['env_steps_per_s']:>10,.0f} env steps/s")
    print(f"plot: {os.path.join(run.run_dir, 'scaling.png')}")
    return points


# %% [markdown]
# ## Measure
#
# The panel shows the resizes as they happen (and the throughput figure under the curves).

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES, short_minutes=0.25)
# counts = actor_counts(args)
# run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
# run.panel()

# %% tags=["active-ipynb"]
# points = measure(run, counts, seconds=max(2.0, 60 * args.minutes / len(counts) - SETTLE_S))
# run.stop()
# png = plot(points)
# save(run.run_dir, points, png)
# points

# %% tags=["active-ipynb"]
# from IPython.display import Image
#
# Image(png)

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
