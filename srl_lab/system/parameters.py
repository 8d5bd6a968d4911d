"""The parameter service: latest weights + version, served over the data plane.

It runs as a thread beside the trainer and answers ``get_params`` requests on a ROUTER socket: a
reader that already holds the latest version gets a tiny "current" reply, others get the weights as
raw array frames (encoded once per version, not once per reader). Versions can be tagged and kept,
e.g. to play against a past policy. ``ParameterClient`` polls without ever blocking its worker.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import zmq

from srl_lab.system import codec
from srl_lab.system.streams import Endpoint, Receiver, bind, connect


class ParameterService:
    def __init__(self, ctx: zmq.Context, name: str):
        self.sock, self.endpoint = bind(ctx, zmq.ROUTER, f"params-{name}")
        self.receiver = Receiver(self.sock, frozenset({"get_params", "tag_params"}), routed=True)
        self._lock = threading.Lock()
        self._latest: tuple[int, list] | None = None
        self._tagged: dict[str, tuple[int, list]] = {}
        self._running = True
        self.requests_served = 0
        self._thread = threading.Thread(target=self._serve, name="srl-parameter-service", daemon=True)
        self._thread.start()

    @property
    def rejected(self) -> int:
        return self.receiver.rejected

    def publish(self, version: int, weights: dict[str, np.ndarray]) -> None:
        frames = codec.encode("params", {"version": version}, weights)
        with self._lock:
            self._latest = (version, frames)

    def tag(self, tag: str) -> None:
        with self._lock:
            if self._latest is not None:
                self._tagged[tag] = self._latest

    def _serve(self) -> None:
        while self._running:
            msg = self.receiver.recv(timeout_ms=100)
            if msg is None:
                continue
            identity, kind, meta, _ = msg
            have, tag = meta.get("have", -1), meta.get("tag")
            if not isinstance(have, int) or not (tag is None or isinstance(tag, str)):
                self.receiver.rejected += 1
                continue
            with self._lock:
                if kind == "tag_params":
                    if tag and self._latest is not None:
                        self._tagged[tag] = self._latest
                    continue
                entry = self._tagged.get(tag) if tag else self._latest
            if entry is None or entry[0] == have:
                reply = codec.encode("params_current", {"version": have})
            else:
                reply = entry[1]
            self.sock.send_multipart([identity, *reply], copy=False)
            self.requests_served += 1

    def close(self) -> None:
        self._running = False
        self._thread.join(timeout=2)
        self.sock.close(linger=0)


class ParameterClient:
    """Non-blocking weight refresh: at most one request in flight, sent every ``poll_s`` seconds."""

    def __init__(self, ctx: zmq.Context, endpoint: Endpoint, poll_s: float = 0.05, tag: str | None = None):
        self.sock = connect(ctx, zmq.DEALER, endpoint)
        self.receiver = Receiver(self.sock, frozenset({"params", "params_current"}))
        self.poll_s = poll_s
        self.tag = tag
        self.version = -1
        self._in_flight = False
        self._next_request = 0.0

    def poll(self, block_s: float = 0.0) -> dict[str, np.ndarray] | None:
        """New weights if a newer version arrived, else None. ``block_s`` waits for a first reply."""
        now = time.monotonic()
        if not self._in_flight and now >= self._next_request:
            meta = {"have": self.version, **({"tag": self.tag} if self.tag else {})}
            self.sock.send_multipart(codec.encode("get_params", meta))
            self._in_flight = True
            self._next_request = now + self.poll_s
        msg = self.receiver.recv(timeout_ms=int(block_s * 1000))
        if msg is None:
            return None
        self._in_flight = False
        _, kind, meta, arrays = msg
        version = meta.get("version")
        if kind == "params_current" or not isinstance(version, int) or version <= self.version:
            return None
        self.version = version
        return arrays

    def wait_first(self, timeout_s: float = 120.0) -> dict[str, np.ndarray]:
        """Block until some published weights arrive (a worker must not act with random weights)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._next_request = 0.0
            weights = self.poll(block_s=0.2)
            if weights is not None:
                return weights
        raise TimeoutError("no weights from the parameter service")

    def close(self) -> None:
        self.sock.close(linger=0)
