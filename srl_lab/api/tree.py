"""Tiny helpers for nested dicts of arrays (observations may be an array or a dict of arrays)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf-wise over one or more trees with the same structure."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in tree.items()}
    return fn(tree, *rest)


def tree_stack(trees: Sequence[Any], axis: int = 0) -> Any:
    return tree_map(lambda *leaves: np.stack(leaves, axis=axis), *trees) if trees else None


def tree_concat(trees: Sequence[Any], axis: int = 0) -> Any:
    return tree_map(lambda *leaves: np.concatenate(leaves, axis=axis), *trees)


def tree_first_leaf(tree: Any) -> Any:
    while isinstance(tree, dict):
        tree = next(iter(tree.values()))
    return tree
