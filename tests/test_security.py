"""Security of the data plane: without the run secret nothing gets in or out; every decoder survives
fuzzing; a run works end to end on a Dask cluster with TLS; no socket the runtime opens unpickles."""
from __future__ import annotations

import ast
import contextlib
import os
import pathlib
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
import zmq
from distributed import Client, Variable
from distributed.security import Security
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import srl_lab.system as system_package
from srl_lab import cluster as clusters
from srl_lab.config import ActorConfig, ExperimentConfig, InferenceConfig
from srl_lab.system import codec
from srl_lab.system.control import endpoint_name
from srl_lab.system.controller import launch
from srl_lab.system.fragments import check_fragment
from srl_lab.models.mlp import MLPPolicy
from srl_lab.system.inference import read_actions, step_policy
from srl_lab.system.parameters import read_params_reply, read_params_request
from srl_lab.system.policy_worker import DOES_NOT_FIT, read_infer
from srl_lab.system.sample_stream import read_fragment_meta
from srl_lab.system.streams import Endpoint, Refused
from runs import wait_for

KEY = b"k" * 32
INTRUDER_KEY = b"i" * 32


def config(mode: str, actors: int = 2) -> ExperimentConfig:
    return ExperimentConfig(name=f"secure-{mode}", inference=InferenceConfig(mode=mode),
                            actors=ActorConfig(workers=actors, ring_size=2, envs_per_group=8, fragment_length=64))


def well_formed_fragment(rows: int = 8, length: int = 64) -> dict:
    """Arrays that pass every fragment check: only the MAC gives the intruder away."""
    f32 = np.zeros((length, rows), np.float32)
    return {"obs": np.zeros((length, rows, 4), np.float32), "actions": np.zeros((length, rows), np.int64),
            "logp": f32, "values": f32, "rewards": f32 + 1, "terminated": np.zeros((length, rows), bool),
            "truncated": np.zeros((length, rows), bool), "trunc_values": f32,
            "versions": np.zeros(length, np.int64), "last_value": np.zeros(rows, np.float32)}


def intruder_messages(service: str) -> list[list[bytes]]:
    """Well-formed messages for ``service``, signed with a key that is not the run's (and unsigned)."""
    if service == "samples":
        kind, meta, arrays = "fragment", {"actor": 0, "inc": 1, "seq": 0, "episodes": [], "env_errors": 0}, \
            well_formed_fragment()
    elif service == "params":
        kind, meta, arrays = "get_params", {"have": -1, "origin": None}, None
    else:
        kind, meta, arrays = "infer", {"group": 0}, {"obs": np.zeros((8, 4), np.float32)}
    signed = [bytes(f) for f in codec.encode(kind, meta, arrays, key=INTRUDER_KEY)]
    return [signed, signed[1:]]


def test_a_process_without_the_secret_is_rejected_on_every_data_port(dask_client, tmp_path):
    run = launch(config("remote"), client=dask_client, run_dir=str(tmp_path))
    ctx = zmq.Context()
    sent, weights_read = 0, 0
    try:
        wait_for(lambda: run.status()["version"] >= 2, 120, "first updates")
        kinds = {"samples": zmq.PUSH, "params": zmq.DEALER, "policy-0": zmq.DEALER}
        for service, kind in kinds.items():
            ep = Endpoint.from_dict(Variable(endpoint_name(run.run_id, service), client=dask_client).get())
            for address in (ep.tcp, ep.ipc):  # every address the port is reachable on
                sock = ctx.socket(kind)
                sock.setsockopt(zmq.LINGER, 2000)
                sock.connect(address)
                for _ in range(10):
                    for frames in intruder_messages(service):
                        sock.send_multipart(frames)
                        sent += 1
                if kind == zmq.DEALER:  # asking for weights or actions gets nothing back
                    weights_read += sock.poll(1500)
                sock.close()
        version = run.status()["version"]
        wait_for(lambda: run.status()["version"] >= version + 3, 120, "training to continue")
    finally:
        result = run.stop()
        ctx.term()
    assert weights_read == 0
    assert result["unauthenticated"] == sent == result["rejected"], (result, sent)
    assert result["malformed"] == 0
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result
    assert result["fragments_lost"] == 0


REPEATS = 3


