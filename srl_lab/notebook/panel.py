"""The control panel: ipywidgets controls, a worker table and live curves for one run.

It drives a live ``Run`` (every control), a run attached from another kernel (pause, resume,
checkpoint) or a run reopened from disk (read only). Curves are rendered with Agg to PNG and set on
``ipywidgets.Image`` by one UI pump thread at ``refresh_hz`` (2-5 Hz); slow calls a button or slider
starts (scaling, stopping, checkpointing) run on a short-lived action thread whose outcome the pump
shows, so the kernel stays responsive and nothing is printed from a thread.
"""
from __future__ import annotations

import dataclasses
import html
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from srl_lab.cluster import slot_count
from srl_lab.config import ExperimentConfig
from srl_lab.curves import check_x_axis, render_png
from srl_lab.notebook.compare_view import CompareView
from srl_lab.notebook.pump import Renderer, Timing, UiPump
from srl_lab.notebook.table import reported_workers, rows_html, worker_rows
from srl_lab.notebook.throughput import ThroughputSeries, render_throughput_png
from srl_lab.notebook.viewer import EpisodeViewer
from srl_lab.system.metrics import MetricsLog, headline

FULL_CONTROL = frozenset({"start", "scale", "ring", "pause", "checkpoint", "stop"})
MIN_IMAGE_INTERVAL_S = 0.5  # re-render a figure at most this often; workers report at ~1 Hz anyway
# A live figure waits this many times its last render's duration before the next: rendering then
# takes at most ~1/RENDER_SPACING of one core in the kernel (a hide-and-seek figure with a long
# history renders in ~1 s, and a kernel rendering back to back takes a core from a 2-core run).
RENDER_SPACING = 5.0
NOTE_COLOURS = {"info": "#0550ae", "warning": "#9a6700", "error": "#cf222e"}


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
        self.capabilities: frozenset[str] = getattr(source, "capabilities", FULL_CONTROL)
        self.timing = Timing()
        self._period = 1.0 / refresh_hz
        self._lock = threading.Lock()
        self._note = ("", "info")  # written by any thread, shown by the pump
        self._action: threading.Thread | None = None  # the latest button's action
        self._scaler: threading.Thread | None = None  # applies actor-control moves, one at a time
        self._wanted_actors: int | None = None
        self._ring_of: dict[str, int] = {}  # actor worker -> ring size it was started with
        self._reset_source_state()
        self._episode_every = episode_every
        self._build(max_actors)
        self._renderer: Renderer | None = None  # only a pumped panel renders off-thread
        self._pump: UiPump | None = None
        if self._live():
            self._start_pump()
        else:
            self.refresh()

    # ------------------------------------------------------------------ widgets
    def _build(self, max_actors: int | None) -> None:
        actors = self._actor_count()
        config = getattr(self.source, "config", None)
        if not isinstance(config, ExperimentConfig):  # attached (no config) or reopened from disk (a dict)
            config = None
        ring = config.actors.ring_size if config is not None else 1
        style = {"description_width": "initial"}
        self.header = widgets.HTML()
        self.actors = widgets.IntSlider(value=max(actors, 1), min=1, max=max_actors or max(8, 2 * actors),
                                        description="actor workers", continuous_update=False, style=style)
        self.ring = widgets.IntSlider(value=ring, min=1, max=max(8, 2 * ring), description="env ring size",
                                      continuous_update=False, style=style)
        self.actors.add_class("srl-actors")
        self.ring.add_class("srl-ring")
        controls: list[widgets.Widget] = [self.actors, self.ring]
        self.policy_workers: widgets.IntSlider | None = None
        if config is not None and config.inference.mode == "remote":
            n = config.inference.policy_workers
            self.policy_workers = widgets.IntSlider(
                value=n, min=n, max=n, disabled=True, description="policy workers", style=style,
                tooltip="fixed for the run's lifetime: actors are bound to their policy worker at start")
            self.policy_workers.add_class("srl-policy-workers")
            controls.append(self.policy_workers)
        icons = {"start": "play", "pause": "pause", "resume": "play-circle", "stop": "stop",
                 "checkpoint": "save"}
        width = widgets.Layout(width="115px")
        self.buttons = {name: widgets.Button(description=name, icon=icon, layout=width)
                        for name, icon in icons.items()}
        for name, button in self.buttons.items():
            button.add_class(f"srl-{name}")
            button.on_click(lambda _, name=name: self._on_button(name))
        self.note = widgets.HTML()
        self.table = widgets.HTML()
        self.curves = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.throughput = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.curves.add_class("srl-curves")
        self.throughput.add_class("srl-throughput")
        if "scale" not in self.capabilities:
            self.actors.disabled = True
        if "ring" not in self.capabilities:
            self.ring.disabled = True
        self.actors.observe(self._on_actors, names="value")
        self.ring.observe(self._on_ring, names="value")
        self.widget = widgets.VBox([self.header, widgets.HBox(controls),
                                    widgets.HBox(list(self.buttons.values())), self.note, self.table,
                                    self.curves, self.throughput, *self._build_tabs()])
        self.widget.add_class("srl-panel")
        if self.capabilities != FULL_CONTROL:
            self._say(getattr(self.source, "not_here", "reopened from disk: nothing runs to control"))

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
            self._say(f"refresh failed: {exc!r}", "error")
            self._set(self.note, self._note_html())
            return True

    def refresh(self) -> bool:
        """Update every widget from the run; True while there is more to show. Called by the pump."""
        live = self._live()
        status = self.source.status()
        if not live:  # a stopped run's actors have left status(); show every worker's final report
            final = status.get("state") or "finished"
            latest = self.source.metrics.workers()
            status["workers"] = reported_workers(latest, lambda r: r.get("state") or final)
        paused = live and "pause" in self.capabilities and bool(self.source.paused)
        self._set(self.table, rows_html(worker_rows(status)))
        self._set(self.header, self._header_html(status, live, paused))
        busy = self._update_controls(live, paused)
        if live and self.viewer is not None:
            self.viewer.on_version(status["version"])
        if self._renderer is not None and self._renderer.error:
            self._say(self._renderer.error, "error")
            self._renderer.error = None
        self._set(self.note, self._note_html())
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

    def _live(self) -> bool:
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
                 f"policy version: {status['version']}", f"episodes: {status['episodes']:,}",
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

    def _update_controls(self, live: bool, paused: bool) -> bool:
        """Enable what makes sense now; True while an action (scale, stop, ...) is still running."""
        busy = self._scaler is not None or (self._action is not None and self._action.is_alive())
        enabled = {"start": not live and "start" in self.capabilities and not busy,
                   "pause": live and "pause" in self.capabilities and not paused,
                   "resume": live and "pause" in self.capabilities and paused,
                   "stop": live and "stop" in self.capabilities and not busy,
                   "checkpoint": live and "checkpoint" in self.capabilities and not busy}
        for name, button in self.buttons.items():
            self._set_attr(button, "disabled", not enabled[name])
        return busy

    @staticmethod
    def _set_attr(widget: widgets.Widget, name: str, value: Any) -> None:
        if getattr(widget, name) != value:
            setattr(widget, name, value)

    # ------------------------------------------------------------------ notes
    def _say(self, text: str, level: str = "info") -> None:
        with self._lock:
            self._note = (text, level)

    def _note_html(self) -> str:
        text, level = self._note
        if not text:
            return ""
        return (f"<div class='srl-note srl-note-{level}' style='color:{NOTE_COLOURS[level]}'>"
                f"{html.escape(text)}</div>")

    # ------------------------------------------------------------------ controls
    def _on_actors(self, change: dict[str, Any]) -> None:
        """Slider moved: scale on a scaler thread; moves made while it works are coalesced."""
        wanted = int(change["new"])
        if "scale" not in self.capabilities:  # disabled in the browser; refuse a value set from code too
            reason = getattr(self.source, "not_here", "nothing runs")
            self._say(f"cannot scale to {wanted}: {reason}", "error")
            return
        if not self._live():
            self._say(f"{wanted} actor workers when the run is started")
            return
        with self._lock:
            self._wanted_actors = wanted
            idle = self._scaler is None
            if idle:
                self._scaler = threading.Thread(target=self._scale_to_wanted, name="srl-panel-scale",
                                                daemon=True)
        self._say(f"scaling to {wanted} actor workers..." if idle
                  else f"will scale to {wanted} actor workers once the current change is done")
        if idle:
            self._scaler.start()

    def _scale_to_wanted(self) -> None:
        while True:
            with self._lock:
                wanted, self._wanted_actors = self._wanted_actors, None
                if wanted is None:
                    self._scaler = None
                    return
            try:
                self._scale(wanted)
            except Exception as exc:  # noqa: BLE001  (shown on the panel: never silently ignored)
                self._say(f"could not scale to {wanted} actor workers: {exc}", "error")

    def _scale(self, wanted: int) -> None:
        """Scale, then say what happened, including actors left waiting for a slot."""
        run = self.source
        result = run.scale(actors=wanted)
        ring = run.config.actors.ring_size
        for worker in (f"actor-{i}" for i in run.actors):
            self._ring_of.setdefault(worker, ring)
        needed = 1 + len(run.policy_workers) + result["actors"]
        have = slot_count(run.client)
        text = f"{result['actors']} actor workers"
        if result["removed"]:
            text += f" (stopped {', '.join(result['removed'])})"
        if result.get("note"):
            text += f"; {result['note']}"
        if have < needed:
            self._say(f"{text}. Not honoured yet: {needed - have} actor worker(s) wait for a free SRL "
                      f"slot (the cluster offers {have}, the run needs {needed})", "warning")
        else:
            self._say(text)

    def _on_ring(self, change: dict[str, Any]) -> None:
        """Ring size applies to actor workers started from now on; running ones keep theirs (shown)."""
        run = self.source
        size = int(change["new"])
        if "ring" not in self.capabilities:
            self._say(f"cannot set ring size {size}: {getattr(run, 'not_here', 'nothing runs')}", "error")
            return
        actors = dataclasses.replace(run.config.actors, ring_size=size)
        run.config = dataclasses.replace(run.config, actors=actors)
        keep = sorted({self._ring_of.get(f"actor-{i}", size) for i in run.actors} - {size})
        if keep and self._live():
            self._say(f"env ring size {size} applies to actor workers started from now on (raise the actor "
                      f"control to add some); the running ones keep ring size {', '.join(map(str, keep))}",
                      "warning")
        else:
            self._say(f"env ring size {size}")

    def _on_button(self, name: str) -> None:
        actions: dict[str, Callable[[], None]] = {"start": self._start, "pause": self._pause_or_resume(True),
                                                  "resume": self._pause_or_resume(False), "stop": self._stop,
                                                  "checkpoint": self._checkpoint}
        self._say(f"{name}...")
        self._in_background(actions[name])

    def _pause_or_resume(self, pause: bool) -> Callable[[], None]:
        def act() -> None:
            (self.source.pause if pause else self.source.resume)()
            self._say("paused: actors idle, the trainer keeps its state" if pause else "resumed")
        return act

    def _stop(self) -> None:
        result = self.source.stop()
        self._say(f"stopped after {result['seconds']:.0f} s: {result['env_steps']:,} env steps, policy "
                  f"version {result['version']}, return (last 20) {result['mean_return_last_20']:.2f}; "
                  f"curves in {os.path.join(self.source.run_dir, 'curve.png')}")

    def _checkpoint(self) -> None:
        self._say(f"checkpoint written: {self.source.checkpoint()}")

    def _start(self) -> None:
        """Launch a fresh run of this config with the panel's settings, next to the old run, and follow it."""
        from srl_lab.system.controller import launch

        old = self.source
        config = dataclasses.replace(old.config, actors=dataclasses.replace(old.config.actors,
                                                                            workers=self.actors.value))
        client = old.client if old.client.status == "running" else None
        name = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        run = launch(config, client=client, run_dir=os.path.join(os.path.dirname(old.run_dir), name))
        if self._pump is not None:
            self._pump.stop()
        self.source = run
        self._reset_source_state()
        if self.viewer is not None:
            self.viewer.source = run
        self._say(f"started {run.run_id}")
        self._start_pump()

    def _reset_source_state(self) -> None:
        self._series = ThroughputSeries()
        self._throughput_stale = True
        self._trained_at_render: tuple[int, int] | None = None
        self._curves_at = self._throughput_at = 0.0
        self._render_s: dict[str, float] = {}  # the last render's duration per figure
        actors = getattr(self.source, "actors", None)
        if isinstance(actors, dict):
            ring = self.source.config.actors.ring_size
            self._ring_of = {f"actor-{i}": ring for i in actors}

    def _in_background(self, action: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                action()
            except Exception as exc:  # noqa: BLE001  (shown on the panel; threads must not print)
                self._say(f"{getattr(action, '__name__', 'action').strip('_')} failed: {exc}", "error")

        thread = threading.Thread(target=guarded, name="srl-panel-action", daemon=True)
        with self._lock:
            self._action = thread
        thread.start()

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
        parts = (self.header, self.actors, self.ring, self.policy_workers, *self.buttons.values(),
                 self.note, self.table, self.curves, self.throughput, *self.widget.children, self.widget)
        for widget in parts:
            if widget is not None:
                widget.close()


def _headline_html(log: MetricsLog, last: int = 20) -> str:
    """The figures that mean something for this env: team returns, hidden, fort rate; or the return."""
    shown = ", ".join(f"{html.escape(label)} <b>{_number(value)}</b>" for label, _, value in headline(log, last))
    return f"<span class='srl-headline'>last {last} episodes: {shown}</span>"


def _number(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"  # NaN until the first episodes end
