"""Several runs' learning curves on the same axes, with the differences between their configs.

``srl_lab.compare(["runs/a", "runs/b"])`` overlays finished and live runs: one colour per run, one
line style per key within a panel, each line a rolling mean over its faint raw values, as in the
single-run figure (``srl_lab.curves``). A run given as a directory is re-read on every render, so a
run training in another kernel shows its newest data; a live ``Run`` (or a reopened ``RunHistory``)
is plotted from the metrics it holds in memory.
"""
from __future__ import annotations

import base64
import html
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from srl_lab.curves import (EPISODE_PANELS, TRAIN_PANELS, PanelSpec, check_x_axis, figure_png,
                            label_axes, panel_figure, panels_with_data, plot_smoothed, say_undefined,
                            time_span, time_unit)
from srl_lab.system.metrics import MetricsLog


class HasMetrics(Protocol):
    """A live ``Run`` or a ``RunHistory``: metrics in memory (plus ``config``, ``run_id``, ``run_dir``)."""

    metrics: MetricsLog


RunLike = Union[str, "os.PathLike[str]", HasMetrics]  # a run directory, a live Run or a RunHistory
# By a key's place in its panel, the same in every run; the last is dash-dot-dot.
LINE_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (3, 1, 1, 1, 1, 1)))
KEY_COLOUR = "#57606a"  # a panel's legend shows its keys' line styles in a neutral colour
ONE_RUN = "one run: no other config to differ from"
IGNORED_FIELDS = frozenset({"run_id", "run_ids"})  # differ between any two runs: they say nothing


@dataclass(frozen=True)
class RunSource:
    """One run to compare: its name, its config as saved and where its metrics come from."""

    name: str  # the run directory's name (or the run id when there is no directory)
    config: dict[str, Any] = field(repr=False)
    path: str | None = None  # metrics.jsonl, re-read on every render
    log: MetricsLog | None = field(default=None, repr=False)  # a live run's metrics, in memory

    def metrics(self) -> MetricsLog:
        return self.log if self.log is not None else MetricsLog.load(self.path)


def run_source(run: RunLike) -> RunSource:
    """A run directory (str or path), or an object holding ``metrics`` (``Run``, ``RunHistory``)."""
    if isinstance(run, (str, os.PathLike)):
        run_dir = os.path.abspath(os.fspath(run))
        metrics = os.path.join(run_dir, "metrics.jsonl")
        if not os.path.isdir(run_dir):
            raise FileNotFoundError(f"{os.fspath(run)!r} is not a srl_lab run directory: {run_dir} does not "
                                    "exist")
        if not os.path.isfile(metrics):
            raise FileNotFoundError(f"{os.fspath(run)!r} is not a srl_lab run directory: {run_dir} holds no "
                                    "metrics.jsonl")
        from srl_lab.notebook.history import read_json  # here: the notebook's panel imports this module

        config = read_json(os.path.join(run_dir, "config.json")) or {}
        return RunSource(os.path.basename(run_dir), config, path=metrics)
    if not isinstance(getattr(run, "metrics", None), MetricsLog):
        raise TypeError(f"cannot compare {run!r}: give a run directory, a srl_lab.Run or a RunHistory")
    config = getattr(run, "config", None)
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    run_id = getattr(run, "run_id", None)
    run_dir = getattr(run, "run_dir", None)
    name = os.path.basename(run_dir) if run_dir else str(run_id)
    return RunSource(name, {"run_id": run_id, **config}, log=run.metrics)


