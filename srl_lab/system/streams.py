"""ZeroMQ sockets for the data plane: binding, address choice and counted, validated receive.

A worker that serves a stream binds a tcp port on its host (and, on the same host, an ipc path)
and publishes an ``Endpoint`` through Dask; peers connect to the cheapest address they can reach.
Every receive goes through ``Receiver.recv``, which authenticates and decodes with the codec and
counts rejects, so garbage on a port never stops a worker and a process without the run secret is
ignored before a byte it sent is parsed.
"""
from __future__ import annotations

import os
import socket
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

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


class FixedEndpoint:
    """An endpoint that never moves (in-process use); ``EndpointWatch`` is the one that follows peers."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint

    def changed(self, force: bool = False) -> bool:
        return False


def connect(ctx: zmq.Context, sock_type: int, endpoint: Endpoint, sndhwm: int = 1000,
            linger_ms: int = 0) -> zmq.Socket:
    sock = ctx.socket(sock_type)
    sock.setsockopt(zmq.SNDHWM, sndhwm)
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.connect(endpoint.choose())
    return sock


class Receiver:
    """Receives, authenticates and decodes messages from one socket, counting what it rejected.

    ``rejected`` counts every refused message; ``unauthenticated`` the part of it whose MAC did not
    match the run secret (sent by a process that does not have it).
    """

    def __init__(self, sock: zmq.Socket, kinds: frozenset[str], key: bytes, routed: bool = False):
        self.sock = sock
        self.kinds = kinds
        self.key = key
        self.routed = routed  # ROUTER sockets prefix every message with the peer identity
        self.rejected = 0
        self.unauthenticated = 0

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
            self.rejected += 1
            self.unauthenticated += isinstance(error, codec.AuthenticationError)
            return None
        return identity, kind, meta, arrays
