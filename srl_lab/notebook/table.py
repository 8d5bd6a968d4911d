"""The panel's worker table: rows computed from a run's ``status()`` and rendered as HTML.

Kept apart from the widgets so the figures (policy-version lag, restarts) are plain data a test can
check, and the same rows serve a live run, an attached one and a run reopened from disk.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROLE_ORDER = {"trainer": 0, "policy": 1, "actor": 2}


@dataclass(frozen=True)
class WorkerRow:
    worker: str
    role: str
    host: str
    state: str
    env_steps_per_s: float | None
    inference_latency_ms: float | None
    policy_lag: int | None  # trainer version minus the version this worker acts with
    restarts: int


def reported_workers(latest: dict[str, dict[str, Any]], state: Callable[[dict[str, Any]], str]
                     ) -> list[dict[str, Any]]:
    """Entries shaped like ``Run.status()["workers"]`` from each worker's latest metrics record.

    Used where no futures are at hand: a run reopened from disk, one attached from another kernel, and
    a stopped run (whose actors have left ``Run.status()``).
    """
    return [{"worker": worker, "role": r.get("role", "?"), "state": state(r), "host": r.get("host"),
             "pid": r.get("pid"), "env_steps_per_s": r.get("env_steps_per_s"),
             "inference_latency_ms": r.get("inference_latency_ms"),
             "policy_version": r.get("policy_version", r.get("version")), "restarts": r.get("restarts")}
            for worker, r in latest.items()]


def worker_rows(status: dict[str, Any]) -> list[WorkerRow]:
    """One row per worker, trainer first, then policy workers, then actors by index."""
    version = status.get("version")
    rows = []
    for w in status.get("workers", ()):
        acting = w.get("policy_version")
        known = w["role"] != "trainer" and acting is not None and version is not None
        lag = max(0, version - acting) if known else None
        rows.append(WorkerRow(worker=w["worker"], role=w["role"], host=w.get("host") or "—",
                              state=w.get("state") or "?", env_steps_per_s=w.get("env_steps_per_s"),
                              inference_latency_ms=w.get("inference_latency_ms"), policy_lag=lag,
                              restarts=int(w.get("restarts") or 0)))
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 9), _index(r.worker)))


def _index(worker: str) -> int:
    tail = worker.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


HEADER = ("worker", "role", "host", "state", "env steps/s", "inference ms", "policy lag", "restarts")
STATE_COLOURS = {"running": "#1a7f37", "training": "#1a7f37", "busy": "#1a7f37", "starting": "#9a6700",
                 "pending": "#9a6700", "finished": "#57606a", "stopped": "#57606a", "error": "#cf222e",
                 "lost": "#cf222e", "silent": "#cf222e"}


def rows_html(rows: list[WorkerRow]) -> str:
    """An HTML table; each row carries ``data-role`` / ``data-state`` so a UI test can count workers."""
    head = "".join(f"<th style='text-align:left;padding:2px 10px'>{h}</th>" for h in HEADER)
    body = []
    for r in rows:
        colour = STATE_COLOURS.get(r.state, "inherit")
        cells = (r.worker, r.role, r.host, f"<b style='color:{colour}'>{html.escape(r.state)}</b>",
                 _fmt(r.env_steps_per_s), _fmt(r.inference_latency_ms, 2), _fmt(r.policy_lag),
                 str(r.restarts))
        tds = "".join(f"<td style='padding:2px 10px'>{c if i == 3 else html.escape(c)}</td>"
                      for i, c in enumerate(cells))
        body.append(f"<tr data-worker='{html.escape(r.worker)}' data-role='{html.escape(r.role)}' "
                    f"data-state='{html.escape(r.state)}'>{tds}</tr>")
    return (f"<table class='srl-workers' style='border-collapse:collapse;font-size:12px'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
