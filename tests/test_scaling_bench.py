"""The scaling benchmark's arithmetic and a short pass over its scaling-model measurements."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_window_rates_interpolate_each_actor_and_incarnation():
    windows = _load("runtime_windows")
    records = [
        {"role": "actor", "srl_worker": "actor-0", "inc": 1, "time": 0.0, "env_steps": 0},
        {"role": "actor", "srl_worker": "actor-0", "inc": 1, "time": 2.0, "env_steps": 200},
        {"role": "actor", "srl_worker": "actor-1", "inc": 7, "time": 1.0, "env_steps": 1000},
        {"role": "actor", "srl_worker": "actor-1", "inc": 7, "time": 3.0, "env_steps": 1400},
        {"role": "actor", "srl_worker": "actor-1", "inc": 8, "time": 3.0, "env_steps": 0},  # a restart
        {"role": "trainer", "srl_worker": "trainer-0", "inc": 2, "time": 1.5, "env_steps": 99},
    ]
    series = windows.series(records, "actor", "env_steps")
    assert set(series) == {("actor-0", 1), ("actor-1", 7), ("actor-1", 8)}
    # actor-0: 100 steps/s over [1, 2]; actor-1's first incarnation: 200 steps/s over [1, 2]
    assert windows.delta(series, 1.0, 2.0) == pytest.approx(300.0)
    assert windows.rates(series, [(1.0, 2.0), (0.0, 1.0)]) == pytest.approx([300.0, 100.0])


def test_scaling_model_measures_policy_batches_and_broadcast():
    model = _load("scaling_model")
    config = model.recipe_config()
    rates = model.measure_policy_batches(config, 0.01, sizes=(64, 128))
    assert set(rates) == {"64", "128"} and all(r > 0 for r in rates.values())
    broadcast = model.measure_broadcast(config, subscribers=(1, 2), versions=1)
    assert broadcast["weight_bytes"] > 100_000
    assert set(broadcast["deliver_s"]) == {"1", "2"} and all(s > 0 for s in broadcast["deliver_s"].values())
