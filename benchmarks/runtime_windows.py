"""Steady-state rates of a launched run, read from its workers' metrics records.

Shared by the runtime benchmarks: wait until every actor acts with trained weights, then measure
back-to-back windows; a window's rate is how much a cumulative counter summed over workers grew in
it (each worker's counter interpolated linearly to the window's edges).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

Series = dict[tuple[str, Any], tuple[np.ndarray, np.ndarray]]


def series(records: list[dict[str, Any]], role: str, field: str) -> Series:
    """Per (worker, incarnation): (times, values) of a cumulative counter, in time order."""
    out: dict[tuple[str, Any], list[tuple[float, float]]] = {}
    for r in records:
        if r.get("role") == role and field in r and isinstance(r.get("time"), (int, float)):
            out.setdefault((r.get("srl_worker"), r.get("inc")), []).append((r["time"], float(r[field])))
    return {k: (np.array([t for t, _ in v]), np.array([x for _, x in v])) for k, v in
            ((k, sorted(v)) for k, v in out.items())}


def delta(counter: Series, a: float, b: float) -> float:
    """How much the counters summed over workers grew between times ``a`` and ``b`` (interpolated)."""
    return float(sum(np.interp(b, t, x) - np.interp(a, t, x) for t, x in counter.values()))


def rates(counter: Series, windows: list[tuple[float, float]]) -> list[float]:
    """The counter's growth per second in each window."""
    return [delta(counter, a, b) / (b - a) for a, b in windows]


def wait_for_trained_weights(run, actors: int, timeout_s: float) -> float:
    """Block until every actor reports acting with policy version >= 1; returns the seconds it took."""
    start = time.time()
    while True:
        run.wait(seconds=0, progress=False)  # raises if a worker failed
        ready = [r for r in run.metrics.workers("actor").values()
                 if (r.get("policy_version") or -1) >= 1 and r.get("env_steps", 0) > 0]
        if len(ready) >= actors:
            return time.time() - start
        if time.time() - start > timeout_s:
            raise TimeoutError(f"{len(ready)} of {actors} actors acting with trained weights after {timeout_s} s")
        time.sleep(0.2)


def measure_windows(run, actors: int, warmup_s: float, window_s: float, windows: int,
                    startup_timeout_s: float = 300.0) -> tuple[list[tuple[float, float]], list[dict[str, Any]], float]:
    """``(windows, records, startup_s)`` of a launched run, once it is in steady state."""
    startup_s = wait_for_trained_weights(run, actors, startup_timeout_s)
    time.sleep(warmup_s)
    t0 = time.time()
    edges = [t0 + k * window_s for k in range(windows + 1)]
    # Until every worker has reported past the last edge (reports come every metrics_interval_s).
    time.sleep(edges[-1] - time.time() + 2.5 * run.config.metrics_interval_s)
    return list(zip(edges, edges[1:])), list(run.metrics.records), startup_s
