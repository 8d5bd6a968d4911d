"""The control panel: ipywidgets controls, a worker table and live curves for one run.

It drives a live ``Run`` (every control), a run attached from another kernel (pause, resume,
checkpoint) or a run reopened from disk (read only). Curves are rendered with Agg to PNG and set on
``ipywidgets.Image`` by one UI pump thread at ``refresh_hz`` (2-5 Hz); slow calls a button or slider
starts (``controls``) run on a short-lived action thread whose outcome the pump shows, so the kernel
stays responsive and nothing is printed from a thread. A run of several policies shows each policy's
version and return in the header, its trainers' policy in the table, and any opponent pools below it.
"""
from __future__ import annotations

import html
import os
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from srl_lab.curves import check_x_axis, render_png
from srl_lab.notebook.compare_view import CompareView
from srl_lab.notebook.controls import RunControls
from srl_lab.notebook.pools import pools_html
from srl_lab.notebook.pump import Renderer, Timing, UiPump
from srl_lab.notebook.table import reported_workers, rows_html, worker_rows
from srl_lab.notebook.throughput import ThroughputSeries, render_throughput_png
from srl_lab.notebook.viewer import EpisodeViewer
from srl_lab.system.metrics import MetricsLog, format_figure, headline

MIN_IMAGE_INTERVAL_S = 0.5  # re-render a figure at most this often; workers report at ~1 Hz anyway
# A live figure waits this many times its last render's duration before the next: rendering then
# takes at most ~1/RENDER_SPACING of one core in the kernel (a hide-and-seek figure with a long
# history renders in ~1 s, and a kernel rendering back to back takes a core from a 2-core run).
RENDER_SPACING = 5.0


