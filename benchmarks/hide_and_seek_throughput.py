"""Hide-and-seek training throughput of the showcase configuration at 1, 2 and 4 actor workers.

Each actor count launches ``showcase_config(actors=n)`` (lite 1v1 quadrant, inline inference, the
64-wide entity-attention policy with one head, one PPO epoch with V-trace) on one pre-started embedded
``LocalCluster(processes=True)``, waits until every actor acts with trained weights plus
``--warmup`` seconds, and then measures ``--windows`` windows of ``--window`` seconds (median quoted):

- ``trained_rows_per_s``: env-agent steps consumed by the trainer per second (each row trained on
  for ``ppo.epochs`` passes); this is the figure that decides how fast the showcase learns;
- ``produced_rows_per_s``: env-agent steps the actors stepped per second;
- ``stale_fraction``: fragments dropped as too stale over the run's whole life (from the books
  ``run.stop()`` closes), over fragments produced;
- ``policy_lag_mean`` (per actor count): the median of the trainer's reported mean sample lag, in
  versions between acting and training, over the windows.

Then ``live_scaling``: a run launched at one actor and scaled to ``--live-to`` actors (default 4) while
it trains, as the notebook's actor control does, measured the same way after the new actors act:
its ``policy_lag_mean``, ``trained_rows_per_s`` and ``stale_fraction`` with the batch per actor
sending (the showcase's ``trainer.batch_per_actor``) and with the launch's batch kept (that flag
off), in the same run.
On 2 cores, 1 -> 4 actors: lag 1.54 versions with the batch per actor, 6.16 with the launch's.

Before the sweep, ``env_rows_per_s`` is the raw lite env (one env group of the showcase config,
random actions) stepped in this process, per CPU-second, so the runtime's figures can be read as a fraction of the env's ceiling on the same
machine in the same run.

How it could be fooled: a config that trains fewer epochs or a smaller network raises
``trained_rows_per_s`` without learning faster, so it measures only the showcase config as shipped
(``benchmarks/hide_and_seek_learning.py`` measures what that config learns); a trainer that skipped
fragments would lower ``stale_fraction`` only if it still counted them as consumed, which the
books (``produced == consumed + dropped_stale + lost``) would expose.

    python benchmarks/hide_and_seek_throughput.py           # about 4 minutes on 2 cores
    python benchmarks/hide_and_seek_throughput.py --quick   # a smoke run
    python benchmarks/hide_and_seek_throughput.py --device cuda --actors 6 12   # trainer, policy worker on GPU

The last stdout line is one JSON object.
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
from runtime_windows import measure_windows, rates, series, wait_for_trained_weights  # noqa: E402
from scaling_model import measure_env  # noqa: E402

ACTORS = (1, 2, 4)


def env_rows_per_s(seconds: float) -> float:
    """Random-action agent rows per CPU-second of one raw env group of the showcase config."""
    from srl_lab.envs.hide_and_seek.showcase import showcase_config

    config = showcase_config()
    return measure_env(config, seconds) * (config.env.kwargs["n_hiders"] + config.env.kwargs["n_seekers"])


def median_policy_lag(records: list[dict[str, Any]], windows: list[tuple[float, float]]) -> float | None:
    """Median over the updates reported in the windows of their samples' mean lag, in versions
    between acting and training (what V-trace corrects; ``hide_and_seek_policy_lag.py`` measures
    what it costs)."""
    # A version's stats repeat in every report until the next update: one value per version.
    by_version = {r.get("version"): r["train"]["policy_lag_mean"] for r in records
                  if r.get("role") == "trainer" and "policy_lag_mean" in (r.get("train") or {})
                  and windows[0][0] <= r.get("time", -1.0) <= windows[-1][1]}
    return statistics.median(by_version.values()) if by_version else None


def measure(client, actors: int, args: argparse.Namespace, run_dir: str, launch_actors: int | None = None,
            batch_per_actor: bool = True) -> dict[str, Any]:
    """The showcase at ``actors`` actor workers. ``launch_actors`` (e.g. 1): launch with that many and
    scale to ``actors`` live once it trains, as the panel's control does; ``batch_per_actor`` False
    keeps the launch's batch."""
    from srl_lab.envs.hide_and_seek.showcase import showcase_config
    from srl_lab.system.controller import launch

    config = showcase_config(actors=launch_actors or actors, device=args.device)
    config.name = f"throughput-{actors}" if launch_actors is None else f"throughput-live-{actors}"
    config.trainer.batch_per_actor = batch_per_actor
    agents = config.env.kwargs["n_hiders"] + config.env.kwargs["n_seekers"]
    run = launch(config, client=client, run_dir=run_dir)
    try:
        if launch_actors is not None:
            wait_for_trained_weights(run, launch_actors, timeout_s=300.0)
            run.scale(actors=actors)
        windows, records, startup_s = measure_windows(run, actors, args.warmup, args.window, args.windows)
    finally:
        result = run.stop()
    trained = rates(series(records, "trainer", "env_steps_consumed"), windows)
    produced = [agents * r for r in rates(series(records, "actor", "env_steps"), windows)]
    return {
        "trained_rows_per_s": statistics.median(trained),
        "produced_rows_per_s": statistics.median(produced),
        "stale_fraction": result["dropped_stale"] / max(1, result["fragments_produced"]),
        "window_trained_rows_per_s": [round(r) for r in trained],
        "updates_per_s": statistics.median(rates(series(records, "trainer", "version"), windows)),
        "policy_lag_mean": median_policy_lag(records, windows),
        "fragments": {k: result[k] for k in ("fragments_produced", "fragments_consumed", "dropped_stale",
                                             "fragments_lost")},
        "startup_s": round(startup_s, 1),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=15.0, help="seconds per measured window")
    parser.add_argument("--windows", type=int, default=3, help="windows per actor count (the median is quoted)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds discarded after start-up")
    parser.add_argument("--actors", type=int, nargs="+", default=list(ACTORS))
    parser.add_argument("--device", default="cpu", help="cuda: the trainer and a policy worker on the GPU")
    parser.add_argument("--live-to", type=int, default=4, metavar="ACTORS",
                        help="also launch at one actor and scale to this many live, with the batch per actor "
                             "sending and with the launch's batch (0: skip)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 windows of 4 s, 3 s warm-up")
    parser.add_argument("--run-dir", default=f"runs/bench-hns-throughput-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()
    if args.quick:
        args.window, args.windows, args.warmup = 4.0, 2, 3.0

    from distributed import Client

    from srl_lab import cluster as clusters
    from srl_lab.envs.hide_and_seek.showcase import showcase_config
    from srl_lab.system.worker_set import gpu_slots_needed

    started = time.time()
    env_rate = env_rows_per_s(1.0 if args.quick else 3.0)
    print(f"raw env: {env_rate:,.0f} agent rows/s", flush=True)
    gpus = gpu_slots_needed(showcase_config(device=args.device))
    cluster = clusters.local(n_workers=max(*args.actors, args.live_to) + 1, gpu_workers=gpus, dashboard_address=None)
    client = Client(cluster)
    by_actors: dict[str, dict[str, Any]] = {}
    try:
        for n in args.actors:
            figures = measure(client, n, args, f"{args.run_dir}/actors-{n}")
            by_actors[str(n)] = figures
            print(f"{n} actor(s): trained {figures['trained_rows_per_s']:,.0f} rows/s, produced "
                  f"{figures['produced_rows_per_s']:,.0f} rows/s, stale {100 * figures['stale_fraction']:.1f}%, "
                  f"{figures['updates_per_s']:.2f} updates/s, load {figures['load_avg_1min']}", flush=True)
        live = {mode: measure(client, args.live_to, args, f"{args.run_dir}/live-{mode}", launch_actors=1,
                              batch_per_actor=mode == "per_actor")
                for mode in ("per_actor", "fixed")} if args.live_to else {}
        for mode, figures in live.items():
            print(f"1 -> {args.live_to} actors live, batch {mode}: lag {figures['policy_lag_mean']}, trained "
                  f"{figures['trained_rows_per_s']:,.0f} rows/s", flush=True)
    finally:
        client.close()
        cluster.close()
    best = max(by_actors, key=lambda n: by_actors[n]["trained_rows_per_s"])
    print(json.dumps({
        "trained_rows_per_s": by_actors[best]["trained_rows_per_s"], "best_actors": int(best),
        "produced_rows_per_s": {n: f["produced_rows_per_s"] for n, f in by_actors.items()},
        "stale_fraction": {n: f["stale_fraction"] for n, f in by_actors.items()},
        "policy_lag_mean": {n: f["policy_lag_mean"] for n, f in by_actors.items()},
        "trained_rows_per_s_by_actors": {n: f["trained_rows_per_s"] for n, f in by_actors.items()},
        "env_rows_per_s": env_rate,
        "live_scaling": {"to_actors": args.live_to, **{
            key: {mode: f[key] for mode, f in live.items()}
            for key in ("policy_lag_mean", "trained_rows_per_s", "stale_fraction")}} if live else None,
        "runtime": by_actors,
        "settings": {"config": f"showcase_config(size='laptop', device={args.device!r})",
                     "window_s": args.window, "windows": args.windows, "warmup_s": args.warmup,
                     "cpu_count": os.cpu_count()},
        "seconds": round(time.time() - started, 1),
    }))


if __name__ == "__main__":
    main()