def signed_malformed_messages(key: bytes) -> dict[str, list[tuple[list[bytes], str]]]:
    """Per service, messages signed with the run's own key that its parser must refuse, each with the
    reason it is counted under: they pass the MAC, so only the parsers stand between them and a worker."""
    def signed(kind: str, meta: dict, arrays: dict | None = None) -> list[bytes]:
        return [bytes(f) for f in codec.encode(kind, meta, arrays, key=key)]

    meta = {"actor": 0, "inc": 1, "seq": 0, "episodes": [], "env_errors": 0}
    obs = np.zeros((8, 4), np.float32)
    return {
        "samples": [
            (signed("fragment", {**meta, "seq": -1}, well_formed_fragment()),
             "fragment: meta: actor, inc, seq and env_errors must be non-negative integers"),
            (signed("fragment", meta, {**well_formed_fragment(), "logp": np.zeros((64, 4), np.float32)}),
             "fragment: logp has shape (64, 4), expected (64, 8)"),
            (signed("infer", {"group": 0}, {"obs": obs}), "unexpected kind"),
            ([codec.mac(key, [b"\xc1"]), b"\xc1"], "undecodable"),  # a header that is not msgpack
        ],
        "params": [
            (signed("get_params", {"have": "latest"}),
             "parameter request: have must be an integer, origin an integer or nil, tag a string or nil"),
            (signed("tag_params", {"have": -1}), "parameter request: tag_params without a tag"),
        ],
        "policy-0": [
            (signed("infer", {"group": 0}, {"obs": np.zeros((8, 5), np.float32)}), DOES_NOT_FIT),
            (signed("infer", {"group": "0"}, {"obs": obs}),
             "inference request: needs an integer group and obs"),
        ],
    }


def refused_in_metrics(run, *workers: str) -> Counter:
    """The refusals the workers' latest metrics records report, merged."""
    total: Counter = Counter()
    for worker in workers:
        total.update(run.metrics.latest.get(worker, {}).get("refused", {}))
    return total


def test_signed_malformed_messages_reach_every_parser_and_are_counted_by_reason(dask_client, tmp_path):
    run = launch(config("remote", actors=1), client=dask_client, run_dir=str(tmp_path))
    ctx = zmq.Context()
    messages = signed_malformed_messages(run.data_plane_key)
    expected = {"trainer-0": Counter(), "policy-0": Counter()}
    answered = 0
    try:
        wait_for(lambda: run.status()["version"] >= 2, 120, "first updates")
        for service, items in messages.items():
            ep = Endpoint.from_dict(Variable(endpoint_name(run.run_id, service), client=dask_client).get())
            sock = ctx.socket(zmq.PUSH if service == "samples" else zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 5000)
            sock.connect(ep.tcp)
            for _ in range(REPEATS):
                for frames, reason in items:
                    sock.send_multipart(frames)
                    expected["policy-0" if service == "policy-0" else "trainer-0"][reason] += 1
            if service != "samples":  # a refused request is not answered
                answered += sock.poll(1000)
            sock.close()
        for worker, reasons in expected.items():  # the periodic metrics records carry the reasons
            wait_for(lambda: refused_in_metrics(run, worker) >= reasons, 60,
                     f"{worker}'s refusals in its metrics")
        version = run.status()["version"]
        wait_for(lambda: run.status()["version"] >= version + 3, 120, "training to continue")
    finally:
        result = run.stop()
        ctx.term()
    assert answered == 0
    for worker, reasons in expected.items():  # each worker's last record, sent as it stopped
        record = run.metrics.latest[worker]
        assert {r: record["refused"].get(r) for r in reasons} == dict(reasons), record
        assert record["malformed"] >= sum(reasons.values()) and record["unauthenticated"] == 0, record
    # The run's result merges every worker's final counts (trainers, policy workers and actors).
    everything = expected["trainer-0"] + expected["policy-0"]
    assert {r: result["refused"].get(r) for r in everything} == dict(everything), result
    assert result["malformed"] == sum(everything.values()), result
    assert result["rejected"] == sum(result["refused"].values()) and result["unauthenticated"] == 0, result
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result
    assert result["fragments_lost"] == 0


def test_run_on_a_tls_cluster_end_to_end(tmp_path):
    pytest.importorskip("cryptography", reason="Security.temporary() makes its certificates with cryptography")
    security = Security.temporary()
    cluster = clusters.local(n_workers=2, dashboard_address=None, security=security)
    client = Client(cluster, security=security)
    try:
        assert client.scheduler.address.startswith("tls://")
        assert all(w.startswith("tls://") for w in client.scheduler_info()["workers"])
        run = launch(config("inline", actors=1), client=client, run_dir=str(tmp_path))
        try:
            wait_for(lambda: run.status()["version"] >= 3, 120, "training over TLS")
        finally:
            result = run.stop()
    finally:
        client.close()
        cluster.close()
    assert result["version"] >= 3 and result["restarts"] == 0
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"] > 0


# ------------------------------------------------------------------ decoders under fuzzing

metas = st.dictionaries(st.sampled_from(["actor", "inc", "seq", "episodes", "env_errors", "group", "version",
                                         "have", "origin", "tag", "x"]),
                        st.one_of(st.none(), st.booleans(), st.integers(-3, 2**64 - 1), st.text(max_size=3),
                                  st.lists(st.integers(-5, 5), max_size=2), st.floats()), max_size=6)