class Panel:
    """``run.panel()``: controls, worker table and live curves; displays as its widget."""

    def __init__(self, source: Any, refresh_hz: float = 4.0, max_actors: int | None = None,
                 x_axis: str = "env_steps", episode_every: int = 100):
        """``x_axis``: plot the curves against "env_steps" (samples trained) or "time" (wall-clock);
        ``episode_every``: the episode viewer plays one every this many policy versions."""
        if not 2.0 <= refresh_hz <= 5.0:
            raise ValueError(f"refresh_hz must be within 2-5 Hz, got {refresh_hz}")
        check_x_axis(x_axis)
        self.source = source
        self.x_axis = x_axis
        self.timing = Timing()
        self._period = 1.0 / refresh_hz
        self._reset_source_state()
        self._episode_every = episode_every
        self.controls = RunControls(self, self._actor_count(), max_actors)
        self.capabilities = self.controls.capabilities
        self.actors, self.ring, self.buttons, self.note = (self.controls.actors, self.controls.ring,
                                                           self.controls.buttons, self.controls.note)
        self._build()
        self._renderer: Renderer | None = None  # only a pumped panel renders off-thread
        self._pump: UiPump | None = None
        if self.live():
            self._start_pump()
        else:
            self.refresh()

    # ------------------------------------------------------------------ widgets
    def _build(self) -> None:
        self.header = widgets.HTML()
        self.table = widgets.HTML()
        self.pools = widgets.HTML()  # empty unless status() has opponent pools
        self.pools.add_class("srl-pools-panel")
        self.curves = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.throughput = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.curves.add_class("srl-curves")
        self.throughput.add_class("srl-throughput")
        self.widget = widgets.VBox([self.header, *self.controls.widgets, self.table, self.pools, self.curves,
                                    self.throughput, *self._build_tabs()])
        self.widget.add_class("srl-panel")

    def _build_tabs(self) -> list[widgets.Widget]:
        """The episode viewer and the run comparison, for a run with a directory (not an attached one)."""
        self.viewer: EpisodeViewer | None = None
        self.compare: CompareView | None = None
        self.tabs: widgets.Tab | None = None
        run_dir = getattr(self.source, "run_dir", None)
        if not run_dir:
            return []
        self.viewer = EpisodeViewer(self.source, every_versions=self._episode_every)
        self.compare = CompareView(os.path.dirname(run_dir), current=run_dir)
        self.tabs = widgets.Tab(children=[self.viewer.widget, self.compare.widget],
                                titles=["episode viewer", "compare runs"])
        self.tabs.add_class("srl-tabs")
        return [self.tabs]

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------------ the pump
    def _start_pump(self) -> None:
        self._renderer = self._renderer or Renderer()
        self._pump = UiPump(self._tick, self._period, self.timing).start()

    def _tick(self) -> bool:
        """One pump tick; False once the run has stopped and its final state is on screen."""
        try:
            return self.refresh()
        except Exception as exc:  # noqa: BLE001  (a scheduler hiccup must not end the panel's only thread)
            self.controls.say(f"refresh failed: {exc!r}", "error")
            self._set(self.note, self.controls.note_html())
            return True

    def refresh(self) -> bool:
        """Update every widget from the run; True while there is more to show. Called by the pump."""
        live = self.live()
        status = self.source.status()
        if not live:  # a stopped run's actors have left status(); show every worker's final report
            final = status.get("state") or "finished"
            latest = self.source.metrics.workers()
            status["workers"] = reported_workers(latest, lambda r: r.get("state") or final)
        paused = live and "pause" in self.capabilities and bool(self.source.paused)
        self._set(self.table, rows_html(worker_rows(status)))
        self._set(self.pools, pools_html(status))
        self._set(self.header, self._header_html(status, live, paused))
        busy = self.controls.update(live, paused)
        if live and self.viewer is not None:
            self.viewer.on_version(status["version"])
        if self._renderer is not None and self._renderer.error:
            self.controls.say(self._renderer.error, "error")
            self._renderer.error = None
        self._set(self.note, self.controls.note_html())
        pending = self._figures(live)
        return live or busy or pending

    def _figures(self, live: bool) -> bool:
        """Ask for figures whose data changed, set the ones rendered; True while some are pending.

        Each render works on a snapshot taken here, so data arriving meanwhile cannot tear a plot.
        """
        metrics, now = self.source.metrics, time.monotonic()
        trained = (len(metrics.episodes), len(metrics.train))
        if trained != self._trained_at_render and not self._busy("curves") \
                and (not live or now - self._curves_at >= self._min_interval("curves")):
            self._trained_at_render, self._curves_at = trained, now
            snapshot = MetricsLog(None)
            snapshot.episodes, snapshot.train = list(metrics.episodes), list(metrics.train)
            title, x_axis = self.source.run_id, self.x_axis
            self._render("curves", lambda: render_png(snapshot, title=title, x=x_axis))
        self._throughput_stale |= self._series.update(metrics)
        if (self._throughput_stale or not self.throughput.value) and not self._busy("throughput") \
                and (not live or now - self._throughput_at >= self._min_interval("throughput")):
            self._throughput_stale, self._throughput_at = False, now
            series = self._series.snapshot()
            self._render("throughput", lambda: render_throughput_png(series))
        if self._renderer is None:
            return False
        for name, (png, render_s) in self._renderer.take().items():
            getattr(self, name).value = png
            self.timing.image(name, render_s)
            self._render_s[name] = render_s
        return self._busy("curves") or self._busy("throughput")

    def _min_interval(self, figure: str) -> float:
        """Seconds between two requests of a live figure: its last render's duration, spaced out."""
        return max(MIN_IMAGE_INTERVAL_S, RENDER_SPACING * self._render_s.get(figure, 0.0))

    def _busy(self, figure: str) -> bool:
        return self._renderer is not None and self._renderer.busy(figure)

    def _render(self, figure: str, render: Callable[[], bytes]) -> None:
        if self._renderer is None:  # no pump (a run reopened from disk): render here, once
            start = time.perf_counter()
            getattr(self, figure).value = render()
            self.timing.image(figure, time.perf_counter() - start)
        else:
            self._renderer.request(figure, render)

    @staticmethod
    def _set(widget: widgets.Widget, value: Any) -> None:
        if widget.value != value:  # unchanged values would still cost a message to the browser
            widget.value = value

    def live(self) -> bool:
        """A launched run until it has stopped; an attached run until its trainer reports stopped."""
        if "stop" in self.capabilities:
            return self.source.result is None
        return "pause" in self.capabilities and not self.source.stopped

    def _actor_count(self) -> int:
        actors = getattr(self.source, "actors", None)
        if isinstance(actors, dict):
            return len(actors)
        return sum(1 for w in self.source.status()["workers"] if w["role"] == "actor")

    def _header_html(self, status: dict[str, Any], live: bool, paused: bool) -> str:
        state = status.get("state") or ("stopped" if not live else "paused" if paused else "running")
        parts = [f"<b>{html.escape(status['run_id'])}</b>", f"state: <b>{state}</b>",
                 f"env steps: {status['env_steps']:,}", f"env steps/s: {status['env_steps_per_s'] or 0:,.0f}",
                 _versions_html(status), f"episodes: {status['episodes']:,}",
                 _headline_html(self.source.metrics)]
        if status.get("dashboard"):
            link = html.escape(status["dashboard"])
            parts.append(f"<a href='{link}' target='_blank' class='srl-dashboard'>Dask dashboard</a>")
        client = getattr(self.source, "client", None)
        lines = [" &middot; ".join(parts)]
        if live and client is not None and "scale" in self.capabilities:
            address = html.escape(client.scheduler.address)
            lines.append(f"<span style='color:#57606a'>from another kernel: <code>srl_lab.notebook.attach("
                         f"'{html.escape(status['run_id'])}', scheduler='{address}').panel()</code></span>")
        return "<div style='font-size:13px'>" + "<br>".join(lines) + "</div>"

    def follow(self, run: Any) -> None:
        """Show ``run`` from now on (the start button launched it)."""
        if self._pump is not None:
            self._pump.stop()
        self.source = run
        self._reset_source_state()
        if self.viewer is not None:
            self.viewer.source = run
        self._start_pump()

    def _reset_source_state(self) -> None:
        self._series = ThroughputSeries()
        self._throughput_stale = True
        self._trained_at_render: tuple[int, int] | None = None
        self._curves_at = self._throughput_at = 0.0
        self._render_s: dict[str, float] = {}  # the last render's duration per figure

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop refreshing (the run goes on) and close the widgets."""
        if self._pump is not None:
            self._pump.stop()
        if self._renderer is not None:
            self._renderer.close()
        for part in (self.viewer, self.compare):
            if part is not None:
                part.close()
        self.controls.close()
        for widget in (self.header, self.table, self.curves, self.throughput, *self.widget.children, self.widget):
            widget.close()


def _versions_html(status: dict[str, Any]) -> str:
    """``policy version: 12``; with several policies each one's (its rank-0 trainer's) version."""
    policies = status.get("policies") or {}
    versions = [(name, p.get("version")) for name, p in policies.items() if isinstance(p, dict)]
    if len(versions) < 2:
        return f"policy version: {status['version']}"
    return "policy versions: " + ", ".join(f"{html.escape(str(name))} {version}" for name, version in versions)


def _headline_html(log: MetricsLog, last: int = 20) -> str:
    """The figures that mean something for this env: team returns, hidden, fort rate; or the return."""
    shown = ", ".join(f"{html.escape(label)} <b>{format_figure(value)}</b>"
                      for label, _, value in headline(log, last))
    return f"<span class='srl-headline'>last {last} episodes: {shown}</span>"
