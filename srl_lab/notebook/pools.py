"""The panel's opponent pools: for each policy playing past versions (self-play), its opponents' figures.

``Run.status()`` may carry ``"pools": {policy: [{"opponent": version, "team": name, "episodes": n,
"mean_return": x, "win_rate": w}, ...]}`` (``MetricsLog.pool_table``: ``team`` is the one the past
version played, ``mean_return`` is the past version's, ``win_rate`` the trained policy's); most runs
have none, and then nothing is shown. A table has a "plays as" column when its rows name teams. Rows
are plain data (as in ``table``) so a test can check them without widgets; opponents keep the order
the status gives.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from srl_lab.policies import DEFAULT

HEADER = ("past version", "episodes", "its mean return", "win rate against it")
TEAM_HEADER = "plays as"


@dataclass(frozen=True)
class PoolRow:
    opponent: Any  # the opponent's policy version (or whatever names it in the status)
    episodes: int
    mean_return: float | None  # the past version's
    win_rate: float | None  # the trained policy's, 0-1
    team: str | None = None  # the team the past version played (None: not recorded)


def pool_rows(status: dict[str, Any]) -> dict[str, list[PoolRow]]:
    """Policy -> its opponents' rows, for the policies whose pool has an entry; empty when none has."""
    pools = status.get("pools") or {}
    return {str(policy): [_row(entry) for entry in entries]
            for policy, entries in pools.items() if entries}


def _row(entry: dict[str, Any]) -> PoolRow:
    return PoolRow(opponent=entry.get("opponent"), episodes=int(entry.get("episodes") or 0),
                   mean_return=_number(entry.get("mean_return")), win_rate=_number(entry.get("win_rate")),
                   team=entry.get("team") or None)


def _number(value: Any) -> float | None:
    """A finite float, else None (shown as a dash): a pool entry may have no finished episode yet."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def pools_html(status: dict[str, Any]) -> str:
    """One small table per policy with a pool, side by side; "" when the status has none."""
    pools = pool_rows(status)
    if not pools:
        return ""
    tables = [_table(policy, rows) for policy, rows in pools.items()]
    return f"<div class='srl-pools' style='display:flex;flex-wrap:wrap;gap:24px'>{''.join(tables)}</div>"


def _table(policy: str, rows: list[PoolRow]) -> str:
    name = html.escape(policy)
    caption = "against past versions" if policy == DEFAULT else f"{name} against past versions"
    teams = any(r.team for r in rows)
    header = HEADER[:1] + (TEAM_HEADER,) + HEADER[1:] if teams else HEADER
    head = "".join(f"<th style='text-align:left;padding:2px 10px'>{h}</th>" for h in header)
    body = []
    for r in rows:
        cells = (str(r.opponent), *((r.team or "—",) if teams else ()), f"{r.episodes:,}",
                 _fmt(r.mean_return, "{:.2f}"), _fmt(r.win_rate, "{:.0%}"))
        tds = "".join(f"<td style='padding:2px 10px'>{html.escape(c)}</td>" for c in cells)
        body.append(f"<tr data-opponent='{html.escape(str(r.opponent))}'>{tds}</tr>")
    return (f"<table class='srl-pool' data-policy='{name}' style='border-collapse:collapse;font-size:12px'>"
            f"<caption style='text-align:left;font-weight:bold'>{caption}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else spec.format(value)
