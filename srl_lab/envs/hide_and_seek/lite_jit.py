"""The compiler switch for the lite kernels: numba when available, plain Python otherwise.

The kernels are written as explicit loops over numpy arrays so the very same code runs compiled
(``numba.njit``, cached on disk) or interpreted. Set ``SRL_LAB_NUMBA=0`` to force the interpreted
path (slow; used to check it matches the compiled one).

Numba's on-disk cache only checks the file that defines a function, yet a kernel inlines helpers
and constants from the other kernel modules: editing ``lite_physics.py`` would leave the cached
``lite_step.step_all`` stale. So every kernel's cache is keyed on a hash of all the files the
kernels are built from (falling back to numba's plain ``cache=True`` if its caching internals
ever change shape).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, TypeVar

F = TypeVar("F", bound=Callable)

try:
    if os.environ.get("SRL_LAB_NUMBA", "1") == "0":
        raise ImportError("numba disabled by SRL_LAB_NUMBA=0")
    import numba

    NUMBA = True
except ImportError:
    numba = None
    NUMBA = False

_HERE = Path(__file__).parent
SOURCES = sorted(_HERE.glob("lite_*.py")) + [_HERE / "spec.py", _HERE / "scene.py", _HERE / "doors.py"]


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in SOURCES:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _kernel_cache_class():
    """A numba function cache whose freshness stamp is the hash of every kernel source."""
    from numba.core import caching

    stamp = _sources_hash()

    def stamped(base: type) -> type:
        return type(f"Kernel{base.__name__}", (base,), {"get_source_stamp": lambda self: stamp})

    class KernelCacheImpl(caching.CompileResultCacheImpl):
        _locator_classes: ClassVar[list[type]] = [stamped(cls) for cls in caching.CompileResultCacheImpl._locator_classes]

    class KernelCache(caching.FunctionCache):
        _impl_class = KernelCacheImpl

    return KernelCache


_CACHE_CLASS = None
if NUMBA:
    try:
        _CACHE_CLASS = _kernel_cache_class()
    except (AttributeError, ImportError, TypeError):
        _CACHE_CLASS = None


def njit(fn: F) -> F:
    """Compile ``fn`` with numba (cached on disk), or return it unchanged without numba."""
    if not NUMBA:
        return fn
    if _CACHE_CLASS is None:
        return numba.njit(cache=True, nogil=True)(fn)
    dispatcher = numba.njit(nogil=True)(fn)
    dispatcher._cache = _CACHE_CLASS(fn)
    return dispatcher
