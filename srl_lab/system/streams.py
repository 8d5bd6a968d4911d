"""ZeroMQ sockets for the data plane: binding, address choice and counted, validated receive.

A worker that serves a stream binds a tcp port on its host (and, on the same host, an ipc path)
and publishes an ``Endpoint`` through Dask; peers connect to the cheapest address they can reach
through a ``PeerSocket``, which follows the peer to its replacement. Every receive goes through
``Receiver.recv``, which authenticates and decodes with the codec, so garbage on a port never stops
a worker and a process without the run secret is ignored before a byte it sent is parsed.

Every message a worker refuses is counted with its reason in ``Refusals``: by the receiver when
the codec refuses it, by the message's parser (``Refused``) when its content is unusable. Each
worker reports ``Refusals.report()`` in its metrics and its final result.
"""
from __future__ import annotations

import os
import socket
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import zmq

from srl_lab.system import codec


def host_ip() -> str:
    """The address peers should use for this process: the Dask worker's host when inside one."""
    try:
        from distributed import get_worker

        address = get_worker().address  # e.g. tcp://10.0.0.5:40123
        return address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    except ValueError:  # not inside a Dask worker
        return "127.0.0.1"


@dataclass(frozen=True)
class Endpoint:
    """Where a bound socket can be reached: a tcp address and, from the same host, an ipc path."""

    tcp: str
    ipc: str | None
    hostname: str

    def choose(self) -> str:
        """The ipc path from the same host (cheapest), else tcp."""
        if self.ipc and self.hostname == socket.gethostname():
            return self.ipc
        return self.tcp

    def to_dict(self) -> dict[str, Any]:
        return {"tcp": self.tcp, "ipc": self.ipc, "hostname": self.hostname}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Endpoint":
        return cls(tcp=d["tcp"], ipc=d.get("ipc"), hostname=d["hostname"])


def bind(ctx: zmq.Context, sock_type: int, name: str, rcvhwm: int = 1000) -> tuple[zmq.Socket, Endpoint]:
    """Create a socket of ``sock_type`` bound to a random tcp port and an ipc path."""
    sock = ctx.socket(sock_type)
    sock.setsockopt(zmq.RCVHWM, rcvhwm)
    sock.setsockopt(zmq.LINGER, 0)
    ip = host_ip()
    port = sock.bind_to_random_port(f"tcp://{'*' if ip != '127.0.0.1' else '127.0.0.1'}")
    ipc = None
    if hasattr(zmq, "IPC_PATH_MAX_LEN") and zmq.has("ipc"):
        path = os.path.join(tempfile.gettempdir(), f"srl-{name}-{uuid.uuid4().hex[:10]}")
        ipc = f"ipc://{path}"
        sock.bind(ipc)
    return sock, Endpoint(tcp=f"tcp://{ip}:{port}", ipc=ipc, hostname=socket.gethostname())


class EndpointSource(Protocol):
    """Where a peer is now: ``changed()`` says whether ``endpoint`` moved since it was last read."""

    endpoint: Endpoint

    def changed(self, force: bool = False) -> bool: ...


class FixedEndpoint:
    """An endpoint that never moves (in-process use); ``EndpointWatch`` is the one that follows peers."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint

    def changed(self, force: bool = False) -> bool:
        return False


def connect(ctx: zmq.Context, sock_type: int, endpoint: Endpoint, sndhwm: int = 1000,
            linger_ms: int = 0, options: Mapping[int, int] | None = None) -> zmq.Socket:
    """A socket of ``sock_type`` with ``options`` set, connected to ``endpoint``'s cheapest address."""
    sock = ctx.socket(sock_type)
    sock.setsockopt(zmq.SNDHWM, sndhwm)
    sock.setsockopt(zmq.LINGER, linger_ms)
    for option, value in (options or {}).items():
        sock.setsockopt(option, value)
    sock.connect(endpoint.choose())
    return sock


class Refused(ValueError):
    """A message that decoded but whose content is unusable; ``str()`` is the reason it is counted under."""


UNAUTHENTICATED = codec.AuthenticationError.reason
OTHER_REASONS = "other reasons"
MAX_REASONS = 32  # distinct reasons kept apart; a peer sending ever new ones cannot grow memory


