"""The data-plane codec: exact round trips, and garbage always rejected with CodecError."""
from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from srl_lab.system import codec

KEY = b"k" * 32
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


def _roundtrip(kind, meta, arrays):
    frames = [bytes(f) for f in codec.encode(kind, meta, arrays, key=KEY)]
    return codec.decode(frames, key=KEY)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_roundtrips_in_nested_dicts(dtype):
    rng = np.random.default_rng(0)
    leaf = (rng.random((3, 2, 5)) * 100).astype(dtype)
    arrays = {"obs": {"self": leaf, "entities": {"boxes": leaf[:, :1], "empty": leaf[:0]}},
              "actions": leaf.reshape(-1), "scalar": np.asarray(leaf.flat[0])}
    kind, meta, out = _roundtrip("fragment", {"seq": 3, "episodes": [{"return": 1.5}]}, arrays)
    assert kind == "fragment" and meta == {"seq": 3, "episodes": [{"return": 1.5}]}
    np.testing.assert_array_equal(out["obs"]["self"], leaf)
    np.testing.assert_array_equal(out["obs"]["entities"]["boxes"], leaf[:, :1])
    assert out["obs"]["entities"]["empty"].shape == (0, 2, 5)
    assert out["actions"].dtype == leaf.dtype and out["scalar"].shape == ()


@given(arrays=st.dictionaries(
    st.text(alphabet="abcdefgh_", min_size=1, max_size=6),
    hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=4, max_side=5)),
    max_size=5))
def test_random_arrays_roundtrip(arrays):
    _, _, out = _roundtrip("x", {}, arrays)
    assert out.keys() == arrays.keys()
    for k, v in arrays.items():
        np.testing.assert_array_equal(out[k], v)
        assert out[k].dtype == v.dtype


def test_object_arrays_are_refused_at_encode():
    with pytest.raises(ValueError, match="unsupported dtype"):
        codec.encode("x", {}, {"a": np.array([object()])}, key=KEY)


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=64), min_size=0, max_size=4))
def test_random_frames_raise_codec_error_only(frames):
    try:
        codec.decode(frames, key=KEY)
    except codec.CodecError:
        pass


def signed(frames: list[bytes]) -> list[bytes]:
    """What a process holding the key would send: garbage with a valid MAC reaches the parser."""
    return [codec.mac(KEY, frames), *frames]


@settings(max_examples=200)
@given(specs=st.lists(st.lists(st.one_of(st.text(max_size=4), st.integers(-3, 9), st.lists(st.integers(-2, 5),
                                                                                         max_size=3)),
                               max_size=4), max_size=3),
       payloads=st.lists(st.binary(max_size=40), max_size=3),
       kind=st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1)))
def test_wellformed_headers_with_lying_specs_are_rejected_or_consistent(specs, payloads, kind):
    header = msgpack.packb({"kind": kind, "meta": {}, "arrays": specs})
    try:
        _, _, out = codec.decode(signed([header, *payloads]), key=KEY)
    except codec.CodecError:
        return
    for spec, payload in zip(specs, payloads):  # accepted only when every byte count is exact
        assert np.dtype(spec[1]).itemsize * int(np.prod(spec[2])) == len(payload)


def test_size_mismatch_and_bad_bool_are_rejected():
    frames = [bytes(f) for f in codec.encode("x", {}, {"a": np.zeros(4, np.float32)}, key=KEY)]
    with pytest.raises(codec.CodecError):
        codec.decode(signed([frames[1], frames[2][:-1]]), key=KEY)
    bools = [bytes(f) for f in codec.encode("x", {}, {"m": np.zeros(3, bool)}, key=KEY)]
    with pytest.raises(codec.CodecError, match="boolean"):
        codec.decode(signed([bools[1], b"\x00\x02\x01"]), key=KEY)
    with pytest.raises(codec.CodecError, match="kind"):
        codec.decode(frames, expect_kinds=frozenset({"fragment"}), key=KEY)


def test_every_refusal_names_its_reason():
    """Receivers count a refused message under the error's ``reason``."""
    frames = [bytes(f) for f in codec.encode("infer", {"group": 0}, {"obs": np.zeros(3)}, key=KEY)]
    cases = {"unauthenticated": (frames, b"o" * 32, None),
             "unexpected kind": (frames, KEY, frozenset({"fragment"})),
             "undecodable": ([codec.mac(KEY, [b"\xc1"]), b"\xc1"], KEY, None)}
    for reason, (message, key, kinds) in cases.items():
        with pytest.raises(codec.CodecError) as refused:
            codec.decode(message, kinds, key=key)
        assert refused.value.reason == reason
