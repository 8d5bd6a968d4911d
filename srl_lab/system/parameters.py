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
from srl_lab.system.streams import Endpoint, EndpointSource, PeerSocket, Receiver, Refusals, Refused, ReportsPeer, bind

RESEND_S = 2.0  # a request unanswered this long is sent again (after following a moved endpoint)


def read_params_request(kind: str, meta: dict[str, Any]) -> tuple[int, int | None, str | None]:
    """``(have_version, have_origin, tag)`` of a ``get_params``/``tag_params`` meta; raises ``Refused``."""
    have, origin, tag = meta.get("have", -1), meta.get("origin"), meta.get("tag")
    if (not isinstance(have, int) or not (origin is None or isinstance(origin, int))
            or not (tag is None or isinstance(tag, str))):
        raise Refused("parameter request: have must be an integer, origin an integer or nil, "
                      "tag a string or nil")
    if kind == "tag_params" and not tag:
        raise Refused("parameter request: tag_params without a tag")
    return have, origin, tag


def read_params_reply(kind: str, meta: dict[str, Any], arrays: dict[str, Any]
                      ) -> tuple[int, int | None, dict[str, Any] | None]:
    """``(version, origin, weights or None if current)`` of a reply; raises ``Refused``."""
    version, origin = meta.get("version"), meta.get("origin")
    if not isinstance(version, int) or not (origin is None or isinstance(origin, int)):
        raise Refused("parameter reply: version must be an integer, origin an integer or nil")
    if kind == "params_current":
        return version, origin, None
    if not arrays or any(isinstance(v, dict) for v in arrays.values()):
        raise Refused("parameter reply: weights must be a flat, non-empty map of arrays")
    return version, origin, arrays


class ParameterService:
    """Serves the latest (and tagged) weights from a thread beside the trainer.

    ``requests_served`` counts the replies sent; ``receiver.refusals`` the requests refused.
    """

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
    def refusals(self) -> Refusals:
        return self.receiver.refusals

    def publish(self, version: int, weights: dict[str, np.ndarray]) -> None:
        frames = codec.encode("params", {"version": version, "origin": self.origin}, weights, key=self.key)
        with self._lock:
            self._latest = (version, frames)

    def tag(self, tag: str) -> None:
        with self._lock:
            if self._latest is not None:
                self._tagged[tag] = self._latest

    def put(self, tag: str, version: int, arrays: dict[str, np.ndarray]) -> None:
        """Serve ``arrays`` under ``tag`` (e.g. a past version's weights, or the list of them)."""
        frames = codec.encode("params", {"version": version, "origin": self.origin}, arrays, key=self.key)
        with self._lock:
            self._tagged[tag] = (version, frames)

    def untag(self, tag: str) -> None:
        with self._lock:
            self._tagged.pop(tag, None)

    def _serve(self) -> None:
        while self._running:
            msg = self.receiver.recv(timeout_ms=100)
            if msg is None:
                continue
            identity, kind, meta, _ = msg
            try:
                have, origin, tag = read_params_request(kind, meta)
            except Refused as refused:
                self.receiver.refuse(str(refused))
                continue
            if kind == "tag_params":
                self.tag(tag)
                continue
            with self._lock:
                entry = self._tagged.get(tag) if tag else self._latest
            if entry is None or (entry[0] == have and origin == self.origin):
                reply = codec.encode("params_current", {"version": have, "origin": origin}, key=self.key)
            else:
                reply = entry[1]
            self.requests_served += 1  # counted first: whoever sees the reply sees the count
            self.sock.send_multipart([identity, *reply], copy=False)

    def close(self) -> None:
        self._running = False
        self._thread.join(timeout=2)
        self.sock.close(linger=0)


class ParameterClient(ReportsPeer):
    """Non-blocking weight refresh: at most one request in flight, sent every ``poll_s`` seconds.

    ``source`` is an ``Endpoint``, a ``FixedEndpoint`` or an ``EndpointWatch``: a request unanswered
    for ``RESEND_S`` (a lost reply, or a trainer that died) is sent again, to the trainer's replacement
    if it has published a new endpoint meanwhile. Refused replies are counted in ``refusals``.
    """

    def __init__(self, ctx: zmq.Context, source: Endpoint | EndpointSource, key: bytes, poll_s: float = 0.05,
                 tag: str | None = None):
        self.peer = PeerSocket(ctx, zmq.DEALER, source, key, kinds=frozenset({"params", "params_current"}))
        self.key = key
        self.poll_s = poll_s
        self.tag = tag
        self.version = -1
        self.origin: int | None = None
        self._sent_at: float | None = None  # when the request in flight left; None: none in flight
        self._next_request = 0.0

    def poll(self, block_s: float = 0.0) -> dict[str, np.ndarray] | None:
        """New weights if a newer version arrived, else None. ``block_s`` waits for a first reply."""
        now = time.monotonic()
        if self._sent_at is not None and now - self._sent_at >= RESEND_S:
            self.peer.follow(force=True)
            self._sent_at = None
        if self._sent_at is None and now >= self._next_request:
            meta = {"have": self.version, "origin": self.origin, **({"tag": self.tag} if self.tag else {})}
            self.peer.sock.send_multipart(codec.encode("get_params", meta, key=self.key))
            self._sent_at = now
            self._next_request = now + self.poll_s
        msg = self.peer.receiver.recv(timeout_ms=int(block_s * 1000))
        if msg is None:
            return None
        self._sent_at = None
        _, kind, meta, arrays = msg
        try:
            version, origin, weights = read_params_reply(kind, meta, arrays)
        except Refused as refused:
            self.peer.receiver.refuse(str(refused))
            return None
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
        self.peer.close()
