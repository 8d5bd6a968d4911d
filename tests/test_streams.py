"""Parameter service, peer sockets, refusal counts and env group behaviour, in-process (no Dask needed)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np
import zmq

from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.system import codec
from srl_lab.system.inference import RemoteInference
from srl_lab.system.parameters import ParameterClient, ParameterService
from srl_lab.system.streams import (MAX_REASONS, OTHER_REASONS, FixedEndpoint, PeerSocket, Refusals, bind,
                                    refusal_report)

OTHER_KEY = b"o" * 32
BAD_REQUEST = "parameter request: have must be an integer, origin an integer or nil, tag a string or nil"


def test_parameter_service_serves_latest_and_tagged_versions():
    ctx = zmq.Context()
    key = codec.new_secret()
    service = ParameterService(ctx, "test", key)
    try:
        service.publish(0, {"w": np.zeros(3, np.float32)})
        reader = ParameterClient(ctx, service.endpoint, key, poll_s=0.0)
        assert reader.wait_first(timeout_s=10)["w"].tolist() == [0, 0, 0]
        service.tag("past")
        service.publish(1, {"w": np.ones(3, np.float32)})
        deadline, weights = time.monotonic() + 10, None
        while weights is None and time.monotonic() < deadline:
            weights = reader.poll(block_s=0.05)
        assert reader.version == 1 and weights["w"].tolist() == [1, 1, 1]
        assert reader.poll(block_s=0.2) is None  # up to date: nothing new to load
        past = ParameterClient(ctx, service.endpoint, key, poll_s=0.0, tag="past")
        assert past.wait_first(timeout_s=10)["w"].tolist() == [0, 0, 0] and past.version == 0
        reader.close()
        past.close()
    finally:
        service.close()
        ctx.term()


class _ExplodingCartPole(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 3:
            raise RuntimeError("boom")
        return self.env.step(action)


def test_env_group_resets_in_the_same_step_and_survives_exceptions():
    group = GymEnvGroup(_ExplodingCartPole, num_envs=2, seed=0)
    obs = group.reset()
    assert obs.shape == (2, 1, 4) and obs.dtype == np.float32
    errors, ended = 0, 0
    for _ in range(200):
        result = group.step(np.ones((2, 1), dtype=np.int64))
        errors += result.env_errors
        ended += len(result.episodes)
        done = result.terminated | result.truncated
        if done.any():
            assert result.final_obs is not None
            assert not np.array_equal(result.final_obs[done], result.obs[done])  # next episode's first obs
    assert errors == 2  # once per env, each cut as truncated and reset
    assert ended >= 2


def test_refusals_keep_totals_and_a_bounded_count_per_reason():
    refusals = Refusals()
    refusals.add("unauthenticated")
    refusals.add("late reply", malformed=False)
    for i in range(MAX_REASONS + 5):  # a buggy peer inventing ever new reasons
        refusals.add(f"fragment: bad {i}")
    report = refusals.report()
    assert report["rejected"] == MAX_REASONS + 7 == sum(report["refused"].values())
    assert report["unauthenticated"] == 1 and report["malformed"] == MAX_REASONS + 5
    assert len(report["refused"]) == MAX_REASONS and report["refused"][OTHER_REASONS] == 8
    assert type(report["refused"]) is dict and all(type(n) is int for n in report["refused"].values())
    merged = refusal_report(refusals, refusals)
    assert merged["rejected"] == 2 * report["rejected"] and merged["refused"]["late reply"] == 2


class _MovingEndpoint:
    """An endpoint source whose peer moves when the test says so."""

    def __init__(self, endpoint):
        self.endpoint, self.moved_to = endpoint, None

    def changed(self, force: bool = False) -> bool:
        if self.moved_to is None:
            return False
        self.endpoint, self.moved_to = self.moved_to, None
        return True


def test_a_peer_socket_follows_its_peer_with_the_same_options_and_counts():
    ctx = zmq.Context()
    first, first_endpoint = bind(ctx, zmq.PULL, "first")
    second, second_endpoint = bind(ctx, zmq.PULL, "second")
    source = _MovingEndpoint(first_endpoint)
    peer = PeerSocket(ctx, zmq.PUSH, source, codec.new_secret(), options={zmq.SNDTIMEO: 1000})
    try:
        for sock in (first, second):
            sock.setsockopt(zmq.RCVTIMEO, 5000)
        assert not peer.follow(force=True) and peer.reconnects == 0
        peer.sock.send(b"a")
        assert first.recv() == b"a"
        source.moved_to = second_endpoint
        assert peer.follow() and peer.reconnects == 1
        assert peer.sock.getsockopt(zmq.SNDTIMEO) == 1000 and peer.receiver.refusals is peer.refusals
        peer.sock.send(b"b")
        assert second.recv() == b"b"
    finally:
        peer.close()
        first.close(linger=0)
        second.close(linger=0)
        ctx.term()


def _actions(identity: bytes, group: int, key: bytes, logp_shape: tuple[int, ...] = (2,)) -> list:
    arrays = {"actions": np.zeros(2, np.int64), "logp": np.zeros(logp_shape, np.float32),
              "values": np.zeros(2, np.float32)}
    return [identity, *codec.encode("actions", {"group": group, "version": 0}, arrays, key=key)]


@contextmanager
def fake_server(name: str, client_of) -> Iterator[tuple]:
    """A ROUTER socket standing in for a service, and ``client_of(ctx, endpoint, key)`` talking to it."""
    ctx = zmq.Context()
    key = codec.new_secret()
    server, endpoint = bind(ctx, zmq.ROUTER, name)
    server.setsockopt(zmq.RCVTIMEO, 5000)
    client = client_of(ctx, endpoint, key)
    try:
        yield server, client, key
    finally:
        client.close()
        server.close(linger=0)
        ctx.term()


def test_remote_inference_counts_refused_replies_by_reason():
    """The actor's side: malformed, unsigned and late replies are refused, counted, and never stop it."""
    rows = np.zeros((2, 4), np.float32)
    with fake_server("fake-policy-worker",
                     lambda ctx, endpoint, key: RemoteInference(ctx, FixedEndpoint(endpoint), key)) as (
            server, inference, key):
        inference.post(0, rows)
        identity = server.recv_multipart()[0]
        for reply in (_actions(identity, 0, key, logp_shape=(2, 1)), _actions(identity, 0, OTHER_KEY),
                      _actions(identity, 0, key), _actions(identity, 0, key)):  # the last one: a duplicate
            server.send_multipart(reply)
        assert inference.wait(0, lambda: False).version == 0
        inference.post(1, rows)
        server.recv_multipart()
        server.send_multipart(_actions(identity, 1, key))
        assert inference.wait(1, lambda: False) is not None
        assert inference.refusals.report() == {
            "rejected": 3, "unauthenticated": 1, "malformed": 1,
            "refused": {"inference reply: logp and values must be 1-D, with one entry per action row": 1,
                        "unauthenticated": 1, "late reply": 1}}


