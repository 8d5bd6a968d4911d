"""Env steps per second over time, per actor worker and in total, as a PNG for the panel.

The learning curves (``srl_lab.curves``) are plotted against samples trained unless asked for
wall-clock time; throughput is always against wall-clock time, so it is folded in here incrementally
from the actors' metrics records.
"""
from __future__ import annotations

import io

from matplotlib.figure import Figure

from srl_lab.system.metrics import MetricsLog


class ThroughputSeries:
    """Total and per-actor env steps/s against seconds since the first record."""

    def __init__(self) -> None:
        self._seen = 0
        self._t0: float | None = None
        self._latest: dict[str, float] = {}
        self.times: list[float] = []
        self.total: list[float] = []
        self.per_actor: dict[str, tuple[list[float], list[float]]] = {}

    def update(self, log: MetricsLog) -> bool:
        """Fold in records that arrived since the last call; True if an actor reported."""
        new = log.records[self._seen:]  # a slice is a consistent copy even while records arrive
        self._seen += len(new)
        changed = False
        for record in new:
            if record.get("role") != "actor" or record.get("env_steps_per_s") is None:
                continue
            if self._t0 is None:
                self._t0 = record["time"]
            t, rate = record["time"] - self._t0, float(record["env_steps_per_s"])
            worker = record["srl_worker"]
            self._latest[worker] = rate  # a stopped actor's last record reports 0, dropping it from the total
            xs, ys = self.per_actor.setdefault(worker, ([], []))
            xs.append(t)
            ys.append(rate)
            self.times.append(t)
            self.total.append(sum(self._latest.values()))
            changed = True
        return changed

    def snapshot(self) -> ThroughputSeries:
        """A copy a renderer can plot while this one keeps growing."""
        copy = ThroughputSeries()
        copy.times, copy.total = list(self.times), list(self.total)
        copy.per_actor = {w: (list(xs), list(ys)) for w, (xs, ys) in self.per_actor.items()}
        return copy


def render_throughput_png(series: ThroughputSeries, width: float = 11.0, dpi: int = 80) -> bytes:
    fig = Figure(figsize=(width, 2.4), dpi=dpi, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    if series.times:
        ax.plot(series.times, series.total, color="black", linewidth=1.8, label="total",
                drawstyle="steps-post")
        for worker, (xs, ys) in sorted(series.per_actor.items()):
            ax.plot(xs, ys, linewidth=0.8, alpha=0.7, label=worker)
        # Above the axes, titled, so it never covers the curves.
        ax.legend(title="env steps/s", title_fontproperties={"size": 9, "weight": "bold"}, fontsize=7,
                  loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=8, frameon=False, borderaxespad=0.2)
    else:
        ax.text(0.5, 0.5, "waiting for the actors' first reports...", ha="center", transform=ax.transAxes)
        ax.set_title("env steps/s", fontsize=9)
    ax.set_xlabel("wall-clock time (s)", fontsize=8)
    ax.set_ylabel("env steps/s", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