class Comparison:
    """Runs compared: ``figure()``, ``png()``, ``save(path)``, ``differences``; a notebook shows the
    differences as a table above the figure."""

    def __init__(self, sources: Sequence[RunSource], labels: Sequence[str], x: str = "env_steps",
                 window: int | None = None):
        self.sources = list(sources)
        self.labels = list(labels)
        self.x = x
        self.window = window
        self.differences: dict[str, list[Any]] = config_differences([s.config for s in self.sources])

    def figure(self, width: float = 11.0, dpi: int = 80) -> Figure:
        """The panels any run has data for, every run drawn on each (metrics read now). The runs'
        colours are named once above all panels, each panel's legend names its keys' line styles."""
        runs = [_columns(source.metrics(), self.x) for source in self.sources]
        shown = {spec for panels, _, _ in runs for spec, _ in panels}
        specs = [spec for spec in (*EPISODE_PANELS, *TRAIN_PANELS) if spec in shown]
        fig, axes = panel_figure(len(specs), width, dpi)
        scale, unit = time_unit(max(span for _, _, span in runs)) if self.x == "time" else (1.0, "")
        for ax, spec in zip(axes, specs):
            keyed_runs = [dict(panels).get(spec, {}) for panels, _, _ in runs]
            for i, (label, keyed, (_, t0, _)) in enumerate(zip(self.labels, keyed_runs, runs)):
                for key, (xs, ys) in keyed.items():
                    xs = (xs - t0) / scale if self.x == "time" else xs
                    plot_smoothed(ax, xs, ys, f"{label}: {key}", self.window, color=_colour(i),
                                  linestyle=_style(spec, key))
            defined = _defined_keys(spec, keyed_runs)
            handles = [_key_handle(spec, key, finite) for key, finite in defined.items()]
            label_axes(ax, spec, self.x, unit, handles=handles)
            if not any(defined.values()):
                say_undefined(ax)
        fig.legend(handles=[Line2D([], [], color=_colour(i), linewidth=2.5, label=label)
                            for i, label in enumerate(self.labels)],
                   loc="outside upper center", ncol=min(4, len(self.labels)), frameon=False, fontsize=9)
        return fig

    def png(self, width: float = 11.0, dpi: int = 80) -> bytes:
        return figure_png(self.figure(width, dpi))

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the figure as a PNG file; returns its path."""
        with open(path, "wb") as f:
            f.write(self.png())
        return os.fspath(path)

    def differences_html(self) -> str:
        """The config fields that differ, one row each, one column per run."""
        if not self.differences:
            alone = len(self.sources) == 1
            return f"<p class='srl-differences'>{ONE_RUN if alone else 'the configs do not differ'}</p>"
        head = "".join(f"<th>{html.escape(label)}</th>" for label in self.labels)
        rows = "".join(f"<tr><td><code>{html.escape(name)}</code></td>"
                       + "".join(f"<td>{html.escape(_shown(v))}</td>" for v in values) + "</tr>"
                       for name, values in self.differences.items())
        return (f"<table class='srl-differences'><thead><tr><th>config field</th>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table>")

    def _repr_html_(self) -> str:
        image = base64.b64encode(self.png()).decode("ascii")
        return f"{self.differences_html()}<img src='data:image/png;base64,{image}' style='max-width:100%'/>"

    def __repr__(self) -> str:
        return f"Comparison({self.labels!r}, x={self.x!r}, {len(self.differences)} config fields differ)"


def compare(runs: RunLike | Iterable[RunLike], x: str = "env_steps", labels: Sequence[str] | None = None,
            window: int | None = None) -> Comparison:
    """Overlay the learning curves of ``runs`` (run directories, live ``Run``s or ``RunHistory``s).

    ``x``: "env_steps" (samples trained) or "time" (wall-clock, from each run's own first record).
    ``labels`` name the runs in the legends (default: their directory names, made unique);
    ``window`` fixes the rolling mean's length (default: about a tenth of each line's points).
    """
    check_x_axis(x)
    if isinstance(runs, (str, os.PathLike)) or hasattr(runs, "metrics"):
        runs = [runs]
    sources = [run_source(run) for run in runs]
    if not sources:
        raise ValueError("compare needs at least one run: give run directories, srl_lab.Run or RunHistory "
                         "objects")
    if labels is None:
        labels = [source.name for source in sources]
    elif len(labels) != len(sources):
        raise ValueError(f"{len(labels)} labels for {len(sources)} runs: give one label per run")
    return Comparison(sources, unique(list(labels)), x, window)


def config_differences(configs: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """Dotted config field -> its value in each config (None where absent), for the fields that differ."""
    flat = [flatten({k: v for k, v in config.items() if k not in IGNORED_FIELDS}) for config in configs]
    fields = dict.fromkeys(name for one in flat for name in one)  # in the order the configs list them
    values = {name: [one.get(name) for one in flat] for name in fields}
    return {name: vs for name, vs in values.items() if any(v != vs[0] for v in vs[1:])}


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested sections as dotted names (``ppo.lr``, ``env.kwargs.size``); an empty section adds nothing."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def unique(names: list[str]) -> list[str]:
    """The names, those that repeat numbered in order: ``a (1)``, ``a (2)``."""
    counts, seen = Counter(names), Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(f"{name} ({seen[name]})" if counts[name] > 1 else name)
    return out


def _columns(log: MetricsLog, x: str) -> tuple[list, float, float]:
    """A run's panels with their columns, its first record's time and the seconds from it to its last row."""
    episodes, train = list(log.episodes), list(log.train)
    first = next((r["time"] for r in log.records if r.get("time") is not None), 0.0)
    return panels_with_data(episodes, train, x), float(first), time_span(episodes, train, first)


def _defined_keys(spec: PanelSpec, keyed_runs: list[dict[str, tuple[np.ndarray, np.ndarray]]]
                  ) -> dict[str, bool]:
    """The panel's keys some run carries, each with whether any run has a finite value for it."""
    return {key: any(np.isfinite(keyed[key][1]).any() for keyed in keyed_runs if key in keyed)
            for key in spec.keys if any(key in keyed for keyed in keyed_runs)}


def _key_handle(spec: PanelSpec, key: str, defined: bool) -> Line2D:
    """A key's legend entry: its line style in a neutral colour (the colours name the runs)."""
    return Line2D([], [], color=KEY_COLOUR, linestyle=_style(spec, key), linewidth=1.5,
                  label=key if defined else f"{key} (not defined)")


def _colour(run: int) -> str:
    return f"C{run % 10}"


def _style(spec: PanelSpec, key: str) -> Any:
    return LINE_STYLES[spec.keys.index(key) % len(LINE_STYLES)]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