def test_parameter_client_counts_refused_replies_by_reason():
    weights = {"w": np.ones(3, np.float32)}
    with fake_server("fake-parameter-service",
                     lambda ctx, endpoint, key: ParameterClient(ctx, endpoint, key, poll_s=0.0)) as (
            server, client, key):
        assert client.poll() is None  # the request goes out
        identity = server.recv_multipart()[0]
        for meta, arrays in (({"version": 1}, {"w": {"nested": weights["w"]}}), ({"version": "1"}, weights),
                             ({"version": 1}, weights)):
            server.send_multipart([identity, *codec.encode("params", meta, arrays, key=key)])
        deadline, received = time.monotonic() + 10, None
        while received is None and time.monotonic() < deadline:
            received = client.poll(block_s=0.1)
        assert received["w"].tolist() == [1, 1, 1] and client.version == 1
        assert client.refusals.report()["refused"] == {
            "parameter reply: weights must be a flat, non-empty map of arrays": 1,
            "parameter reply: version must be an integer, origin an integer or nil": 1}


def test_parameter_service_counts_refused_requests_and_served_replies():
    ctx = zmq.Context()
    key = codec.new_secret()
    service = ParameterService(ctx, "refusals", key)
    reader = ctx.socket(zmq.DEALER)
    reader.setsockopt(zmq.RCVTIMEO, 5000)
    reader.connect(service.endpoint.tcp)
    try:
        service.publish(0, {"w": np.zeros(3, np.float32)})
        for kind, meta, signer in (("get_params", {"have": "x"}, key), ("tag_params", {"have": -1}, key),
                                   ("infer", {"group": 0}, key), ("get_params", {"have": -1}, OTHER_KEY),
                                   ("get_params", {"have": -1}, key)):
            reader.send_multipart(codec.encode(kind, meta, key=signer))
        kind, _, _ = codec.decode(reader.recv_multipart(), key=key)  # only the last one is answered
        assert kind == "params" and service.requests_served == 1
        assert service.refusals.report() == {
            "rejected": 4, "unauthenticated": 1, "malformed": 3,
            "refused": {BAD_REQUEST: 1, "parameter request: tag_params without a tag": 1, "unexpected kind": 1,
                        "unauthenticated": 1}}
    finally:
        reader.close(linger=0)
        service.close()
        ctx.term()
