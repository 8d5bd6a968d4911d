"""The run's metrics: records from every worker, persisted as JSON lines, queried for curves.

Both a live ``Run`` (fed by the client's ``subscribe_topic`` handler) and a run reopened from disk
after a kernel restart use this class, so curves and tables look the same either way. A resumed run
appends to the same file after loading what is there, so its curves continue.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Iterable

import numpy as np


class MetricsLog:
    def __init__(self, path: str | None = None, resume: bool = False):
        self.path = path
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.episodes: list[dict[str, Any]] = []  # each stamped with the trainer's env_steps and time
        self.train: list[dict[str, Any]] = []  # one row per trainer report
        self.latest: dict[str, dict[str, Any]] = {}  # worker id -> last record
        self._actor_steps: dict[tuple[str, Any], int] = {}  # (actor, incarnation) -> env steps it reported
        self._trainer_steps: dict[str, int] = {}  # trainer id -> env steps it consumed (ranks add up)
        if resume and path:
            for record in _read(path):
                self.add(record, persist=False)
        self._file = open(path, "a", buffering=1) if path else None

    def add(self, record: dict[str, Any], persist: bool = True) -> None:
        with self._lock:
            self.records.append(record)
            self.latest[record.get("srl_worker", "?")] = record
            if record.get("role") == "actor" and "env_steps" in record:
                self._actor_steps[(record.get("srl_worker", "?"), record.get("inc"))] = record["env_steps"]
            if record.get("role") == "trainer":
                self._trainer_steps[record.get("srl_worker", "?")] = record.get("env_steps_consumed", 0)
                stamp = {"env_steps": sum(self._trainer_steps.values()), "time": record.get("time"),
                         "version": record.get("version")}
                self.episodes.extend({**e, **stamp} for e in record.get("episodes", ()))
                self.train.append({**record.get("train", {}), **stamp})
            if persist and self._file:
                self._file.write(json.dumps(record, default=_json_default) + "\n")

    @classmethod
    def load(cls, path: str) -> "MetricsLog":
        log = cls(None)
        for record in _read(path):
            log.add(record, persist=False)
        log.path = path
        return log

    def returns(self, key: str = "return") -> np.ndarray:
        with self._lock:
            return np.array([e[key] for e in self.episodes if key in e], dtype=np.float64)

    def mean_return(self, last: int = 20, key: str = "return") -> float:
        values = self.returns(key)[-last:]
        return float(values.mean()) if len(values) else float("nan")

    def workers(self, role: str | None = None) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {w: r for w, r in self.latest.items() if role is None or r.get("role") == role}

    def env_steps(self) -> int:
        """Env steps stepped by all actors: every incarnation, including replaced and scaled-away ones."""
        with self._lock:
            return int(sum(self._actor_steps.values()))

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


def _read(path: str) -> Iterable[dict[str, Any]]:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:  # a run killed mid-write leaves a torn last line
                    continue


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def smooth(values: Iterable[float], window: int) -> np.ndarray:
    values = np.asarray(list(values), dtype=np.float64)
    if len(values) < window or window <= 1:
        return values
    kernel = np.ones(window) / window
    return np.convolve(values, kernel, mode="valid")
