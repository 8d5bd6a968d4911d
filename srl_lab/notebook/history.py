"""Reopen a run directory after a kernel restart: its config, metrics, result, curves and table.

A run that ended with ``Run.stop()`` has ``result.json``; one whose kernel or cluster died has not and
reads as interrupted. Either way the metrics file alone is enough to re-plot it and rebuild the worker
table as it last was.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any

from srl_lab.curves import render_png
from srl_lab.notebook.table import reported_workers
from srl_lab.system.metrics import MetricsLog
from srl_lab.system.run_status import policy_summaries


class RunHistory:
    """A finished or interrupted run read from disk. Displays as its learning curves in a notebook."""

    capabilities: frozenset[str] = frozenset()  # nothing runs, so the panel offers no controls

    def __init__(self, run_dir: str):
        self.run_dir = os.path.abspath(run_dir)
        metrics = os.path.join(self.run_dir, "metrics.jsonl")
        if not os.path.exists(metrics):
            raise FileNotFoundError(f"{self.run_dir} holds no metrics.jsonl; is it a srl_lab run directory?")
        self.config: dict[str, Any] = read_json(os.path.join(self.run_dir, "config.json")) or {}
        self.run_id: str = self.config.get("run_id", os.path.basename(self.run_dir))
        self.result: dict[str, Any] | None = read_json(os.path.join(self.run_dir, "result.json"))
        self.metrics = MetricsLog.load(metrics)

    @property
    def state(self) -> str:
        return "finished" if self.result is not None else "interrupted"

    @property
    def checkpoints(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.run_dir, "checkpoints", "*.pt")))

    def status(self) -> dict[str, Any]:
        """The shape of ``Run.status()``, as the workers last reported before the run ended."""
        latest = self.metrics.workers()
        trainer = latest.get("trainer-0", {})
        workers = reported_workers(latest, lambda r: r.get("state") or self.state)
        pooled = sorted(self.metrics.pool_results)
        return {"run_id": self.run_id, "run_dir": self.run_dir, "stopped": True, "state": self.state,
                "workers": workers, "actors": 0, "env_steps": self.metrics.env_steps(),
                "env_steps_per_s": 0.0, "version": trainer.get("version", 0),
                "episodes": len(self.metrics.episodes), "mean_return_last_20": self.metrics.mean_return(20),
                "dashboard": None, **({"policies": policies} if (policies := self._policies()) else {}),
                **({"pools": {p: self.metrics.pool_table(p) for p in pooled}} if pooled else {})}

    def _policies(self) -> dict[str, dict[str, Any]]:
        """Several policies: each one's last reported version and recent mean return (empty for one)."""
        versions: dict[str, int] = {}
        for record in self.metrics.workers("trainer").values():
            if record.get("policy") is not None:
                versions[record["policy"]] = max(versions.get(record["policy"], 0), int(record.get("version", 0)))
        return policy_summaries(self.metrics, dict(sorted(versions.items())))

    def png(self, x: str = "env_steps") -> bytes:
        """The learning curves as PNG bytes (the same figure a live panel shows); ``x``: "env_steps" or "time"."""
        return render_png(self.metrics, title=f"{self.run_id} ({self.state})", x=x)

    def _repr_png_(self) -> bytes:
        return self.png()

    def panel(self, **kw: Any):
        """A read-only panel: curves and the last worker table, controls shown as unavailable."""
        from srl_lab.notebook.panel import Panel

        return Panel(self, **kw)

    def __repr__(self) -> str:
        return (f"RunHistory({self.run_id!r}, {self.state}, {self.metrics.env_steps():,} env steps, "
                f"{len(self.metrics.episodes)} episodes)")


def open_run(run_dir: str) -> RunHistory:
    """Reopen ``run_dir`` (finished or interrupted) to re-plot it, e.g. after a kernel restart."""
    return RunHistory(run_dir)


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON file's object; None if it is missing or torn (a run killed mid-write)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
