"""The parameter service: latest weights + version, served over the data plane.

It runs as a thread beside the trainer and answers ``get_params`` requests on a ROUTER socket: a
reader that already holds the latest version gets a tiny "current" reply, others get the weights as
raw array frames (encoded once per version, not once per reader). Versions can be tagged and kept,
e.g. to play against a past policy. ``ParameterClient`` polls without ever blocking its worker.

Weights carry the trainer incarnation they came from (``origin``): a trainer restarted from a
checkpoint publishes versions *lower* than what readers hold, and readers must take them anyway.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import zmq

from srl_lab.system import codec
from srl_lab.system.streams import Endpoint, FixedEndpoint, Receiver, bind, connect

RESEND_S = 2.0  # a request unanswered this long is sent again (after following a moved endpoint)


def parse_params_request(meta: dict[str, Any]) -> tuple[int, int | None, str | None] | None:
    """``(have_version, have_origin, tag)`` of a ``get_params``/``tag_params`` meta, None if malformed."""
    have, origin, tag = meta.get("have", -1), meta.get("origin"), meta.get("tag")
    if (not isinstance(have, int) or not (origin is None or isinstance(origin, int))
            or not (tag is None or isinstance(tag, str))):
        return None
    return have, origin, tag


def parse_params_reply(kind: str, meta: dict[str, Any], arrays: dict[str, Any]
                       ) -> tuple[int, int | None, dict[str, Any] | None] | None:
    """``(version, origin, weights or None if current)`` of a reply, None if malformed."""
    version, origin = meta.get("version"), meta.get("origin")
    if not isinstance(version, int) or not (origin is None or isinstance(origin, int)):
        return None
    if kind == "params_current":
        return version, origin, None
    if not arrays or any(isinstance(v, dict) for v in arrays.values()):
        return None
    return version, origin, arrays


class ParameterService:
    def __init__(self, ctx: zmq.Context, name: str, key: bytes, origin: int = 0):
        self.sock, self.endpoint = bind(ctx, zmq.ROUTER, f"params-{name}")
        self.key = key
        self.origin = origin
        self.receiver = Receiver(self.sock, frozenset({"get_params", "tag_params"}), key, routed=True)
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
        frames = codec.encode("params", {"version": version, "origin": self.origin}, weights, key=self.key)
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
            request = parse_params_request(meta)
            if request is None:
                self.receiver.rejected += 1
                continue
            have, origin, tag = request
            with self._lock:
                if kind == "tag_params":
                    if tag and self._latest is not None:
                        self._tagged[tag] = self._latest
                    continue
                entry = self._tagged.get(tag) if tag else self._latest
            if entry is None or (entry[0] == have and origin == self.origin):
                reply = codec.encode("params_current", {"version": have, "origin": origin}, key=self.key)
            else:
                reply = entry[1]
            self.sock.send_multipart([identity, *reply], copy=False)
            self.requests_served += 1

    def close(self) -> None:
        self._running = False
        self._thread.join(timeout=2)
        self.sock.close(linger=0)


class ParameterClient:
    """Non-blocking weight refresh: at most one request in flight, sent every ``poll_s`` seconds.

    ``source`` is a ``FixedEndpoint`` or an ``EndpointWatch``: a request unanswered for
    ``RESEND_S`` (a lost reply, or a trainer that died) is sent again, to the trainer's replacement
    if it has published a new endpoint meanwhile.
    """

    def __init__(self, ctx: zmq.Context, source: Endpoint | Any, key: bytes, poll_s: float = 0.05,
                 tag: str | None = None):
        self.ctx = ctx
        self.source = FixedEndpoint(source) if isinstance(source, Endpoint) else source
        self.key = key
        self.poll_s = poll_s
        self.tag = tag
        self.version = -1
        self.origin: int | None = None
        self.reconnects = 0
        self._rejected_before = 0  # by sockets replaced on reconnect
        self._connect()
        self._sent_at: float | None = None  # when the request in flight left; None: none in flight
        self._next_request = 0.0

    def _connect(self) -> None:
        self.sock = connect(self.ctx, zmq.DEALER, self.source.endpoint)
        self.receiver = Receiver(self.sock, frozenset({"params", "params_current"}), self.key)

    @property
    def rejected(self) -> int:
        return self._rejected_before + self.receiver.rejected

    def _follow(self) -> None:
        if self.source.changed(force=True):
            self._rejected_before += self.receiver.rejected
            self.sock.close(linger=0)
            self._connect()
            self.reconnects += 1

    def poll(self, block_s: float = 0.0) -> dict[str, np.ndarray] | None:
        """New weights if a newer version arrived, else None. ``block_s`` waits for a first reply."""
        now = time.monotonic()
        if self._sent_at is not None and now - self._sent_at >= RESEND_S:
            self._follow()
            self._sent_at = None
        if self._sent_at is None and now >= self._next_request:
            meta = {"have": self.version, "origin": self.origin, **({"tag": self.tag} if self.tag else {})}
            self.sock.send_multipart(codec.encode("get_params", meta, key=self.key))
            self._sent_at = now
            self._next_request = now + self.poll_s
        msg = self.receiver.recv(timeout_ms=int(block_s * 1000))
        if msg is None:
            return None
        self._sent_at = None
        _, kind, meta, arrays = msg
        reply = parse_params_reply(kind, meta, arrays)
        if reply is None:
            self.receiver.rejected += 1
            return None
        version, origin, weights = reply
        if weights is None or (origin == self.origin and version <= self.version):
            return None
        self.version, self.origin = version, origin
        return weights

    def wait_first(self, should_stop: Callable[[], bool] = lambda: False, timeout_s: float | None = None
                   ) -> dict[str, np.ndarray] | None:
        """Block until some published weights arrive (a worker must not act with random weights).

        Waits for as long as the trainer takes (it may be restarting) unless ``timeout_s`` is given;
        None if ``should_stop`` says so first.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not should_stop():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("no weights from the parameter service")
            self._next_request = 0.0
            weights = self.poll(block_s=0.2)
            if weights is not None:
                return weights
        return None

    def close(self) -> None:
        self.sock.close(linger=0)