leaf = hnp.arrays(st.sampled_from([np.float32, np.int64, np.bool_, np.uint8]),
                  hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
trees = st.dictionaries(st.sampled_from(["obs", "actions", "logp", "values", "rewards", "terminated", "truncated",
                                         "trunc_values", "versions", "last_value", "w"]),
                        leaf | st.dictionaries(st.sampled_from(["a", "b"]), leaf, max_size=2), max_size=10)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meta=metas, arrays=trees, kind=st.sampled_from(["fragment", "infer", "get_params", "params",
                                                      "params_current", "actions"]))
def test_every_message_decoder_accepts_or_refuses_signed_garbage_without_raising(meta, arrays, kind):
    """Signed garbage (a buggy peer holding the secret) reaches the message decoders; none may raise."""
    _, meta, arrays = codec.decode([bytes(f) for f in codec.encode(kind, meta, arrays, key=KEY)], key=KEY)
    check_fragment(arrays, 4)
    for read in (lambda: read_fragment_meta(meta), lambda: read_params_request(kind, meta),
                 lambda: read_params_reply(kind, meta, arrays), lambda: read_actions(meta, arrays),
                 lambda: read_infer(meta, arrays), lambda: read_infer(meta, arrays, space=DICT_SPACE)):
        with contextlib.suppress(Refused):  # refusing is the only way a parser may fail
            read()


BOX_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DICT_SPACE = gym.spaces.Dict({"a": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "b": BOX_SPACE})
BOX_POLICY = MLPPolicy(BOX_SPACE, gym.spaces.Discrete(3), (8,))
shapes = hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)
finite_obs = st.one_of(hnp.arrays(np.float32, shapes, elements=st.floats(-10, 10, width=32)),
                       hnp.arrays(np.int64, shapes, elements=st.integers(-5, 5)),
                       hnp.arrays(np.bool_, shapes))
requests = st.fixed_dictionaries({"obs": finite_obs | st.dictionaries(st.sampled_from(["a", "b"]), finite_obs)},
                                 optional={"states": finite_obs})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meta=metas, arrays=requests)
def test_inference_requests_the_policy_worker_accepts_fit_the_network(meta, arrays):
    """What ``read_infer`` lets through reaches the network without an error, so an exception in the
    forward pass can only be the user's network failing (and fails the run), never a peer's garbage."""
    meta = {**meta, "group": 0} if "group" not in meta else meta
    _, meta, arrays = codec.decode([bytes(f) for f in codec.encode("infer", meta, arrays, key=KEY)], key=KEY)
    with contextlib.suppress(Refused):
        parsed = read_infer(meta, arrays, None, BOX_SPACE)
        actions, _, _, _ = step_policy(BOX_POLICY, parsed[1], None, "cpu")
        assert len(actions) == parsed[2]


@settings(max_examples=300)
@given(frames=st.lists(st.binary(max_size=80), max_size=5), key=st.binary(min_size=16, max_size=40))
def test_codec_refuses_anything_not_signed_with_the_key(frames, key):
    try:
        codec.decode(frames, key=KEY)
    except codec.AuthenticationError:
        pass
    signed = [codec.mac(key, frames), *frames]
    if key != KEY:
        try:
            codec.decode(signed, key=KEY)
            raise AssertionError("a message signed with another key was accepted")
        except codec.AuthenticationError:
            pass


@given(position=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_flipping_any_bit_of_a_signed_message_is_detected(position, bit):
    frames = [bytearray(f) for f in codec.encode("infer", {"group": 1}, {"obs": np.arange(12.0)}, key=KEY)]
    sizes = np.cumsum([len(f) for f in frames])
    position %= int(sizes[-1])
    index = int(np.searchsorted(sizes, position, side="right"))
    frames[index][position - (int(sizes[index - 1]) if index else 0)] ^= 1 << bit
    try:
        codec.decode([bytes(f) for f in frames], key=KEY)
        raise AssertionError("a tampered message was accepted")
    except codec.AuthenticationError:
        pass


def test_no_runtime_module_unpickles_what_a_socket_delivers():
    """pyzmq's object helpers pickle; pickle itself is only for checkpoint files and resuming a run."""
    folder = os.path.dirname(system_package.__file__)
    files_only = {"trainer_worker.py", "controller.py", "checkpoints.py", "run_directory.py"}
    for path in sorted(pathlib.Path(folder).glob("*.py")):
        name, tree = path.name, ast.parse(path.read_text())
        used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        used |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                 for a in n.names}
        assert not used & {"recv_pyobj", "send_pyobj", "recv_serialized", "send_serialized"}, name
        if name not in files_only:
            assert not used & {"pickle", "cloudpickle", "torch.load"}, name
