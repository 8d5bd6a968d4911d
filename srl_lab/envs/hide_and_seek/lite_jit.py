"""The compiler switch for the lite kernels: numba when available, plain Python otherwise.

The kernels are written as explicit loops over numpy arrays so the very same code runs compiled
(``numba.njit(cache=True)``) or interpreted. Set ``SRL_LAB_NUMBA=0`` to force the interpreted
path (slow; used to check it matches the compiled one).
"""
from __future__ import annotations

import os
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

try:
    if os.environ.get("SRL_LAB_NUMBA", "1") == "0":
        raise ImportError("numba disabled by SRL_LAB_NUMBA=0")
    import numba

    NUMBA = True
except ImportError:
    numba = None
    NUMBA = False


def njit(fn: F) -> F:
    """Compile ``fn`` with numba (cached on disk), or return it unchanged without numba."""
    if NUMBA:
        return numba.njit(cache=True, nogil=True)(fn)
    return fn
