"""The panel's controls: actor and ring sliders, run buttons, and the note line saying what they did.

Slow calls a slider or button starts (scaling, stopping, checkpointing, starting) run on a
short-lived thread whose outcome is written to the note; the panel's pump shows it. Slider moves
made while a scale is under way are coalesced into one more scale.
"""
from __future__ import annotations

import dataclasses
import html
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from srl_lab.config import ExperimentConfig
from srl_lab.system.metrics import format_figure, headline

if TYPE_CHECKING:
    from srl_lab.notebook.panel import Panel

FULL_CONTROL = frozenset({"start", "scale", "ring", "pause", "checkpoint", "stop"})
NOTE_COLOURS = {"info": "#0550ae", "warning": "#9a6700", "error": "#cf222e"}
ICONS = {"start": "play", "pause": "pause", "resume": "play-circle", "stop": "stop", "checkpoint": "save"}


class RunControls:
    """Sliders, buttons and the note of one panel; acts on ``panel.source``."""

    def __init__(self, panel: "Panel", actors: int, max_actors: int | None):
        self.panel = panel
        self.capabilities: frozenset[str] = getattr(panel.source, "capabilities", FULL_CONTROL)
        self._lock = threading.Lock()
        self._note = ("", "info")  # written by any thread, shown by the pump
        self._action: threading.Thread | None = None  # the latest button's action
        self._scaler: threading.Thread | None = None  # applies actor-control moves, one at a time
        self._wanted_actors: int | None = None
        self._ring_of: dict[str, int] = {}  # actor worker -> ring size it was started with
        config = getattr(panel.source, "config", None)
        config = config if isinstance(config, ExperimentConfig) else None  # attached or reopened: none
        ring = config.actors.ring_size if config is not None else 1
        style = {"description_width": "initial"}
        self.actors = widgets.IntSlider(value=max(actors, 1), min=1, max=max_actors or max(8, 2 * actors),
                                        description="actor workers", continuous_update=False, style=style,
                                        disabled="scale" not in self.capabilities)
        self.ring = widgets.IntSlider(value=ring, min=1, max=max(8, 2 * ring), description="env ring size",
                                      continuous_update=False, style=style, disabled="ring" not in self.capabilities)
        self.actors.add_class("srl-actors")
        self.ring.add_class("srl-ring")
        self.sliders: list[widgets.Widget] = [self.actors, self.ring]
        self.policy_workers: widgets.IntSlider | None = None
        if config is not None and config.inference.mode == "remote":
            n = config.inference.policy_workers
            self.policy_workers = widgets.IntSlider(
                value=n, min=n, max=n, disabled=True, description="policy workers", style=style,
                tooltip="fixed for the run's lifetime: actors are bound to their policy worker at start")
            self.policy_workers.add_class("srl-policy-workers")
            self.sliders.append(self.policy_workers)
        width = widgets.Layout(width="115px")
        self.buttons = {name: widgets.Button(description=name, icon=icon, layout=width) for name, icon in ICONS.items()}
        for name, button in self.buttons.items():
            button.add_class(f"srl-{name}")
            button.on_click(lambda _, name=name: self._on_button(name))
        self.note = widgets.HTML()
        self.actors.observe(self._on_actors, names="value")
        self.ring.observe(self._on_ring, names="value")
        self.remember_rings()
        if self.capabilities != FULL_CONTROL:
            self.say(getattr(panel.source, "not_here", "reopened from disk: nothing runs to control"))

    @property
    def widgets(self) -> list[widgets.Widget]:
        return [widgets.HBox(self.sliders), widgets.HBox(list(self.buttons.values())), self.note]

    def remember_rings(self) -> None:
        """Note the ring size of actors started so far (running actors keep theirs)."""
        actors = getattr(self.panel.source, "actors", None)
        if isinstance(actors, dict):
            for i in actors:
                self._ring_of.setdefault(f"actor-{i}", self.panel.source.ring_size)

    # ------------------------------------------------------------------ notes
    def say(self, text: str, level: str = "info") -> None:
        with self._lock:
            self._note = (text, level)

    def said(self) -> tuple[str, str]:
        """The latest note and its level ("info", "warning" or "error")."""
        return self._note

    def note_html(self) -> str:
        text, level = self._note
        if not text:
            return ""
        return (f"<div class='srl-note srl-note-{level}' style='color:{NOTE_COLOURS[level]}'>"
                f"{html.escape(text)}</div>")

    def update(self, live: bool, paused: bool) -> bool:
        """Enable what makes sense now; True while an action (scale, stop, ...) is still running."""
        busy = self._scaler is not None or (self._action is not None and self._action.is_alive())
        can = self.capabilities
        enabled = {"start": not live and "start" in can and not busy,
                   "pause": live and "pause" in can and not paused,
                   "resume": live and "pause" in can and paused,
                   "stop": live and "stop" in can and not busy,
                   "checkpoint": live and "checkpoint" in can and not busy}
        for name, button in self.buttons.items():
            if button.disabled != (not enabled[name]):
                button.disabled = not enabled[name]
        return busy

    # ------------------------------------------------------------------ sliders
    def _on_actors(self, change: dict[str, Any]) -> None:
        """Slider moved: scale on a scaler thread; moves made while it works are coalesced."""
        wanted = int(change["new"])
        if "scale" not in self.capabilities:  # disabled in the browser; refuse a value set from code too
            self.say(f"cannot scale to {wanted}: {getattr(self.panel.source, 'not_here', 'nothing runs')}", "error")
            return
        if not self.panel.live():
            self.say(f"{wanted} actor workers when the run is started")
            return
        with self._lock:
            self._wanted_actors = wanted
            idle = self._scaler is None
            if idle:
                self._scaler = threading.Thread(target=self._scale_to_wanted, name="srl-panel-scale", daemon=True)
        self.say(f"scaling to {wanted} actor workers..." if idle
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
                self.say(f"could not scale to {wanted} actor workers: {exc}", "error")

    def _scale(self, wanted: int) -> None:
        """Scale, then say what happened, including actors left waiting for a slot."""
        result = self.panel.source.scale(actors=wanted)
        self.remember_rings()
        text = f"{result['actors']} actor workers"
        if result["removed"]:
            text += f" (stopped {', '.join(result['removed'])})"
        if result.get("note"):
            text += f"; {result['note']}"
        needed, have = result["slots"]["needed"], result["slots"]["offered"]
        if have < needed:
            self.say(f"{text}. Not honoured yet: {needed - have} actor worker(s) wait for a free SRL "
                     f"slot (the cluster offers {have}, the run needs {needed})", "warning")
        else:
            self.say(text)

    def _on_ring(self, change: dict[str, Any]) -> None:
        """Ring size applies to actor workers started from now on; running ones keep theirs (shown)."""
        run, size = self.panel.source, int(change["new"])
        if "ring" not in self.capabilities:
            self.say(f"cannot set ring size {size}: {getattr(run, 'not_here', 'nothing runs')}", "error")
            return
        run.set_ring_size(size)
        keep = sorted({self._ring_of.get(f"actor-{i}", size) for i in run.actors} - {size})
        if keep and self.panel.live():
            self.say(f"env ring size {size} applies to actor workers started from now on (raise the actor "
                     f"control to add some); the running ones keep ring size {', '.join(map(str, keep))}",
                     "warning")
        else:
            self.say(f"env ring size {size}")

    # ------------------------------------------------------------------ buttons
    def _on_button(self, name: str) -> None:
        actions: dict[str, Callable[[], None]] = {"start": self._start, "pause": self._pause_or_resume(True),
                                                  "resume": self._pause_or_resume(False), "stop": self._stop,
                                                  "checkpoint": self._checkpoint}
        self.say(f"{name}...")
        self._in_background(name, actions[name])

    def _pause_or_resume(self, pause: bool) -> Callable[[], None]:
        def act() -> None:
            (self.panel.source.pause if pause else self.panel.source.resume)()
            self.say("paused: actors idle, the trainer keeps its state" if pause else "resumed")
        return act

    def _stop(self) -> None:
        run = self.panel.source
        result = run.stop()
        recent = ", ".join(f"{label} {format_figure(value)}" for label, _, value in headline(run.metrics))
        self.say(f"stopped after {result['seconds']:.0f} s: {result['env_steps']:,} env steps, policy "
                 f"version {result['version']}; last 20 episodes: {recent}; "
                 f"curves in {os.path.join(run.run_dir, 'curve.png')}")

    def _checkpoint(self) -> None:
        self.say(f"checkpoint written: {self.panel.source.checkpoint()}")

    def _start(self) -> None:
        """Launch a fresh run of this config with the panel's settings, next to the old run, and follow it."""
        from srl_lab.system.controller import launch

        old = self.panel.source
        actors = dataclasses.replace(old.config.actors, workers=self.actors.value, ring_size=self.ring.value)
        config = dataclasses.replace(old.config, actors=actors)
        client = old.client if old.client.status == "running" else None
        name = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        run = launch(config, client=client, run_dir=os.path.join(os.path.dirname(old.run_dir), name))
        self._ring_of = {}
        self.panel.follow(run)
        self.remember_rings()
        self.say(f"started {run.run_id}")

    def _in_background(self, name: str, action: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                action()
            except Exception as exc:  # noqa: BLE001  (shown on the panel; threads must not print)
                self.say(f"{name} failed: {exc}", "error")

        thread = threading.Thread(target=guarded, name="srl-panel-action", daemon=True)
        with self._lock:
            self._action = thread
        thread.start()

    def close(self) -> None:
        for widget in (*self.sliders, *self.buttons.values(), self.note):
            widget.close()
