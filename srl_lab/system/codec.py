"""Data-plane message codec: a MAC, a small msgpack header and raw array frames, never pickle.

A message is a list of ZeroMQ frames ``[mac, header, buf_0, buf_1, ...]``. ``mac`` is an
HMAC-SHA256, keyed with the run's secret, over every following frame (each prefixed with its
length, so frames cannot be re-split). The header is a msgpack map
``{"kind": str, "meta": {...}, "arrays": [[path, dtype, shape], ...]}``; ``buf_i`` holds the raw
bytes of array ``i``. Nested dicts of arrays are flattened to ``"a/b/c"`` paths and rebuilt on
decode.

Decoding checks the MAC *before* parsing anything, so a process without the secret cannot make a
worker parse a single byte it sent; then it validates everything (frame count, dtype whitelist,
byte sizes, header types), so a malformed packet raises ``CodecError`` and is counted by the
receiver under the error's ``reason`` instead of crashing it or executing code.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Mapping

import msgpack
import numpy as np

ALLOWED_DTYPES = frozenset(
    np.dtype(t).str
    for t in (
        np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
        np.int64, np.uint64, np.float16, np.float32, np.float64,
    )
)
MAX_HEADER_BYTES = 1 << 20
MAX_ARRAYS = 4096
MAX_NDIM = 8
MAC_BYTES = 32
MIN_KEY_BYTES = 16


class CodecError(ValueError):
    """A frame sequence that is not a valid srl_lab message."""

    reason = "undecodable"  # what a receiver counts the refused message under


class AuthenticationError(CodecError):
    """A message whose MAC does not match the run's secret: sent by a process that lacks it."""

    reason = "unauthenticated"


class UnexpectedKind(CodecError):
    """A valid message of a kind the receiving socket does not serve (sent to the wrong port)."""

    reason = "unexpected kind"


def new_secret() -> bytes:
    """A fresh per-run secret; the controller makes one and hands it to every worker over Dask."""
    return secrets.token_bytes(32)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the data-plane key must be at least {MIN_KEY_BYTES} bytes")


def mac(key: bytes, frames: list[bytes | memoryview]) -> bytes:
    """HMAC-SHA256 over length-prefixed frames."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for frame in frames:
        view = memoryview(frame)
        h.update(view.nbytes.to_bytes(8, "little"))
        h.update(view)
    return h.digest()


def _flatten(tree: Mapping[str, Any], prefix: str, out: list[tuple[str, np.ndarray]]) -> None:
    for key, value in tree.items():
        if "/" in key:
            raise ValueError(f"array key {key!r} may not contain '/'")
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flatten(value, path + "/", out)
        else:
            arr = np.asarray(value)
            out.append((path, arr if arr.flags.c_contiguous else arr.copy(order="C")))


def encode(kind: str, meta: Mapping[str, Any] | None = None, arrays: Mapping[str, Any] | None = None,
           *, key: bytes) -> list[bytes | memoryview]:
    """Encode and sign a message; ``arrays`` may be a nested dict of numpy arrays."""
    _check_key(key)
    flat: list[tuple[str, np.ndarray]] = []
    _flatten(arrays or {}, "", flat)
    for path, arr in flat:
        if arr.dtype.str not in ALLOWED_DTYPES:
            raise ValueError(f"array {path!r} has unsupported dtype {arr.dtype}")
    header = msgpack.packb(
        {"kind": kind, "meta": dict(meta or {}),
         "arrays": [[p, a.dtype.str, list(a.shape)] for p, a in flat]},
        use_bin_type=True,
    )
    body = [header, *(memoryview(a).cast("B") if a.size else b"" for _, a in flat)]
    return [mac(key, body), *body]


def _unflatten(items: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, arr in items:
        node = tree
        *parents, leaf = path.split("/")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise CodecError(f"array path {path!r} collides with another array")
            node = child
        if leaf in node:
            raise CodecError(f"duplicate array path {path!r}")
        node[leaf] = arr
    return tree


def authenticate(frames: list[bytes | memoryview], key: bytes) -> list[bytes | memoryview]:
    """The frames after the MAC if it matches ``key``; raises ``AuthenticationError`` otherwise."""
    _check_key(key)
    if len(frames) < 2 or len(frames) > MAX_ARRAYS + 2 or memoryview(frames[0]).nbytes != MAC_BYTES:
        raise AuthenticationError("message carries no MAC")
    if not hmac.compare_digest(mac(key, frames[1:]), bytes(frames[0])):
        raise AuthenticationError("MAC does not match the run secret")
    return frames[1:]


def decode(frames: list[bytes | memoryview], expect_kinds: frozenset[str] | None = None, *, key: bytes
           ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Authenticate, then decode and validate frames into ``(kind, meta, arrays)``.

    Raises ``AuthenticationError`` (a ``CodecError``) before parsing anything if the MAC is wrong,
    and ``CodecError`` for anything else that is not a valid message.
    """
    frames = authenticate(frames, key)
    raw_header = bytes(frames[0])
    if len(raw_header) > MAX_HEADER_BYTES:
        raise CodecError("header too large")
    try:
        header = msgpack.unpackb(raw_header, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"header is not msgpack: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"kind", "meta", "arrays"}:
        raise CodecError("header must be a map with keys kind, meta, arrays")
    kind, meta, specs = header["kind"], header["meta"], header["arrays"]
    if not isinstance(kind, str):
        raise CodecError("message kind must be a string")
    if expect_kinds is not None and kind not in expect_kinds:
        raise UnexpectedKind(f"unexpected message kind {kind!r}")
    if not isinstance(meta, dict) or not isinstance(specs, list) or len(specs) > MAX_ARRAYS:
        raise CodecError("malformed meta or array list")
    if len(specs) != len(frames) - 1:
        raise CodecError(f"header lists {len(specs)} arrays but {len(frames) - 1} frames came")
    items = []
    for spec, frame in zip(specs, frames[1:]):
        path, dtype, shape = _check_spec(spec)
        items.append((path, _frame_to_array(dtype, shape, frame)))
    return kind, meta, _unflatten(items)


def _check_spec(spec: Any) -> tuple[str, str, tuple[int, ...]]:
    if not (isinstance(spec, list) and len(spec) == 3):
        raise CodecError("array spec must be [path, dtype, shape]")
    path, dtype, shape = spec
    if not isinstance(path, str) or not path or not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
        raise CodecError(f"bad array path or dtype {dtype!r}")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and 0 <= d < 1 << 40 for d in shape)):
        raise CodecError(f"bad shape {shape!r}")
    return path, dtype, tuple(shape)


def _frame_to_array(dtype: str, shape: tuple[int, ...], frame: bytes | memoryview) -> np.ndarray:
    dt = np.dtype(dtype)
    buf = memoryview(frame).cast("B")
    if int(np.prod(shape, dtype=np.int64)) * dt.itemsize != buf.nbytes:
        raise CodecError(f"frame holds {buf.nbytes} bytes, shape {shape} of {dt} needs more or less")
    arr = np.frombuffer(buf, dtype=dt).reshape(shape)
    if dt == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
        raise CodecError("boolean array holds values other than 0 and 1")
    return arr
