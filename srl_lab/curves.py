"""Learning curves rendered with matplotlib's Agg backend to PNG bytes (files, widgets, reports).

Every curve is a rolling mean drawn over its raw values (a faint line of the same colour), against
samples trained or wall-clock time. Panels appear for the keys the episodes carry, so a CartPole
run, an older hide-and-seek run and one with the phase metrics each get the panels they have data
for. A run of several policies draws the return and each loss once per policy, a policy keeping its
colour on every panel. Legends sit above their axes, never over the data.
"""
from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg", force=False)
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator  # noqa: E402

from srl_lab.system.metrics import MetricsLog, as_float, rolling_mean  # noqa: E402

X_AXES = ("env_steps", "time")
MAX_WINDOW = 200  # episodes (or trainer reports) in one rolling mean
MAX_POINTS = 2000  # points drawn per line: more only costs render time at 2-5 Hz


@dataclass(frozen=True)
class PanelSpec:
    """One axes: its title, the keys drawn on it and the unit of their values."""

    title: str
    keys: tuple[str, ...]
    ylabel: str


# Hide-and-seek runs report the team statistics, others a return.
EPISODE_PANELS = (
    PanelSpec("return", ("return",), "return per episode"),
    PanelSpec("team returns", ("hider_return", "seeker_return"), "return per episode"),
    PanelSpec("fraction of play steps hidden", ("hidden_fraction", "hidden_fraction_vs_random_seeker",
                                                "hidden_fraction_vs_random_hider"), "fraction of play steps"),
    PanelSpec("fort, rooms, box held", ("doors_blocked_prep", "fort_prep", "hider_in_room", "seeker_in_room",
                                        "hider_holds_play"), "share (0-1)"),
    PanelSpec("first sight of a hider", ("first_seen_step",), "play step"),
    PanelSpec("box moves", ("max_box_move_prep", "max_box_move"), "max distance moved (m)"),
    PanelSpec("box locks", ("num_box_lock_prep", "num_box_lock"), "locked boxes (count)"),
    PanelSpec("ramp moves", ("max_ramp_move_prep", "max_ramp_move"), "max distance moved (m)"),
    PanelSpec("ramp locks", ("num_ramp_lock_prep", "num_ramp_lock"), "locked ramps (count)"),
)
TRAIN_PANELS = (PanelSpec("losses", ("policy_loss", "value_loss", "entropy"), "per update"),)
# Several policies: one line per policy on the return panel and on one panel per loss.
POLICY_RETURN = EPISODE_PANELS[0]
POLICY_LOSSES = tuple(PanelSpec(key, (key,), "per update") for key in TRAIN_PANELS[0].keys)


def check_x_axis(x: str) -> None:
    if x not in X_AXES:
        raise ValueError(f"x must be one of {X_AXES}, got {x!r}")


def render_png(log: MetricsLog, title: str = "", width: float = 11.0, dpi: int = 80, x: str = "env_steps",
               window: int | None = None) -> bytes:
    """All panels that have data as PNG bytes; ``x`` is "env_steps" (samples trained) or "time"."""
    return figure_png(build_figure(log, title=title, width=width, dpi=dpi, x=x, window=window))


def figure_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def save_png(log: MetricsLog, path: str, title: str = "", x: str = "env_steps") -> str:
    with open(path, "wb") as f:
        f.write(render_png(log, title, x=x))
    return path


def build_figure(log: MetricsLog, title: str = "", width: float = 11.0, dpi: int = 80, x: str = "env_steps",
                 window: int | None = None) -> Figure:
    """The figure ``render_png`` draws: one axes per panel with data, the losses last.

    Episodes of more than one policy get a line per policy (labelled by its name) on the return and
    loss panels; one policy's lines have the same colour on every panel.
    """
    check_x_axis(x)
    episodes, train = list(log.episodes), list(log.train)
    policies = policy_names(episodes)
    multi = len(policies) > 1
    panels = policy_panels(episodes, train, x, policies) if multi else panels_with_data(episodes, train, x)
    colours = {policy: f"C{i % 10}" for i, policy in enumerate(policies)}
    fig, axes = panel_figure(len(panels), width, dpi, title)
    t0 = _first_time(episodes, train)
    scale, unit = time_unit(time_span(episodes, train, t0)) if x == "time" else (1.0, "")
    for ax, (spec, data) in zip(axes, panels):
        by_policy = multi and (spec is POLICY_RETURN or spec in POLICY_LOSSES)
        for key, (xs, ys) in data.items():
            xs = (xs - t0) / scale if x == "time" else xs
            plot_smoothed(ax, xs, ys, key, window, color=colours.get(key) if by_policy else None)
        label_axes(ax, spec, x, unit)
        if not any(np.isfinite(ys).any() for _, ys in data.values()):
            say_undefined(ax)
    return fig


