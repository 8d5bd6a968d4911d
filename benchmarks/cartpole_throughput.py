"""PPO on CartPole-v1: env steps per second while training, per configuration.

Configurations: the single-process loop with no Dask (same env batch, ring, policy and learner: the
ceiling), inline inference with 1 and 2 actor workers, and a remote policy worker with 2 actor
workers. Dask runs share one pre-started ``LocalCluster(processes=True)``; each rate is measured over
the steady state (from the first env-step report to ``--steps`` steps later), so worker start-up is
excluded on both sides. With ``--repeats`` > 1 the median per configuration is reported.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from srl_lab import cluster as clusters
from srl_lab.config import ActorConfig, ExperimentConfig, InferenceConfig
from srl_lab.system.controller import launch
from srl_lab.system.single_process import train_single_process

RING, ENVS, FRAGMENT = 2, 16, 64


def config(mode: str, actors: int) -> ExperimentConfig:
    return ExperimentConfig(name=f"bench-{mode}-{actors}",
                            actors=ActorConfig(workers=actors, ring_size=RING, envs_per_group=ENVS,
                                               fragment_length=FRAGMENT),
                            inference=InferenceConfig(mode=mode))


def measure_dask(client, mode: str, actors: int, steps: int, run_dir: str) -> tuple[float, float]:
    run = launch(config(mode, actors), client=client, run_dir=run_dir)
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
            for mode, actors in (("inline", 1), ("inline", 2), ("remote", 2)):
                name = f"{mode}_{actors}_actors"
                rate, ret = measure_dask(client, mode, actors, args.steps, f"{args.run_dir}/{name}")
                rates.setdefault(name, []).append(rate)
                returns[name] = ret
                print(f"{name}: {rate:.0f} env steps/s, return {ret:.1f}", flush=True)
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
        "steps_per_configuration": args.steps,
        "repeats": args.repeats,
    }))


if __name__ == "__main__":
    main()
