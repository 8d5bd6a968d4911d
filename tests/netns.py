"""Hosts made of Linux network namespaces on one machine, for tests that need a real network.

Each host is a network namespace with one veth interface on a bridge in the root namespace, so
traffic between hosts (and from the test process, which keeps the bridge's address) crosses real
interfaces with real addresses on a private /24. Every process started on a host also gets that
host's own hostname (a fresh UTS namespace): namespaces share the machine's hostname otherwise, and
code that compares hostnames would take two "hosts" for one.

Names carry a random tag, so a leftover of a crashed run never collides with the next one, and
``close()`` tears everything down (process groups, namespaces, links) even after a failure.
Needs root and iproute2; ``start()`` raises ``Unavailable`` when namespaces cannot be created.
"""
from __future__ import annotations

import ipaddress
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass


class Unavailable(RuntimeError):
    """Network namespaces cannot be created here (the message says what failed)."""


@dataclass(frozen=True)
class Host:
    name: str
    netns: str
    hostname: str
    ip: str
    veth: str  # the root-namespace end of the host's veth pair


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], check=False, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}")
    return result


def _free_subnet() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no address or route of this machine touches."""
    used = []
    for cmd in (("-4", "-o", "addr"), ("-4", "route", "show", "table", "all")):
        for word in _ip(*cmd, check=False).stdout.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                pass
    for _ in range(100):
        net = ipaddress.ip_network(f"10.{random.randint(128, 254)}.{random.randint(0, 254)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free private /24 for the test network")


class Hosts:
    """Namespaced hosts on one bridge: ``start()``, ``spawn(host, argv)``, ``close()``."""

    def __init__(self, names: Sequence[str], log_dir: str):
        self.names = list(names)
        self.tag = secrets.token_hex(3)
        self.log_dir = log_dir
        self.bridge = f"srlbr{self.tag}"
        self.hosts: dict[str, Host] = {}  # filled by start()
        self._created: list[Host] = []
        self._bridge_up = False
        self._procs: list[tuple[subprocess.Popen, str, str]] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # ---------------------------------------------------------------- network
    def start(self) -> None:
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root (euid is not 0)")
        for tool in ("ip", "unshare"):
            if shutil.which(tool) is None:
                raise Unavailable(f"`{tool}` is not installed")
        self.subnet = _free_subnet()
        addresses = list(self.subnet.hosts())
        self.gateway = str(addresses[0])  # the bridge's address: the root namespace's way in
        self.hosts = {name: Host(name=name, netns=f"srl-{self.tag}-{name}", hostname=f"{name}-{self.tag}",
                                 ip=str(addresses[i + 1]), veth=f"srl{self.tag}v{i}")
                      for i, name in enumerate(self.names)}
        first = next(iter(self.hosts.values()))
        probe = _ip("netns", "add", first.netns, check=False)
        if probe.returncode != 0:
            raise Unavailable(f"`ip netns add` failed: {probe.stderr.strip()}")
        self._created.append(first)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_up = True
        _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in self.hosts.values():
            if host not in self._created:
                _ip("netns", "add", host.netns)
                self._created.append(host)
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
            _ip("link", "set", host.veth, "master", self.bridge, "up")
            _ip("-n", host.netns, "addr", "add", f"{host.ip}/{self.subnet.prefixlen}", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")

    # ---------------------------------------------------------------- processes
    def spawn(self, host: str, argv: Sequence[str], label: str, env: dict[str, str] | None = None,
              cwd: str | None = None) -> subprocess.Popen:
        """Start ``argv`` on ``host`` (its network namespace and hostname) in a new process group.

        Output goes to ``<log_dir>/<label>.log`` (``logs()`` returns the tails).
        """
        h = self.hosts[host]
        log = os.path.join(self.log_dir, f"{label}.log")
        command = ["ip", "netns", "exec", h.netns, "unshare", "--uts",
                   "sh", "-c", 'hostname "$0" && exec "$@"', h.hostname, *argv]
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=cwd, start_new_session=True)
        self._procs.append((proc, label, log))
        return proc

    def exited(self) -> list[str]:
        """Labels of spawned processes that have already exited, with their exit codes."""
        return [f"{label} (exit {p.returncode})" for p, label, _ in self._procs if p.poll() is not None]

    def logs(self, chars: int = 3000) -> str:
        """The last ``chars`` characters of every spawned process's output."""
        parts = []
        for _, label, log in self._procs:
            with open(log, "rb") as f:
                text = f.read().decode(errors="replace")
            parts.append(f"----- {label} -----\n{text[-chars:]}")
        return "\n".join(parts)

    def wait_port(self, host: str, port: int, timeout: float) -> None:
        """Wait until ``host`` accepts tcp connections on ``port`` (reached from the root namespace)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.hosts[host].ip, port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{host} ({self.hosts[host].ip}) accepts nothing on port {port}; "
                                       f"exited: {self.exited()}\n{self.logs()}") from None
                time.sleep(0.2)

    # ---------------------------------------------------------------- teardown
    def _kill_groups(self) -> None:
        alive = [p for p, _, _ in self._procs if p.poll() is None]
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for p in alive:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            for p in alive:
                try:
                    p.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            alive = [p for p in alive if p.poll() is None]
            if not alive:
                break

    def _kill_rest(self, host: Host) -> None:
        """Anything still inside one of our namespaces (it was started there by us): kill -9 by pid."""
        pids = _ip("netns", "pids", host.netns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass

    def close(self) -> None:
        """Kill every spawned process group, then delete the namespaces, veths and the bridge."""
        try:
            self._kill_groups()
        finally:
            for host in self._created:
                self._kill_rest(host)
                _ip("link", "del", host.veth, check=False)
                _ip("netns", "del", host.netns, check=False)
            self._created.clear()
            if self._bridge_up:
                _ip("link", "del", self.bridge, check=False)
                self._bridge_up = False
