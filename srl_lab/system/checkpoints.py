"""Trainer checkpoints on disk: atomic writes, newest-first loading, RNG state, retention.

A checkpoint is written to a temporary file in the same folder, flushed and fsynced, then renamed
onto its final name (``os.replace`` is atomic on POSIX) and the folder is fsynced. A process killed
at any moment therefore leaves the earlier ``version-*.pt`` files intact and at most a stray
``*.tmp`` file, which is never loaded and is removed by the next trainer. Loading tries the newest
checkpoint first and falls back past any it cannot read.
"""
from __future__ import annotations

import glob
import os
import random
import re
from typing import Any

import numpy as np
import torch

from srl_lab.policies import DEFAULT

NAME = re.compile(r"version-(\d+)\.pt$")


def folder(run_dir: str, policy: str = DEFAULT) -> str:
    """A policy's checkpoints (a single-policy run's are ``run_dir/checkpoints``)."""
    return os.path.join(run_dir, "checkpoints" if policy == DEFAULT else f"checkpoints@{policy}")


def all_folders(run_dir: str) -> list[str]:
    """Every policy's checkpoint folder that exists in ``run_dir``."""
    return sorted(glob.glob(os.path.join(run_dir, "checkpoints"))
                  + glob.glob(os.path.join(run_dir, "checkpoints@*")))


def paths(directory: str) -> list[str]:
    """Complete checkpoints in ``directory``, oldest version first."""
    found = [(int(m.group(1)), p) for p in glob.glob(os.path.join(directory, "version-*.pt"))
             if (m := NAME.search(os.path.basename(p)))]
    return [p for _, p in sorted(found)]


def save(directory: str, version: int, state: dict[str, Any], keep: int) -> str:
    """Write ``state`` atomically as ``version-N.pt``; keep only the newest ``keep`` checkpoints."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"version-{version:08d}.pt")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(directory)
    for old in paths(directory)[:-keep]:
        os.remove(old)
    return path


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load(path: str) -> dict[str, Any]:
    """A checkpoint this runtime wrote (files in the run directory are trusted; sockets never are)."""
    return torch.load(path, map_location="cpu", weights_only=False)


def load_latest(directory: str) -> tuple[str, dict[str, Any]] | None:
    """``(path, state)`` of the newest readable checkpoint, or None if there is none."""
    for path in reversed(paths(directory)):
        try:
            return path, load(path)
        except Exception:  # unreadable (e.g. a filesystem without atomic rename): try the one before
            continue
    return None


def remove_temporary(directory: str) -> list[str]:
    """Delete partial files left by a writer that was killed mid-write; returns what was removed."""
    stray = glob.glob(os.path.join(directory, "*.tmp"))
    for path in stray:
        os.remove(path)
    return stray


def rng_state() -> dict[str, Any]:
    """Every random generator the trainer draws from: Python, NumPy, torch (and CUDA if present)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
