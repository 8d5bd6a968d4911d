"""Helpers shared by the runtime tests."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import cloudpickle

from srl_lab import cluster as clusters
from srl_lab.config import ExperimentConfig, PPOConfig
from srl_lab.system.controller import Run, launch
from srl_lab.system.metrics import as_float


def solving_ppo() -> PPOConfig:
    """PPO for the tests that run CartPole to 475. Single process, 5 seeds each: lr 1e-3 reached a
    last-20 mean of 475 in 40-76 updates (median 69); the default 2.5e-4 in 115-132 on 3 seeds and
    not within the 97 updates run on the other 2."""
    return PPOConfig(lr=1e-3)


def wait_for(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s; fail the test saying what never happened within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


@contextmanager
def shipped_by_value(module: ModuleType) -> Iterator[None]:
    """Ship ``module``'s functions and classes by value, as a notebook cell's do: Dask's worker
    processes cannot import a test module."""
    cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def train_until_version(config: ExperimentConfig, client: Any, run_dir: str, version: int = 3,
                        timeout_s: float = 120.0) -> Run:
    """Launch ``config``, let it train until the policy reaches ``version`` (or time runs out), stop it.

    Returns the stopped run (``run.result``); asserts the version was reached and the books close.
    """
    run = launch(config, client=client, run_dir=run_dir)
    try:
        deadline = time.monotonic() + timeout_s
        while run.status()["version"] < version and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        result = run.stop()
    assert result["version"] >= version, result
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result
    return run


class FixedParams:
    """A parameter client that always holds the same weights (no parameter service needed)."""

    version, reconnects = 0, 0

    def __init__(self, weights: dict):
        self.weights = weights

    def wait_first(self, should_stop) -> dict:
        return self.weights

    def poll(self) -> None:
        return None

    def close(self) -> None:
        pass


def local_client(n_workers: int = 5) -> Iterator[Any]:
    """A client of a fresh LocalCluster; 5 processes fit the largest topology under test plus a spare."""
    from distributed import Client

    local = clusters.local(n_workers=n_workers, dashboard_address=None)
    client = Client(local)
    yield client
    client.close()
    local.close()


def event_accumulator(run_dir: str | Path) -> Any:
    """TensorBoard's own reader over a run directory's event files, everything kept.

    Orphan purging is off so that a step going backwards shows up instead of being dropped.
    """
    from tensorboard.backend.event_processing import event_accumulator as ea

    accumulator = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0, ea.IMAGES: 0},
                                      purge_orphaned_data=False)
    accumulator.Reload()
    return accumulator


def event_scalars(run_dir: str | Path) -> dict[str, list[Any]]:
    """Every scalar tag in the run directory's event files -> its events (step, wall_time, value)."""
    accumulator = event_accumulator(run_dir)
    return {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()["scalars"]}


def assert_event_files_match_metrics(run_dir: str | Path) -> None:
    """The event files hold every episode statistic and training statistic of ``metrics.jsonl``, each
    tag at strictly increasing steps, and every episode is counted once."""
    with open(Path(run_dir) / "metrics.jsonl") as f:
        trainer = [r for r in map(json.loads, f) if r.get("role") == "trainer"]
    episodes = [e for r in trainer for e in r["episodes"]]
    episode_keys = {k for e in episodes for k, v in e.items() if not math.isnan(as_float(v))}
    train_keys = {k for r in trainer for k in r["train"]}
    scalars = event_scalars(run_dir)
    assert episodes and train_keys, "the run trained nothing"
    assert {f"episode/{k}" for k in episode_keys} <= set(scalars), sorted(scalars)
    assert {f"train/{k}" for k in train_keys} <= set(scalars), sorted(scalars)
    for tag, events in scalars.items():
        steps = [e.step for e in events]
        assert all(a < b for a, b in zip(steps, steps[1:])), (tag, steps)
    assert sum(e.value for e in scalars["episode/count"]) == len(episodes)


def load_benchmark(name: str):
    """The module ``benchmarks/<name>.py``, loaded from its file (``benchmarks`` is no package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
