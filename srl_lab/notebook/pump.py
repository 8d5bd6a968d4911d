"""The UI pump: the one thread that writes to a panel's widgets, at a fixed rate, and its timing.

Widgets are only ever written from here (plus the kernel's own thread in widget callbacks), so the
panel keeps updating while another cell blocks, and nothing prints or displays from a thread. Figures
are rendered on a separate renderer thread and handed over as PNG bytes: a render takes 0.2-0.5 s on
a busy two-core machine, which would otherwise stretch the pump's ticks well below 2 Hz.
"""
from __future__ import annotations

import itertools
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable


class Timing:
    """Timestamps of pump ticks and image updates, to report the refresh rate actually achieved."""

    def __init__(self, keep: int = 2000):
        self.ticks: deque[float] = deque(maxlen=keep)
        self.images: dict[str, deque[float]] = {}
        self.render_s: deque[float] = deque(maxlen=keep)

    def tick(self) -> None:
        self.ticks.append(time.monotonic())

    def image(self, name: str, render_s: float) -> None:
        """An image widget was set with a figure that took ``render_s`` to render."""
        self.images.setdefault(name, deque(maxlen=self.ticks.maxlen)).append(time.monotonic())
        self.render_s.append(render_s)

    def summary(self) -> dict[str, dict[str, float]]:
        """Median / 90th percentile / max interval in seconds for ticks and each image, plus render cost."""
        out = {"ticks": _intervals(self.ticks)}
        out.update({f"image:{name}": _intervals(times) for name, times in self.images.items()})
        out["render_s"] = _describe(list(self.render_s))
        return out


def _intervals(times: deque[float]) -> dict[str, float]:
    stamps = list(times)
    return _describe([b - a for a, b in itertools.pairwise(stamps)])


def _describe(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "median": round(statistics.median(ordered), 4),
            "p90": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 4), "max": round(ordered[-1], 4)}


class UiPump:
    """Calls ``tick()`` every ``period_s`` on one daemon thread until it returns False or ``stop()``."""

    def __init__(self, tick: Callable[[], bool], period_s: float, timing: Timing, name: str = "srl-ui-pump"):
        self._tick = tick
        self._period = period_s
        self._timing = timing
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> UiPump:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            self._timing.tick()
            if not self._tick():
                return
            due += self._period
            now = time.monotonic()
            due = max(due, now)
            self._stop.wait(due - now)


class Renderer:
    """Renders figures off the pump: the newest request per figure wins, the pump collects the PNGs."""

    def __init__(self, name: str = "srl-ui-render"):
        self._wanted: dict[str, Callable[[], bytes]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self.error: str | None = None  # the last failed render, for the panel to show
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def request(self, figure: str, render: Callable[[], bytes]) -> None:
        """Queue ``render`` for ``figure``, replacing a request for it that has not started yet."""
        with self._cond:
            self._wanted[figure] = render
            self._cond.notify()

    def busy(self, figure: str) -> bool:
        with self._cond:
            return figure in self._wanted

    def take(self) -> dict[str, tuple[bytes, float]]:
        """Finished figures since the last call: name -> (PNG bytes, seconds the render took)."""
        with self._cond:
            done, self._done = self._done, {}
        return done

    def close(self, timeout: float = 5.0) -> None:
        """Stop after the render in progress (a thread killed inside a C++ render aborts the process)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                figure = next(iter(self._wanted))
                render = self._wanted[figure]
            start = time.perf_counter()
            try:
                png = render()
            except Exception as exc:  # noqa: BLE001  (the old image stays; the panel shows why)
                png, self.error = b"", f"rendering {figure} failed: {exc!r}"
            with self._cond:
                if self._wanted.get(figure) is render:
                    del self._wanted[figure]
                if png:
                    self._done[figure] = (png, time.perf_counter() - start)
