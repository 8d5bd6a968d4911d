"""The sample stream's two ends and the accounting that spans them.

Every fragment is numbered: ``(actor, inc, seq)`` where ``inc`` is the actor task's incarnation and
``seq`` counts the fragments that incarnation produced. The trainer's ``Ledger`` records, per
incarnation, the next sequence number it expects and how many fragments it counted (consumed or
dropped as stale). At the end of a run every produced fragment is then either counted or *lost*:
still in the queue of an actor process that was killed, or received by a trainer that died before
its next checkpoint. ``account`` turns that into the identity
``produced == consumed + dropped_stale + lost``.

``SampleSender`` is the actor's end: a PUSH socket with a small send queue (a slow trainer blocks the
actor instead of growing memory), which follows the trainer to its replacement.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import zmq

from srl_lab.system import codec
from srl_lab.system.streams import EndpointSource, PeerSocket, Refused

SEND_TIMEOUT_MS = 200  # a blocked send wakes up this often to check stop flags and the endpoint


def trainer_of_actor(actor: int, trainers: int) -> int:
    """The trainer an actor sends its fragments to (data-parallel trainers split the actors)."""
    return actor % trainers


def ledger_key(actor: int, inc: int) -> str:
    return f"{actor}:{inc}"


def read_fragment_meta(meta: dict[str, Any]) -> tuple[str, int, list, int]:
    """``(ledger key, seq, episodes, env_errors)`` of a fragment's meta; raises ``Refused``."""
    actor, inc, seq = meta.get("actor"), meta.get("inc"), meta.get("seq")
    episodes, env_errors = meta.get("episodes"), meta.get("env_errors", 0)
    if not all(isinstance(v, int) and v >= 0 for v in (actor, inc, seq, env_errors)):
        raise Refused("meta: actor, inc, seq and env_errors must be non-negative integers")
    if not isinstance(episodes, list):
        raise Refused("meta: episodes must be a list")
    return ledger_key(actor, inc), seq, episodes, env_errors


class SampleSender:
    """Pushes numbered fragments to the trainer; blocks (stoppably) while the trainer is behind.

    ``source`` is an ``EndpointWatch`` on the trainer's sample endpoint. Fragments still queued
    towards a trainer that died are lost when the sender follows its replacement (the books count them).
    """

    def __init__(self, ctx: zmq.Context, source: EndpointSource, key: bytes, actor: int, incarnation: int,
                 hwm: int):
        self.peer = PeerSocket(ctx, zmq.PUSH, source, key, sndhwm=hwm,
                               options={zmq.SNDTIMEO: SEND_TIMEOUT_MS})
        self.key = key
        self.actor = actor
        self.incarnation = incarnation
        self.produced = 0

    @property
    def reconnects(self) -> int:
        return self.peer.reconnects

    def send(self, meta: dict[str, Any], arrays: dict[str, Any], should_stop: Callable[[], bool]) -> bool:
        """Queue one fragment; False if told to stop while the trainer was not taking any."""
        frames = codec.encode("fragment", {**meta, "actor": self.actor, "inc": self.incarnation,
                                           "seq": self.produced}, arrays, key=self.key)
        self.peer.follow()
        while True:
            try:
                self.peer.sock.send_multipart(frames, copy=False)
                self.produced += 1
                return True
            except zmq.Again:
                if should_stop():
                    return False
                self.peer.follow()

    def close(self, linger_ms: int) -> None:
        """Close, giving queued fragments ``linger_ms`` to reach the trainer."""
        self.peer.close(linger_ms)


class Ledger:
    """Per actor incarnation: ``[next_seq, counted]`` as the trainer saw them."""

    def __init__(self, entries: dict[str, list[int]] | None = None):
        self.entries: dict[str, list[int]] = {k: list(v) for k, v in (entries or {}).items()}

    def record(self, key: str, seq: int) -> None:
        entry = self.entries.setdefault(key, [0, 0])
        entry[0] = max(entry[0], seq + 1)
        entry[1] += 1

    def next_seq(self, key: str) -> int:
        return self.entries.get(key, (0, 0))[0]

    def caught_up(self, produced: dict[str, int]) -> bool:
        """Whether every listed incarnation's last fragment has arrived."""
        return all(self.next_seq(k) >= n for k, n in produced.items())

    def snapshot(self, pending: Counter) -> dict[str, list[int]]:
        """Entries without the fragments waiting in an untrained batch (they die with the trainer)."""
        return {k: [n, c - pending.get(k, 0)] for k, (n, c) in self.entries.items()}


def account(ledger: dict[str, list[int]], produced_live: dict[str, int], produced_dead: dict[str, int],
            consumed: int, dropped_stale: int) -> dict[str, int]:
    """Close the books: every produced fragment was consumed, dropped as stale, or lost.

    ``produced_live`` holds exact counts from actors that returned; ``produced_dead`` the last count
    a killed incarnation reported, raised to what the trainer saw arrive from it.
    """
    produced = dict(produced_live)
    for key, n in produced_dead.items():
        produced[key] = max(n, ledger.get(key, (0, 0))[0])
    for key, (next_seq, _) in ledger.items():
        produced.setdefault(key, next_seq)
    lost = {k: n - ledger.get(k, (0, 0))[1] for k, n in produced.items()}
    return {"fragments_produced": sum(produced.values()), "fragments_consumed": consumed,
            "dropped_stale": dropped_stale, "fragments_lost": sum(lost.values()),
            "fragments_lost_live": sum(lost[k] for k in produced_live)}
