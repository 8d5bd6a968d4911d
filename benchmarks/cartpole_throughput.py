"""PPO on CartPole-v1: env steps per second while training, per configuration.

Configurations: the single-process loop with no Dask (same env batch, ring, policy and learner: the
ceiling), inline inference with 1 and 2 actor workers, a remote policy worker with 2 actor workers,
and 2 inline actor workers on gymnasium's numpy-vectorised CartPole (``EnvConfig(vector=True)``:
``make_vec(..., vectorization_mode="vector_entry_point")``) instead of one gymnasium env per slot. Dask runs share one pre-started ``LocalCluster(processes=True)``; each rate is measured over
the steady state (from the first env-step report to ``--steps`` steps later), so worker start-up is
excluded on both sides. With ``--repeats`` > 1 the median per configuration is reported.

``seconds_to_475`` is what a user waits for: wall-clock from ``launch`` to a last-20 mean return of
475 or more on the vectorised configuration with the config's defaults, the median over
``--seeds`` seeds (null where a seed did not get there within ``--solve-timeout`` s). It counts
worker start-up; it could flatter only through a lucky seed, which the median over seeds tempers.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from srl_lab import cluster as clusters
from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, InferenceConfig
from srl_lab.system.controller import launch
from srl_lab.system.single_process import train_single_process

RING, ENVS, FRAGMENT = 2, 16, 64


def config(mode: str, actors: int, vector: bool = False, seed: int = 0) -> ExperimentConfig:
    return ExperimentConfig(name=f"bench-{mode}-{actors}" + ("-vector" if vector else ""), seed=seed,
                            env=EnvConfig(id="CartPole-v1", vector=vector),
                            actors=ActorConfig(workers=actors, ring_size=RING, envs_per_group=ENVS,
                                               fragment_length=FRAGMENT),
                            inference=InferenceConfig(mode=mode))


def seconds_to_solve(client, seed: int, timeout_s: float, run_dir: str) -> float | None:
    """Wall-clock from launch to a last-20 mean return >= 475 (vectorised CartPole), or None."""
    start = time.perf_counter()
    run = launch(config("inline", 2, vector=True, seed=seed), client=client, run_dir=run_dir)
    try:
        status = run.wait(target_return=475.0, seconds=timeout_s, progress=False)
        elapsed = time.perf_counter() - start
    finally:
        run.stop()
    return round(elapsed, 1) if status["mean_return_last_20"] >= 475.0 else None


def measure_dask(client, mode: str, actors: int, steps: int, run_dir: str, vector: bool = False
                 ) -> tuple[float, float]:
    run = launch(config(mode, actors, vector), client=client, run_dir=run_dir)
    try:
        while run.status()["env_steps"] == 0:
            time.sleep(0.05)
        t0, s0 = time.perf_counter(), run.status()["env_steps"]
        while (s := run.status()["env_steps"]) < s0 + steps:
            time.sleep(0.05)
        rate = (s - s0) / (time.perf_counter() - t0)
    finally:
        result = run.stop()
    return rate, result["mean_return_last_20"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400_000, help="env steps measured per configuration")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3, help="seeds for seconds_to_475")
    parser.add_argument("--solve-timeout", type=float, default=120.0)
    parser.add_argument("--run-dir", default=f"runs/bench-cartpole-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()

    rates: dict[str, list[float]] = {}
    returns: dict[str, float] = {}
    cluster = clusters.local(n_workers=4, dashboard_address=None)
    from distributed import Client

    client = Client(cluster)
    try:
        for _ in range(args.repeats):
            single = train_single_process(config("inline", 1), args.steps)
            rates.setdefault("single_process", []).append(single["env_steps_per_s"])
            returns["single_process"] = single["final_return"]
            print(f"single_process: {single['env_steps_per_s']:.0f} env steps/s", flush=True)
            for mode, actors, vector in (("inline", 1, False), ("inline", 2, False), ("remote", 2, False),
                                         ("inline", 2, True)):
                name = f"{mode}_{actors}_actors" + ("_vector" if vector else "")
                rate, ret = measure_dask(client, mode, actors, args.steps, f"{args.run_dir}/{name}", vector)
                rates.setdefault(name, []).append(rate)
                returns[name] = ret
                print(f"{name}: {rate:.0f} env steps/s, return {ret:.1f}", flush=True)
        solve_s = [seconds_to_solve(client, seed, args.solve_timeout, f"{args.run_dir}/solve-{seed}")
                   for seed in range(args.seeds)]
        print(f"seconds to 475 (vectorised, per seed): {solve_s}", flush=True)
    finally:
        client.close()
        cluster.close()

    medians = {k: statistics.median(v) for k, v in rates.items()}
    dask = {k: v for k, v in medians.items() if k != "single_process"}
    best = max(dask, key=dask.get)
    print(json.dumps({
        "env_steps_per_s": medians,
        "single_process_env_steps_per_s": medians["single_process"],
        "best_dask_env_steps_per_s": dask[best],
        "best_dask_configuration": best,
        "best_dask_over_single_process": dask[best] / medians["single_process"],
        "final_return": returns[best],
        "final_return_by_configuration": returns,
        "seconds_to_475": _median_or_none(solve_s),
        "seconds_to_475_by_seed": solve_s,
        "steps_per_configuration": args.steps,
        "repeats": args.repeats,
    }))


def _median_or_none(values: list[float | None]) -> float | None:
    """The median, counting a seed that never got there as slower than every other (None if most did not)."""
    ranked = sorted(values, key=lambda v: float("inf") if v is None else v)
    return ranked[len(ranked) // 2] if ranked else None


if __name__ == "__main__":
    main()
