"""A widget to compare the runs under one folder: pick runs, pick the x axis, draw them together.

It lists the run directories under ``runs_root`` (newest first, the current run preselected) and
draws ``srl_lab.compare`` of the chosen ones on demand: the figure as an image, the differences
between their configs as a table. It holds no run and starts no thread, so any panel can show it.
"""
from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as widgets

from srl_lab.comparison import compare

X_OPTIONS = (("samples", "env_steps"), ("time", "time"))
BUTTON_WIDTH = "115px"  # as the control panel's buttons


class CompareView:
    """``CompareView(runs_root, current=run_dir).widget``: runs list, x-axis toggle, compare button."""

    def __init__(self, runs_root: str, current: str | None = None):
        self.runs_root = os.path.abspath(runs_root)
        self.current = os.path.abspath(current) if current else None
        self.runs = widgets.SelectMultiple(description="runs", rows=8, layout=widgets.Layout(width="60%"))
        self.x_axis = widgets.ToggleButtons(options=X_OPTIONS, value="env_steps", description="x axis")
        self.rescan = widgets.Button(description="rescan", icon="refresh",
                                     layout=widgets.Layout(width=BUTTON_WIDTH))
        self.button = widgets.Button(description="compare", icon="line-chart",
                                     layout=widgets.Layout(width=BUTTON_WIDTH))
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.differences = widgets.HTML()
        self.runs.add_class("srl-compare-runs")
        self.button.add_class("srl-compare-button")
        self.image.add_class("srl-compare-image")
        self.differences.add_class("srl-compare-differences")
        self.rescan.on_click(lambda _: self.refresh())
        self.button.on_click(lambda _: self.render())
        self.widget = widgets.VBox([self.runs, self.x_axis, widgets.HBox([self.button, self.rescan]),
                                    self.differences, self.image])
        self.widget.add_class("srl-compare")
        self.refresh()

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def refresh(self) -> list[str]:
        """Re-scan ``runs_root``, keeping the selection (the current run's when nothing is selected)."""
        found = run_dirs(self.runs_root)
        chosen = [d for d in self.runs.value if d in found] or [d for d in found if d == self.current]
        self.runs.options = [(os.path.basename(d), d) for d in found]
        self.runs.value = tuple(chosen)
        if not found:
            self._say(f"no run directories under {self.runs_root} yet")
        return found

    def render(self) -> None:
        """Draw the selected runs together (metrics re-read from their directories)."""
        if not self.runs.value:
            self._say("select one or more runs (ctrl- or shift-click for several)")
            return
        try:
            comparison = compare(list(self.runs.value), x=self.x_axis.value)
            self.image.value = comparison.png()
            self.differences.value = comparison.differences_html()
        except (OSError, ValueError) as exc:  # e.g. a run directory deleted since the last scan
            self._say(f"cannot compare: {exc}")

    def close(self) -> None:
        """Close every widget of the view (a closed view cannot be shown again)."""
        for widget in (self.runs, self.x_axis, self.button, self.rescan, self.image, self.differences,
                       *self.widget.children, self.widget):
            widget.close()

    def _say(self, text: str) -> None:
        self.differences.value = f"<p style='color:#57606a'>{html.escape(text)}</p>"


def run_dirs(root: str) -> list[str]:
    """Folders directly under ``root`` that hold a metrics.jsonl, newest first (by when they started)."""
    try:
        entries = [entry.path for entry in os.scandir(root) if entry.is_dir()]
    except FileNotFoundError:
        return []
    runs = [path for path in entries if os.path.isfile(os.path.join(path, "metrics.jsonl"))]
    return sorted(runs, key=lambda path: (-_started(path), os.path.basename(path)))


def _started(run_dir: str) -> float:
    """config.json is written when a run starts; metrics.jsonl stands in where it is missing."""
    for name in ("config.json", "metrics.jsonl"):
        try:
            return os.path.getmtime(os.path.join(run_dir, name))
        except OSError:
            continue
    return 0.0
