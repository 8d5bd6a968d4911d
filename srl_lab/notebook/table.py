"""The panel's worker table: rows computed from a run's ``status()`` and rendered as HTML.

Kept apart from the widgets so the figures (policy-version lag, restarts) are plain data a test can
check, and the same rows serve a live run, an attached one and a run reopened from disk. A run of
several policies gets a policy column: which policy each trainer (and policy worker) serves.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from srl_lab.policies import DEFAULT

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
    policy: str | None = None  # the policy a trainer or policy worker serves; None in a single-policy run


def reported_workers(latest: dict[str, dict[str, Any]], state: Callable[[dict[str, Any]], str]
                     ) -> list[dict[str, Any]]:
    """Entries shaped like ``Run.status()["workers"]`` from each worker's latest metrics record.

    Used where no futures are at hand: a run reopened from disk, one attached from another kernel, and
    a stopped run (whose actors have left ``Run.status()``).
    """
    return [{"worker": worker, "role": r.get("role", "?"), "state": state(r), "host": r.get("host"),
             "pid": r.get("pid"), "env_steps_per_s": r.get("env_steps_per_s"),
             "inference_latency_ms": r.get("inference_latency_ms"),
             "policy_version": r.get("policy_version", r.get("version")), "restarts": r.get("restarts"),
             "policy": r.get("policy")}
            for worker, r in latest.items()]


def worker_rows(status: dict[str, Any]) -> list[WorkerRow]:
    """One row per worker, trainer first, then policy workers, then actors by index.

    With several policies each row names its worker's policy, and a worker's policy lag is counted
    from its own policy's version (``status["policies"]``) where that is known.
    """
    version = status.get("version")
    versions = {name: p.get("version") for name, p in (status.get("policies") or {}).items()
                if isinstance(p, dict)}
    named = several_policies(status)
    rows = []
    for w in status.get("workers", ()):
        policy = w.get("policy") if named else None
        latest = versions.get(policy, version) if policy is not None else version
        acting = w.get("policy_version")
        known = w["role"] != "trainer" and acting is not None and latest is not None
        lag = max(0, latest - acting) if known else None
        rows.append(WorkerRow(worker=w["worker"], role=w["role"], host=w.get("host") or "—",
                              state=w.get("state") or "?", env_steps_per_s=w.get("env_steps_per_s"),
                              inference_latency_ms=w.get("inference_latency_ms"), policy_lag=lag,
                              restarts=int(w.get("restarts") or 0), policy=policy))
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 9), _index(r.worker)))


def several_policies(status: dict[str, Any]) -> bool:
    """Whether ``status`` is of a run with named policies (a single-policy run's are all ``DEFAULT``)."""
    return bool(status.get("policies")) or any(w.get("policy") not in (None, DEFAULT)
                                               for w in status.get("workers", ()))


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
    """An HTML table; each row carries ``data-role`` / ``data-state`` (and ``data-policy`` when it has
    one) so a UI test can count workers. A policy column follows the role when some row has a policy."""
    named = any(r.policy is not None for r in rows)
    header = (*HEADER[:2], "policy", *HEADER[2:]) if named else HEADER
    head = "".join(f"<th style='text-align:left;padding:2px 10px'>{h}</th>" for h in header)
    body = []
    for r in rows:
        colour = STATE_COLOURS.get(r.state, "inherit")
        state = f"<b style='color:{colour}'>{html.escape(r.state)}</b>"
        cells = [html.escape(c) for c in (r.worker, r.role, r.host)] + [state] + [
            html.escape(c) for c in (_fmt(r.env_steps_per_s), _fmt(r.inference_latency_ms, 2), _fmt(r.policy_lag),
                                     str(r.restarts))]
        policy = ""
        if named:
            cells.insert(2, html.escape(r.policy or "—"))
            policy = f" data-policy='{html.escape(r.policy)}'" if r.policy is not None else ""
        tds = "".join(f"<td style='padding:2px 10px'>{c}</td>" for c in cells)
        body.append(f"<tr data-worker='{html.escape(r.worker)}' data-role='{html.escape(r.role)}' "
                    f"data-state='{html.escape(r.state)}'{policy}>{tds}</tr>")
    return (f"<table class='srl-workers' style='border-collapse:collapse;font-size:12px'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
