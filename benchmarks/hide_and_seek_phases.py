"""A hide-and-seek run's course, stretch by stretch: the phase statistics per few minutes of training.

Reads ``--run-dir``'s ``metrics.jsonl`` (a finished run, or one still training) and splits its
training episodes into stretches of ``--stretch`` minutes of training from the first episode. Per
stretch: the episodes, the samples trained by its end (env-agent steps, the curves' x axis: two
per env step in 1 v 1), and the means of the phase statistics
(hidden fraction, seekers and hiders in the room, cubes locked and moved in preparation, the fort
rate over every room and over one-door rooms, play steps with a hider holding a box), plus the
policy's mean entropy over the updates in the stretch.

Why: the learning benchmark's JSON gives the last 10 % of training and the milestones; the docs
describe each run's course (when seekers entered the room, when hiders left it, how locking rose and
fell), and this prints the figures that description comes from.

Minutes of training are wall-clock minutes less every silence of more than ``--max-gap`` seconds
between two trainer reports (default 300; the trainer reports every second or so): a run stopped
and continued later with ``Run.resume`` counts the minutes it trained, not the hours between.

How it could mislead: episodes are stamped with the time the trainer reported them, not the time
they were played, so a stretch holds the episodes reported in it (up to one update late); a stretch
of a run that was paused holds fewer episodes, and every mean weighs its episodes alike whatever the
room's doors.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any, Callable

import numpy as np

from srl_lab.system.metrics import MetricsLog

MAX_GAP_S = 300.0  # a longer silence between trainer reports is time the run was not training

STATISTICS = ("hidden_fraction", "seeker_in_room", "hider_in_room", "num_box_lock_prep", "fort_prep",
              "max_box_move_prep", "hider_holds_play")


def mean_of(rows: list[dict[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over the rows holding a finite number for it; None when none does."""
    values = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return float(np.mean(values)) if values else None


def training_seconds(report_times: list[float], max_gap_s: float = MAX_GAP_S) -> Callable[[float], float]:
    """Maps a report's wall-clock time to the seconds of training before it, counted from the first
    report: wall-clock less every silence between consecutive reports longer than ``max_gap_s``."""
    times = np.sort(np.asarray(report_times, dtype=np.float64))
    gaps = np.diff(times)
    skipped = np.concatenate([[0.0], np.cumsum(np.where(gaps > max_gap_s, gaps, 0.0))])

    def clock(time: float) -> float:
        index = max(int(np.searchsorted(times, time, side="right")) - 1, 0)
        return float(time - times[0] - skipped[index])
    return clock


def stretches(log: MetricsLog, minutes: float, max_gap_s: float = MAX_GAP_S) -> list[dict[str, Any]]:
    """One row per ``minutes`` of training from the first episode (module docstring), in order;
    stretches without episodes are left out."""
    episodes = [e for e in log.episodes if e.get("time") is not None]
    if not episodes:
        return []
    start = min(e["time"] for e in episodes)
    reports = [r for r in log.train if r.get("time") is not None and r["time"] >= start]
    clock = training_seconds([r["time"] for r in reports] + [start], max_gap_s)
    width = minutes * 60.0
    by_stretch: dict[int, list[dict[str, Any]]] = {}
    for episode in episodes:
        by_stretch.setdefault(int(clock(episode["time"]) // width), []).append(episode)
    updates: dict[int, list[dict[str, Any]]] = {}
    for update in reports:
        updates.setdefault(int(clock(update["time"]) // width), []).append(update)
    rows = []
    for index in sorted(by_stretch):
        rows.append({
            "from_minute": index * minutes, "episodes": len(by_stretch[index]),
            "agent_steps_trained": max(e.get("env_steps", 0) for e in by_stretch[index]),  # the trainer's stamp
            **{key: mean_of(by_stretch[index], key) for key in STATISTICS},
            "fort_prep_one_door": mean_of([e for e in by_stretch[index] if e.get("num_doors") == 1], "fort_prep"),
            "entropy": mean_of(updates.get(index, []), "entropy"), "updates": len(updates.get(index, [])),
        })
    return rows


def _cell(value: float | None) -> str:
    return "—".rjust(8) if value is None else f"{value:8.3f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a hide-and-seek run directory (finished or live)")
    parser.add_argument("--stretch", type=float, default=3.0, help="minutes of training per row (default 3)")
    parser.add_argument("--max-gap", type=float, default=MAX_GAP_S,
                        help="seconds without a trainer report that count as a pause, not training")
    args = parser.parse_args(argv)
    if not args.stretch > 0:
        parser.error(f"--stretch must be a positive number of minutes, got {args.stretch}")
    if not args.max_gap > 0:
        parser.error(f"--max-gap must be a positive number of seconds, got {args.max_gap}")
    path = os.path.join(args.run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        parser.error(f"{args.run_dir} has no metrics.jsonl: give the directory a run wrote")
    rows = stretches(MetricsLog.load(path), args.stretch, args.max_gap)
    columns = (*STATISTICS, "fort_prep_one_door", "entropy")
    print("minute episodes trained_M " + " ".join(name[:8].rjust(8) for name in columns))
    for row in rows:
        print(f"{row['from_minute']:6.1f} {row['episodes']:8d} {row['agent_steps_trained'] / 1e6:9.2f} "
              + " ".join(_cell(row[name]) for name in columns))
    print(json.dumps({"run_dir": args.run_dir, "stretch_minutes": args.stretch, "max_gap_s": args.max_gap,
                      "stretches": rows}))


if __name__ == "__main__":
    main()
