"""What the episode viewer costs a run: env steps/s with the viewer playing episodes and without.

One run of the showcase configuration (what ``make demo`` trains: lite 1v1 quadrant, 1 actor) on an
embedded cluster. After ``--warmup`` seconds it alternates phases of ``--phase`` seconds with the
viewer off and on, ``--pairs`` times, the order flipped every pair (off/on, on/off, ...) so a drift
in the run's speed favours neither. While on, the viewer is driven as the panel drives it (its
``on_version`` at 4 Hz) with the panel's frames (400 pixels) and process (nice 15), but by default
with ``--every-versions 1``: an episode 10 s after the last one ended, the most the automatic refresh
ever plays (the panel's default, every 100 versions, is about one episode a minute in this config).
An "on" phase lasts until its last episode has been delivered, so no viewing work spills into an
"off" phase.

The viewing process starts once per panel (a fresh interpreter importing torch and loading the
env's compiled kernels): its first episode is played during the warm-up and reported apart
(``first_episode_s``, wall-clock, start-up included).

Reported: ``slowdown_pct``, 100 x (1 - median over pairs of on/off env steps/s), the env steps
the actors stepped, measured from the actors' own timed reports within each phase
(``trained_slowdown_pct`` the same for samples the trainer consumed, over the phase); the
episodes played and the viewing process's wall-clock seconds per episode. Target: ``slowdown_pct``
<= 5.

How it could be fooled: an "on" phase in which no episode is played costs nothing, so the episodes
played per phase are reported next to the slowdown; a user pressing "new episode" without pause
costs more than the automatic refresh measured here; and no browser shows the frames, whose cost
(the kernel's widget messages, the notebook server, the browser's repaints) ``notebook_overhead.py``
measures in JupyterLab. Phases are short next to a real session, so the median over pairs is quoted.

    python benchmarks/viewer_overhead.py            # about 8 minutes on 2 cores
    python benchmarks/viewer_overhead.py --quick    # a smoke run

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

PUMP_S = 0.25  # the panel's pump calls the viewer at 4 Hz


def actor_rate(records: list[dict[str, Any]], t0: float, t1: float) -> float:
    """Env steps per second the actors stepped within [t0, t1], from their own reports (times and
    counters), so a phase's edges do not round to the once-a-second report interval."""
    rate = 0.0
    by_actor: dict[tuple[Any, Any], list[tuple[float, int]]] = {}
    for r in records:
        if r.get("role") == "actor" and "env_steps" in r and t0 <= r.get("time", -1.0) <= t1:
            by_actor.setdefault((r.get("srl_worker"), r.get("inc")), []).append((r["time"], r["env_steps"]))
    for points in by_actor.values():
        (first_t, first_n), (last_t, last_n) = min(points), max(points)
        if last_t > first_t:
            rate += (last_n - first_n) / (last_t - first_t)
    return rate


def phase(run: Any, viewer: Any | None, seconds: float) -> dict[str, float]:
    """Env steps/s and trained steps/s over ``seconds`` (with the viewer driven, when given)."""
    played = len(viewer.episodes) if viewer is not None else 0
    start, wall, trained = time.monotonic(), time.time(), run.metrics.trained_env_steps()
    while time.monotonic() - start < seconds or (viewer is not None and viewer.busy):
        version = run.status()["version"]  # the panel's pump reads the status at 4 Hz, viewer or not
        if viewer is not None and time.monotonic() - start < seconds:
            viewer.on_version(version)
        time.sleep(PUMP_S)
    elapsed = time.monotonic() - start
    return {"env_steps_per_s": actor_rate(list(run.metrics.records), wall, time.time()),
            "trained_per_s": (run.metrics.trained_env_steps() - trained) / elapsed,
            "seconds": elapsed, "episodes": (len(viewer.episodes) - played) if viewer is not None else 0}


def slowdown(pairs: list[dict[str, dict[str, float]]], key: str) -> float:
    return 100.0 * (1.0 - statistics.median(p["on"][key] / p["off"][key] for p in pairs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", type=float, default=25.0, help="seconds per phase")
    parser.add_argument("--pairs", type=int, default=8, help="off/on pairs (the median ratio is quoted)")
    parser.add_argument("--warmup", type=float, default=40.0, help="seconds discarded after start-up")
    parser.add_argument("--every-versions", type=int, default=1,
                        help="the viewer's refresh (1: back to back, 10 s apart; the panel's default is 100)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 pairs of 12 s, 15 s warm-up")
    parser.add_argument("--run-dir", default=f"runs/bench-viewer-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()
    if args.quick:
        args.phase, args.pairs, args.warmup = 12.0, 2, 15.0

    import srl_lab
    from srl_lab.envs.hide_and_seek.showcase import showcase_config
    from srl_lab.notebook.viewer import EpisodeViewer

    run = srl_lab.launch(showcase_config(), run_dir=args.run_dir)
    viewer = EpisodeViewer(run, every_versions=args.every_versions)
    pairs: list[dict[str, dict[str, float]]] = []
    try:
        while run.status()["version"] < 1:
            time.sleep(0.5)
        viewer.request()  # the viewing process starts (interpreter, torch, the env's compiled kernels)
        while viewer.busy:  # once per panel, so during the warm-up rather than in a measured phase
            time.sleep(PUMP_S)
        time.sleep(args.warmup)
        for k in range(args.pairs):
            order = ("off", "on") if k % 2 == 0 else ("on", "off")
            pair = {name: phase(run, viewer if name == "on" else None, args.phase) for name in order}
            pairs.append(pair)
            print(f"pair {k + 1}: off {pair['off']['env_steps_per_s']:,.0f} env steps/s, on "
                  f"{pair['on']['env_steps_per_s']:,.0f} ({pair['on']['episodes']} episodes in "
                  f"{pair['on']['seconds']:.0f} s)", flush=True)
    finally:
        viewer.close()
        result = run.stop()
    first, seconds = viewer.episodes[0].seconds, [e.seconds for e in viewer.episodes[1:]]
    print(json.dumps({
        "slowdown_pct": round(slowdown(pairs, "env_steps_per_s"), 2),
        "trained_slowdown_pct": round(slowdown(pairs, "trained_per_s"), 2),
        "episodes_per_on_phase": [p["on"]["episodes"] for p in pairs],
        "episodes": len(seconds),
        "viewer_seconds_per_episode": round(statistics.median(seconds), 2) if seconds else None,
        "first_episode_s": round(first, 2),
        "env_steps_per_s": {"off": statistics.median(p["off"]["env_steps_per_s"] for p in pairs),
                            "on": statistics.median(p["on"]["env_steps_per_s"] for p in pairs)},
        "pairs": pairs, "final_version": result["version"],
        "settings": {"config": "showcase_config(size='laptop')", "phase_s": args.phase, "pairs": args.pairs,
                     "warmup_s": args.warmup, "every_versions": args.every_versions, "cpus": os.cpu_count()},
    }))


if __name__ == "__main__":
    main()
