"""PPO on CartPole-v1: env steps per second while training, per configuration, and seconds to solve.

Configurations: the single-process loop with no Dask (same env batch, ring, policy and learner: the
ceiling), inline inference with 1 and 2 actor workers, a remote policy worker with 2 actor workers
(these four on the default config: one gymnasium env per slot), and ``fast_vector``:
``srl_lab.presets.fast_cartpole``, gymnasium's numpy-vectorised CartPole
(``make_vec(..., vectorization_mode="vector_entry_point")``) with one actor and PPO sized for large
batches; ``single_process_vector`` is that preset's single-process ceiling. Dask runs share one
pre-started ``LocalCluster(processes=True)``; each rate is measured over ``--seconds`` of steady state
(from the first env-step report), so worker start-up is excluded. With ``--repeats`` > 1 the median
per configuration is reported. ``stale_fraction`` (the worst repeat) is the share of produced
fragments the trainer dropped as too old: env steps/s counts what the actors produced, and this says
how much of it was not trained on (a fast actor feeding a slow trainer could inflate the rate; it
would show here).

``seconds_to_475`` is what a user waits for: wall-clock from ``launch`` to a last-20 mean return of
475 or more with ``fast_cartpole`` as shipped (only its seed changes), the median over ``--seeds``
seeds (null where most seeds did not get there within ``--solve-timeout`` s). It counts worker
start-up. It could flatter through lucky seeds, which the median over seeds tempers, and it says
nothing of stability after 475 (``final_return_by_configuration`` shows where each run ended).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from srl_lab import cluster as clusters
from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, InferenceConfig
from srl_lab.presets import fast_cartpole
from srl_lab.system.controller import launch
from srl_lab.system.single_process import train_single_process

RING, ENVS, FRAGMENT = 2, 16, 64


def config(mode: str, actors: int) -> ExperimentConfig:
    return ExperimentConfig(name=f"bench-{mode}-{actors}", env=EnvConfig(id="CartPole-v1"),
                            actors=ActorConfig(workers=actors, ring_size=RING, envs_per_group=ENVS,
                                               fragment_length=FRAGMENT),
                            inference=InferenceConfig(mode=mode))


def seconds_to_solve(client, seed: int, timeout_s: float, run_dir: str) -> float | None:
    """Wall-clock from launch to a last-20 mean return >= 475 (``fast_cartpole``), or None."""
    start = time.perf_counter()
    run = launch(fast_cartpole(seed=seed), client=client, run_dir=run_dir)
    try:
        status = run.wait(target_return=475.0, seconds=timeout_s, progress=False)
        elapsed = time.perf_counter() - start
    finally:
        run.stop()
    return round(elapsed, 1) if status["mean_return_last_20"] >= 475.0 else None


def measure_dask(client, config: ExperimentConfig, seconds: float, run_dir: str) -> tuple[float, float, float]:
    """(env steps/s over ``seconds`` of steady state, final last-20 return, stale fraction)."""
    run = launch(config, client=client, run_dir=run_dir)
    try:
        while run.status()["env_steps"] == 0:
            time.sleep(0.05)
        t0, s0 = time.perf_counter(), run.status()["env_steps"]
        time.sleep(seconds)
        rate = (run.status()["env_steps"] - s0) / (time.perf_counter() - t0)
    finally:
        result = run.stop()
    return rate, result["mean_return_last_20"], result["dropped_stale"] / max(1, result["fragments_produced"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400_000, help="env steps of each single-process loop")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady-state seconds measured per Dask run")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3, help="seeds for seconds_to_475")
    parser.add_argument("--solve-timeout", type=float, default=120.0)
    parser.add_argument("--run-dir", default=f"runs/bench-cartpole-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()

    rates: dict[str, list[float]] = {}
    returns: dict[str, float] = {}
    stale: dict[str, list[float]] = {}
    cluster = clusters.local(n_workers=4, dashboard_address=None)
    from distributed import Client

    client = Client(cluster)
    try:
        for _ in range(args.repeats):
            for name, single_config in (("single_process", config("inline", 1)),
                                        ("single_process_vector", fast_cartpole())):
                single = train_single_process(single_config, args.steps)
                rates.setdefault(name, []).append(single["env_steps_per_s"])
                returns[name] = single["final_return"]
                print(f"{name}: {single['env_steps_per_s']:.0f} env steps/s", flush=True)
            for name, dask_config in (("inline_1_actors", config("inline", 1)), ("inline_2_actors", config("inline", 2)),
                                      ("remote_2_actors", config("remote", 2)), ("fast_vector", fast_cartpole())):
                rate, ret, dropped = measure_dask(client, dask_config, args.seconds, f"{args.run_dir}/{name}")
                rates.setdefault(name, []).append(rate)
                stale.setdefault(name, []).append(dropped)
                returns[name] = ret
                print(f"{name}: {rate:.0f} env steps/s, return {ret:.1f}, stale {dropped:.3f}", flush=True)
        solve_s = [seconds_to_solve(client, seed, args.solve_timeout, f"{args.run_dir}/solve-{seed}")
                   for seed in range(args.seeds)]
        print(f"seconds to 475 (vectorised, per seed): {solve_s}", flush=True)
    finally:
        client.close()
        cluster.close()

    medians = {k: statistics.median(v) for k, v in rates.items()}
    dask = {k: v for k, v in medians.items() if not k.startswith("single_process")}
    best = max(dask, key=dask.get)
    ceiling = "single_process_vector" if best == "fast_vector" else "single_process"
    print(json.dumps({
        "env_steps_per_s": medians,
        "single_process_env_steps_per_s": medians["single_process"],
        "best_dask_env_steps_per_s": dask[best],
        "best_dask_configuration": best,
        "best_dask_over_its_single_process": dask[best] / medians[ceiling],
        "final_return": returns[best],
        "final_return_by_configuration": returns,
        "stale_fraction": {k: max(v) for k, v in stale.items()},  # the worst repeat
        "seconds_to_475": _median_or_none(solve_s),
        "seconds_to_475_by_seed": solve_s,
        "single_process_steps": args.steps,
        "seconds_per_configuration": args.seconds,
        "repeats": args.repeats,
    }))


def _median_or_none(values: list[float | None]) -> float | None:
    """The median, counting a seed that never got there as slower than every other (None if most did not)."""
    ranked = sorted(values, key=lambda v: float("inf") if v is None else v)
    return ranked[len(ranked) // 2] if ranked else None


if __name__ == "__main__":
    main()
