"""The episode viewer: watch the current (or a checkpoint's) policy play, frame by frame.

A ``Play`` button and a step scrubber drive one image (each episode plays through once; the loop
button repeats it); each episode is played, rendered and encoded in the viewing process
(``srl_lab.viewer.process``), never on an actor or the trainer, so a live run keeps its pace. A new
episode is played every ``every_versions`` policy versions (the panel's pump reports them) or when
"new episode" is pressed. Each one is saved as ``videos/<version>-<seed>.gif`` in the run directory
and, for a live run, sent to its TensorBoard log.
"""
from __future__ import annotations

import html
import os
import threading
import time
from concurrent.futures import Future
from typing import Any

import ipywidgets as widgets

from srl_lab.system import checkpoints
from srl_lab.system.control import endpoint_name
from srl_lab.system.metrics import SINGLE_HEADLINE, TEAM_HEADLINE, TEAM_KEYS
from srl_lab.viewer.episode import Episode, WeightsSource
from srl_lab.viewer.process import EpisodeProcess

LATEST = "latest"
AUTO_PAUSE_S = 10.0  # an automatic episode starts at least this long after the last one ended


class EpisodeViewer:
    """Plays episodes of ``source`` (a live or stopped ``Run``, or a run reopened with ``open_run``)."""

    def __init__(self, source: Any, every_versions: int = 100, pixels: int = 400, fps: float = 10.0,
                 auto: bool = True, process: EpisodeProcess | None = None):
        if every_versions < 1:
            raise ValueError(f"every_versions must be >= 1, got {every_versions}")
        self.source = source
        self.every_versions = every_versions
        self.pixels = pixels
        self.fps = fps
        self.episode: Episode | None = None  # the one on screen
        self.episodes: list[Episode] = []  # every episode played, oldest first (what they cost: .seconds)
        self.saved: list[str] = []  # videos written, oldest first
        self._process = process or EpisodeProcess()
        self._lock = threading.Lock()
        self._pending: Future | None = None
        self._requested: int | None = None  # the run's version at the last automatic request
        self._ended = 0.0  # monotonic time the last episode ended
        self._seeds = iter(range(1_000_000))
        self._build(auto)

    # ------------------------------------------------------------------ widgets
    def _build(self, auto: bool) -> None:
        # Each episode plays once (the loop button repeats it): every frame shown is a message through
        # the notebook server and a repaint in the browser, which on 2 cores took over 40 % of the
        # run's env steps/s for as long as an episode looped (benchmarks/notebook_overhead.py).
        self.play = widgets.Play(value=0, min=0, max=0, interval=round(1000 / self.fps), repeat=False,
                                 description="play", show_repeat=True)
        self.step = widgets.IntSlider(value=0, min=0, max=0, description="step", continuous_update=True,
                                      layout=widgets.Layout(width="420px"))
        widgets.jslink((self.play, "value"), (self.step, "value"))
        self.frame = widgets.Image(format="png", layout=widgets.Layout(width=f"{self.pixels}px", max_width="100%"))
        self.info = widgets.HTML("<i>no episode yet</i>")
        self.new = widgets.Button(description="new episode", icon="film", layout=widgets.Layout(width="140px"))
        self.weights = widgets.Dropdown(options=self._weight_options(), value=LATEST, description="weights",
                                        layout=widgets.Layout(width="300px"))
        self.auto = widgets.Checkbox(value=auto, description=f"every {self.every_versions} versions", indent=False)
        for widget, name in ((self.play, "play"), (self.step, "step"), (self.frame, "frame"), (self.info, "info"),
                             (self.new, "new"), (self.weights, "weights"), (self.auto, "auto")):
            widget.add_class(f"srl-viewer-{name}")
        self.step.observe(self._on_step, names="value")
        self.new.on_click(lambda _: self.request())
        self.weights.observe(lambda _: self.request(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.new, self.weights, self.auto]),
                                    widgets.HBox([self.play, self.step]), self.frame, self.info])
        self.widget.add_class("srl-viewer")

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def _on_step(self, change: dict[str, Any]) -> None:
        episode = self.episode
        if episode is not None and 0 <= change["new"] < len(episode.pngs):
            self.frame.value = episode.pngs[change["new"]]

    def _weight_options(self) -> list[str]:
        run_dir = getattr(self.source, "run_dir", None)
        found = checkpoints.paths(checkpoints.folder(run_dir)) if run_dir else []
        return [LATEST, *(os.path.basename(p) for p in reversed(found))]

    # ------------------------------------------------------------------ episodes
    @property
    def busy(self) -> bool:
        """An episode is being played."""
        return self._pending is not None

    def request(self) -> bool:
        """Play a new episode with the chosen weights; False when one is already being played."""
        with self._lock:
            if self._pending is not None:
                return False
            try:
                config, source = self._weights_source()
            except LookupError as exc:  # nothing published yet: normal in a run's first seconds
                self._show_text(str(exc))
                return False
            seed = next(self._seeds)
            self._pending = self._process.play(config, source, seed=seed, pixels=self.pixels, fps=self.fps)
        self._show_text(f"playing an episode (seed {seed})...")
        self._pending.add_done_callback(self._on_done)
        return True

    def on_version(self, version: int) -> None:
        """The run's policy version now (the panel's pump calls this): plays one every ``every_versions``."""
        if not self.auto.value or self.busy:
            return
        last = self._requested
        if last is None or (version >= last + self.every_versions
                            and time.monotonic() - self._ended >= AUTO_PAUSE_S):
            if self.request():
                self._requested = version

    def _weights_source(self) -> tuple[Any, WeightsSource]:
        """(config or None, where the weights come from) for the dropdown's choice."""
        choice, run_dir = self.weights.value, getattr(self.source, "run_dir", None)
        config = getattr(self.source, "config", None)
        config = config if hasattr(config, "env") else None  # a reopened run's config is a dict: use the checkpoint's
        if choice != LATEST:
            return config, WeightsSource(checkpoint=os.path.join(checkpoints.folder(run_dir), choice))
        if getattr(self.source, "final_weights", None) is not None:  # a stopped run
            return config, WeightsSource(weights=self.source.final_weights, version=self.source.result["version"])
        client, key = getattr(self.source, "client", None), getattr(self.source, "data_plane_key", None)
        if config is not None and client is not None and key is not None and self.source.result is None:
            endpoint = _published_endpoint(client, self.source.run_id)
            if endpoint is not None:
                return config, WeightsSource(endpoint=endpoint, key=key)
        found = checkpoints.paths(checkpoints.folder(run_dir)) if run_dir else []
        if not found:
            raise LookupError("no weights to play yet: the trainer has published none and written no checkpoint")
        return config, WeightsSource(checkpoint=found[-1])

    def _on_done(self, future: Future) -> None:
        with self._lock:
            self._pending = None
            self._ended = time.monotonic()
        try:
            episode = future.result()
        except Exception as exc:  # noqa: BLE001  (shown in the viewer: the run goes on)
            self._show_text(f"the episode could not be played: {exc}", error=True)
            return
        path = self._save(episode)
        self.episodes.append(episode)
        self.episode = episode
        self.play.playing = False
        self.play.max = self.step.max = len(episode.pngs) - 1
        self.step.value = 0
        self.frame.value = episode.pngs[0]
        self.play.playing = True
        shown = TEAM_HEADLINE if TEAM_KEYS[0] in episode.stats else SINGLE_HEADLINE
        figures = ", ".join(f"{label} {episode.stats[key]:.2f}" for label, _, key in shown if key in episode.stats)
        where = f" &middot; saved <code>videos/{html.escape(os.path.basename(path))}</code>" if path else ""
        self._show_text(f"policy version <b class='srl-viewer-version'>{episode.version}</b> &middot; "
                        f"seed {episode.seed} &middot; {len(episode.pngs)} steps &middot; {html.escape(figures)}"
                        f"{where}", raw=True)
        self.weights.options = self._weight_options()

    def _save(self, episode: Episode) -> str | None:
        run_dir = getattr(self.source, "run_dir", None)
        if not run_dir:
            return None
        folder = os.path.join(run_dir, "videos")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"version-{episode.version:08d}-seed-{episode.seed}.gif")
        with open(path, "wb") as f:
            f.write(episode.gif)
        self.saved.append(path)
        board = getattr(self.source, "tensorboard", None)
        if board is not None:
            board.add_video("episode", episode.gif, step=self.source.metrics.trained_env_steps(),
                            height=episode.size[0], width=episode.size[1])
        return path

    def _show_text(self, text: str, error: bool = False, raw: bool = False) -> None:
        body = text if raw else html.escape(text)
        colour = "#cf222e" if error else "#24292f"
        self.info.value = f"<span class='srl-viewer-{'error' if error else 'text'}' style='color:{colour}'>{body}</span>"

    def close(self) -> None:
        self._process.close()
        for widget in (self.play, self.step, self.frame, self.info, self.new, self.weights, self.auto, self.widget):
            widget.close()


def _published_endpoint(client: Any, run_id: str) -> dict[str, Any] | None:
    """The parameter service's endpoint as the trainer published it, None before it has."""
    from distributed import Variable

    try:
        return Variable(endpoint_name(run_id, "params"), client=client).get(timeout=2)
    except TimeoutError:
        return None
