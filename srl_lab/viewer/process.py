"""The viewing process: one lowest-priority interpreter of its own that plays episodes for the viewer.

Episodes are played here rather than on an actor or the trainer, and at a lower priority (``nice``
15 by default: about a thirtieth of a core's share against each busy worker), so the run's workers
keep their cores and the viewer mostly works in the time they leave idle
(``benchmarks/viewer_overhead.py`` measures what it costs a run; at ``nice=19`` an episode can wait
minutes on a saturated machine). It is a plain ``python -m srl_lab.viewer.serve`` child rather than a
multiprocessing one, because spawn would re-run a calling script that has no ``__main__`` guard (and
cannot start at all from code typed at a prompt). Requests and replies cross its stdin and stdout
as length-prefixed cloudpickle messages, so envs and networks defined in a notebook travel too.
"""
from __future__ import annotations

import itertools
import os
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from typing import IO, Any

import cloudpickle

from srl_lab.viewer.episode import Episode, WeightsSource

HEADER = struct.Struct("!Q")


def send(stream: IO[bytes], message: Any) -> None:
    blob = cloudpickle.dumps(message)
    stream.write(HEADER.pack(len(blob)) + blob)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next message, or None when the other side has closed the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return cloudpickle.loads(stream.read(size))


class EpisodeProcess:
    """``play(...)`` returns a Future of an ``Episode``; episodes are played one at a time, in order.

    The process starts on the first request and again after it died (its pending futures then fail
    with the reason).
    """

    def __init__(self, nice: int = 15) -> None:
        self.nice = nice
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None
        self._pending: dict[int, Future] = {}
        self._ids = itertools.count()

    def play(self, config: Any, source: WeightsSource, seed: int = 0, pixels: int = 400,
             max_steps: int = 1000, fps: float = 10.0) -> "Future[Episode]":
        """Play one episode of ``config``'s env (None: the checkpoint's config) with ``source``'s weights."""
        future: Future = Future()
        with self._lock:
            child = self._running_child()
            request_id = next(self._ids)
            self._pending[request_id] = future
            try:
                send(child.stdin, (request_id, config, source, seed, pixels, max_steps, fps))
            except (BrokenPipeError, OSError) as exc:
                self._pending.pop(request_id)
                future.set_exception(RuntimeError(f"the viewing process is gone: {exc!r}"))
        return future

    def _running_child(self) -> subprocess.Popen:
        if self._child is None or self._child.poll() is not None:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            self._child = subprocess.Popen([sys.executable, "-m", "srl_lab.viewer.serve", str(self.nice)], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, env=env)
            threading.Thread(target=self._read_replies, args=(self._child,), name="srl-viewer-replies",
                             daemon=True).start()
        return self._child

    def _read_replies(self, child: subprocess.Popen) -> None:
        while (reply := receive(child.stdout)) is not None:
            request_id, ok, value = reply
            with self._lock:
                future = self._pending.pop(request_id, None)
            if future is not None:
                future.set_result(value) if ok else future.set_exception(RuntimeError(value))
        child.wait()
        with self._lock:
            lost, self._pending = self._pending, {}
        for future in lost.values():
            future.set_exception(RuntimeError(f"the viewing process exited with code {child.returncode}"))

    def close(self) -> None:
        with self._lock:
            child, self._child = self._child, None
        if child is None:
            return
        try:
            child.stdin.close()  # the process ends when its input does
            child.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
