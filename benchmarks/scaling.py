"""Scaling of the SRL runtime on hide-and-seek: env steps/s with 1, 2 and 4 actor workers.

Each configuration (inline inference, and remote inference with one policy worker; 1, 2 and 4 actor
workers) is launched with ``srl_lab.system.controller.launch`` on one pre-started embedded
``LocalCluster(processes=True)`` with the hide-and-seek showcase config (``showcase_config()``: lite
1v1 quadrant, its env groups, fragments, entity-attention policy and trainer batch) with ``--epochs``
PPO epochs (default 1, as the showcase trains); the JSON says which was used.

Steady state only: the clock starts once every actor acts with trained weights (policy version >= 1,
so numba compilation, model construction and the first weights are behind it) and ``--warmup``
seconds more have passed. Then ``--windows`` back-to-back windows of ``--window`` seconds each; a
window's rate is the env steps all actors made in it, read from the actors' own metrics records
(each actor's cumulative count, interpolated linearly to the window's edges). The median window is
quoted. Env steps count environments x steps (an env step moves every agent of one env).

Before the runtime sweep the scaling-model figures (``benchmarks/scaling_model.py``: per-core
rates of actor, policy worker and trainer, parameter broadcast cost) are measured in this process.

    python benchmarks/scaling.py            # the full run (7-8 minutes on 2 cores)
    python benchmarks/scaling.py --quick    # a smoke run (a few minutes)

The last stdout line is one JSON object: ``env_steps_per_s`` as
``{"inline": {"1": n, "2": n, "4": n}, "remote": {...}}`` plus the model figures and context.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runtime_windows import delta, measure_windows, rates, series  # noqa: E402
from scaling_model import recipe_config, run_model  # noqa: E402

MODES = ("inline", "remote")
ACTORS = (1, 2, 4)
STARTUP_TIMEOUT_S = 300.0


def runtime_config(mode: str, actors: int, epochs: int):
    config = recipe_config(actors=actors, mode=mode, epochs=epochs)
    config.name = f"scaling-{mode}-{actors}"
    return config


def measure(client, mode: str, actors: int, args: argparse.Namespace, run_dir: str) -> dict[str, Any]:
    from srl_lab.system.controller import launch

    config = runtime_config(mode, actors, args.epochs)
    load_before = os.getloadavg()[0]
    launched = time.time()
    run = launch(config, client=client, run_dir=run_dir)
    try:
        windows, records, startup_s = measure_windows(run, actors, args.warmup, args.window, args.windows,
                                                      STARTUP_TIMEOUT_S)
    finally:
        result = run.stop()
    actor_steps = series(records, "actor", "env_steps")
    policy_rows = series(records, "policy", "rows")
    policy_batches = series(records, "policy", "batches")
    env_rates = rates(actor_steps, windows)
    out = {
        "env_steps_per_s": statistics.median(env_rates),
        "window_env_steps_per_s": env_rates,
        "trainer_env_agent_steps_per_s": statistics.median(rates(series(records, "trainer", "env_steps_consumed"),
                                                                 windows)),
        "updates_per_s": statistics.median(rates(series(records, "trainer", "version"), windows)),
        "dropped_stale_fraction": result["dropped_stale"] / max(1, result["fragments_produced"]),
        "startup_s": round(startup_s, 1),
        "seconds": round(time.time() - launched, 1),
        "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "restarts": result["restarts"],
    }
    if policy_rows:
        rows = [delta(policy_rows, a, b) for a, b in windows]
        batches = [delta(policy_batches, a, b) for a, b in windows]
        out["policy_rows_per_s"] = statistics.median(r / (b - a) for r, (a, b) in zip(rows, windows))
        out["policy_mean_batch_rows"] = sum(rows) / max(1.0, sum(batches))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds per measured window")
    parser.add_argument("--windows", type=int, default=4, help="windows per configuration (the median is quoted)")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds discarded after every actor acts with trained weights")
    parser.add_argument("--epochs", type=int, default=1, help="PPO epochs per update (the showcase trains 1)")
    parser.add_argument("--actors", type=int, nargs="+", default=list(ACTORS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--no-model", action="store_true", help="skip the scaling-model measurements")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 windows of 4 s, 2 s warm-up, short model measurements")
    parser.add_argument("--run-dir", default=f"runs/bench-scaling-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()
    if args.quick:
        args.window, args.windows, args.warmup = 4.0, 2, 2.0

    started = time.time()
    load_start = os.getloadavg()
    model = None if args.no_model else run_model(quick=args.quick)

    from distributed import Client

    from srl_lab import cluster as clusters

    configs = [(mode, n) for mode in args.modes for n in args.actors]
    slots = max(n + 1 + (mode == "remote") for mode, n in configs)  # actors + trainer (+ policy worker)
    cluster = clusters.local(n_workers=slots, dashboard_address=None)
    client = Client(cluster)
    runtime: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for mode, n in configs:
            figures = measure(client, mode, n, args, f"{args.run_dir}/{mode}-{n}")
            runtime.setdefault(mode, {})[str(n)] = figures
            extra = (f", policy worker {figures['policy_rows_per_s']:,.0f} rows/s in batches of "
                     f"{figures['policy_mean_batch_rows']:.0f}" if "policy_rows_per_s" in figures else "")
            print(f"{mode} inference, {n} actor(s): {figures['env_steps_per_s']:,.0f} env steps/s (windows "
                  + ", ".join(f"{r:,.0f}" for r in figures["window_env_steps_per_s"])
                  + f"); trainer {figures['trainer_env_agent_steps_per_s']:,.0f} env-agent steps/s{extra}; "
                  f"dropped stale {100 * figures['dropped_stale_fraction']:.1f}%; load {figures['load_avg_1min']}",
                  flush=True)
    finally:
        client.close()
        cluster.close()

    print(json.dumps({
        "env_steps_per_s": {mode: {n: f["env_steps_per_s"] for n, f in by_n.items()} for mode, by_n in runtime.items()},
        "runtime": runtime,
        "model": model,
        "settings": {"window_s": args.window, "windows": args.windows, "warmup_s": args.warmup,
                     "ppo_epochs": args.epochs, "env": "hide_and_seek_lite quadrant 1v1",
                     "policy": "EntityAttentionPolicy(hidden=64, embed=32)", "policy_workers_remote": 1,
                     "cpu_count": os.cpu_count()},
        "load_avg_at_start": [round(x, 2) for x in load_start],
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.time() - started, 1),
    }))


if __name__ == "__main__":
    main()