def panels_with_data(episodes: list[dict[str, Any]], train: list[dict[str, Any]], x: str
                     ) -> list[tuple[PanelSpec, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """The episode panels the rows have data for, then the losses, each with its keys' columns."""
    panels = _with_data(EPISODE_PANELS, episodes, x)
    if len(panels) > 1 and panels[0][0].title == "return":  # team games: the mean agent return is 0 by design
        panels = panels[1:]
    return panels + _with_data(TRAIN_PANELS, train, x)


def policy_names(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The policies whose stamp (``"policy"``) the rows carry, by name; empty for a single-policy run."""
    return sorted({str(row["policy"]) for row in rows if row.get("policy") is not None})


def policy_panels(episodes: list[dict[str, Any]], train: list[dict[str, Any]], x: str, policies: Sequence[str]
                  ) -> list[tuple[PanelSpec, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """Panels of a run of several policies: the return keyed by policy (each policy's agents' mean
    return is meaningful, even in a team game), the other episode panels as in one run, then each loss
    keyed by policy."""
    episodes_of, train_of = _by_policy(episodes), _by_policy(train)
    returns = {policy: data["return"] for policy in policies
               if (data := columns(episodes_of.get(policy, ()), POLICY_RETURN.keys, x)) and "return" in data}
    panels = [(POLICY_RETURN, returns)] if returns else []
    panels += _with_data(EPISODE_PANELS[1:], episodes, x)
    losses = {policy: columns(train_of.get(policy, ()), TRAIN_PANELS[0].keys, x) for policy in policies}
    for spec in POLICY_LOSSES:
        keyed = {policy: data[spec.keys[0]] for policy, data in losses.items() if spec.keys[0] in data}
        if keyed:
            panels.append((spec, keyed))
    return panels


def _by_policy(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by their ``"policy"`` stamp, in order; rows without one are left out."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("policy") is not None:
            grouped.setdefault(str(row["policy"]), []).append(row)
    return grouped


def panel_figure(n: int, width: float, dpi: int, title: str = "") -> tuple[Figure, list[Axes]]:
    """A figure with ``n`` axes, three to a row (a waiting note when there are none)."""
    cols = min(3, max(1, n))
    rows = max(1, (n + cols - 1) // cols)
    fig = Figure(figsize=(width, 3.2 * rows), dpi=dpi, layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    if not n:
        fig.text(0.5, 0.5, "waiting for the first episodes...", ha="center")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig, axes


def columns(rows: Iterable[dict[str, Any]], keys: Sequence[str], x: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Key -> (x values, y values) over the rows that carry the key, in one pass; absent keys left out."""
    found: dict[str, tuple[list[Any], list[Any]]] = {key: ([], []) for key in keys}
    for row in rows:
        at = row.get(x)
        if at is None:
            continue
        for key in row.keys() & found.keys():
            xs, ys = found[key]
            xs.append(at)
            ys.append(row[key])
    return {key: (np.asarray(xs, dtype=np.float64), _floats(ys)) for key, (xs, ys) in found.items() if xs}


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):  # a None or a string among them: NaN there
        return np.array([as_float(v) for v in values], dtype=np.float64)


def _with_data(specs: Sequence[PanelSpec], rows: list[dict[str, Any]], x: str
               ) -> list[tuple[PanelSpec, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """The panels some row has data for, each with its keys' columns (rows read once for all)."""
    data = columns(rows, [key for spec in specs for key in spec.keys], x)
    panels = [(spec, {key: data[key] for key in spec.keys if key in data}) for spec in specs]
    return [(spec, keyed) for spec, keyed in panels if keyed]


def smoothing_window(n: int) -> int:
    """About a tenth of the points, at most ``MAX_WINDOW``: smooth early on, detailed in long runs."""
    return max(1, min(MAX_WINDOW, n // 10))


def plot_smoothed(ax: Axes, xs: np.ndarray, ys: np.ndarray, label: str, window: int | None,
                  color: str | None = None, linestyle: str = "-") -> Line2D:
    """The raw values as a faint line, their rolling mean over it in the same colour (the next
    colour of the axes' cycle unless ``color`` is given); returns the rolling mean's line."""
    smooth = rolling_mean(ys, window or smoothing_window(len(ys)))
    keep = _thin(len(ys))
    label = label if np.isfinite(ys).any() else f"{label} (not defined)"
    (line,) = ax.plot(xs[keep], smooth[keep], linewidth=1.5, label=label, zorder=3, color=color,
                      linestyle=linestyle)
    ax.plot(xs[keep], ys[keep], linewidth=0.7, alpha=0.25, color=line.get_color(), zorder=2)
    return line


def _thin(n: int) -> slice:
    """Every k-th point so at most ``MAX_POINTS`` are drawn (the rolling mean already used them all)."""
    return slice(None, None, max(1, -(-n // MAX_POINTS)))


def label_axes(ax: Axes, spec: PanelSpec, x: str, unit: str, handles: Sequence[Artist] | None = None) -> None:
    """Units on both axes; the title and legend (of ``handles``, else the labelled lines) above the
    axes, where they cover no data."""
    ax.set_xlabel("samples trained (agent steps)" if x == "env_steps" else f"wall-clock time ({unit})",
                  fontsize=8)
    ax.set_ylabel(spec.ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    if x == "env_steps":
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1.5M: readable in a third of the width
    ax.grid(alpha=0.2)
    ax.legend(handles=handles, title=spec.title, title_fontproperties={"size": 9, "weight": "bold"},
              fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False,
              borderaxespad=0.2, handlelength=1.5, columnspacing=1.0)


def say_undefined(ax: Axes) -> None:
    """A panel whose keys the episodes carry only as NaN (e.g. a scenario without that event)."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, "no finite values yet", ha="center", va="center", fontsize=8, color="#57606a",
            transform=ax.transAxes)


def _first_time(*series: list[dict[str, Any]]) -> float:
    times = [row["time"] for rows in series for row in rows[:1] if row.get("time") is not None]
    return float(min(times)) if times else 0.0


def time_span(episodes: list[dict[str, Any]], train: list[dict[str, Any]], t0: float) -> float:
    """Seconds from ``t0`` to the last row's time (0 before any row)."""
    ends = [row["time"] for rows in (episodes, train) for row in rows[-1:] if row.get("time") is not None]
    return (max(ends) - t0) if ends else 0.0


def time_unit(span: float) -> tuple[float, str]:
    """Seconds, minutes or hours, whichever keeps the axis numbers readable over ``span`` seconds."""
    if span >= 3 * 3600:
        return 3600.0, "h"
    if span >= 600:
        return 60.0, "min"
    return 1.0, "s"