class Refusals:
    """The messages one worker's receivers refused: in total, without the run's MAC, and by reason.

    ``rejected`` counts every refused message and always equals the sum over ``refused``;
    ``unauthenticated`` the part whose MAC did not match (sent by a process without the secret);
    ``malformed`` the part that carried the MAC but not a usable message (a buggy peer).
    """

    def __init__(self) -> None:
        self.rejected = 0
        self.unauthenticated = 0
        self.malformed = 0
        self.refused: Counter[str] = Counter()

    def add(self, reason: str, malformed: bool = True) -> None:
        """Count one refused message; ``malformed=False`` for a valid message that came too late."""
        self.rejected += 1
        if reason == UNAUTHENTICATED:
            self.unauthenticated += 1
        elif malformed:
            self.malformed += 1
        if reason not in self.refused and len(self.refused) >= MAX_REASONS - 1:
            reason = OTHER_REASONS
        self.refused[reason] += 1

    def report(self) -> dict[str, Any]:
        """The counts as they go into a worker's metrics and final result."""
        return {"rejected": self.rejected, "unauthenticated": self.unauthenticated,
                "malformed": self.malformed, "refused": dict(self.refused)}


def refusal_report(*parts: Refusals) -> dict[str, Any]:
    """One report over several receivers' refusals (a worker that reads more than one socket)."""
    total = Refusals()
    for part in parts:
        total.rejected += part.rejected
        total.unauthenticated += part.unauthenticated
        total.malformed += part.malformed
        total.refused.update(dict(part.refused))
    return total.report()


class Receiver:
    """Receives, authenticates and decodes messages from one socket, counting what it refused.

    The codec's refusals are counted here; a parser that finds a decoded message unusable calls
    ``refuse``. ``refusals`` may be shared, so that counts survive a socket replaced on reconnect.
    """

    def __init__(self, sock: zmq.Socket, kinds: frozenset[str], key: bytes, routed: bool = False,
                 refusals: Refusals | None = None):
        self.sock = sock
        self.kinds = kinds
        self.key = key
        self.routed = routed  # ROUTER sockets prefix every message with the peer identity
        self.refusals = refusals if refusals is not None else Refusals()

    def refuse(self, reason: str, malformed: bool = True) -> None:
        """Count a decoded message whose content the caller refused (see ``Refusals.add``)."""
        self.refusals.add(reason, malformed)

    def recv(self, timeout_ms: int = 0) -> tuple[bytes | None, str, dict, dict] | None:
        """One decoded ``(identity, kind, meta, arrays)`` or None if nothing valid arrived in time."""
        if timeout_ms and not self.sock.poll(timeout_ms):
            return None
        try:
            frames = self.sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None
        identity = None
        if self.routed:
            identity, frames = frames[0].bytes, frames[1:]
        try:
            kind, meta, arrays = codec.decode([f.buffer for f in frames], self.kinds, key=self.key)
        except codec.CodecError as error:
            self.refuse(error.reason)
            return None
        return identity, kind, meta, arrays


class ReportsPeer:
    """A client's counters are those of the peer it talks through (``counted_peer``, by default ``peer``):
    ``refusals`` (replies it refused) and ``reconnects`` (to a replaced peer)."""

    def counted_peer(self) -> Any:
        return self.peer

    @property
    def refusals(self) -> Refusals:
        return self.counted_peer().refusals

    @property
    def reconnects(self) -> int:
        return self.counted_peer().reconnects


class PeerSocket:
    """A socket connected to a peer's published endpoint that follows the peer to its replacement.

    ``follow()`` re-reads the endpoint (``source``: an ``EndpointWatch`` or a ``FixedEndpoint``);
    if the peer moved it closes the socket, connects a new one of the same type and options, and
    counts the reconnect. Messages from the peer arrive through ``receiver``, whose refusals are
    kept across reconnects.
    """

    def __init__(self, ctx: zmq.Context, sock_type: int, source: Endpoint | EndpointSource, key: bytes,
                 kinds: frozenset[str] = frozenset(), sndhwm: int = 1000,
                 options: Mapping[int, int] | None = None):
        self.ctx = ctx
        self.sock_type = sock_type
        self.source = FixedEndpoint(source) if isinstance(source, Endpoint) else source
        self.key = key
        self.kinds = kinds
        self.sndhwm = sndhwm
        self.options = dict(options or {})
        self.refusals = Refusals()
        self.reconnects = 0
        self._connect()

    def _connect(self) -> None:
        self.sock = connect(self.ctx, self.sock_type, self.source.endpoint, sndhwm=self.sndhwm,
                            options=self.options)
        self.receiver = Receiver(self.sock, self.kinds, self.key, refusals=self.refusals)

    def follow(self, force: bool = False) -> bool:
        """Reconnect if the peer published a new endpoint; True if it did. ``force``: re-read now."""
        if not self.source.changed(force=force):
            return False
        self.sock.close(linger=0)
        self._connect()
        self.reconnects += 1
        return True

    def close(self, linger_ms: int = 0) -> None:
        self.sock.close(linger=linger_ms)
