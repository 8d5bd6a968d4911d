"""Names of srl_lab's own batched environments, usable as ``env.id`` in experiment configs.

``make(name, num_envs, seed, **kwargs)`` returns an ``EnvGroup``. Names not found here are looked up
in gymnasium's registry by the runtime.
"""
from __future__ import annotations

from typing import Any, Callable

from srl_lab.api.env import EnvGroup

_FACTORIES: dict[str, Callable[..., EnvGroup]] = {}


def register(name: str, factory: Callable[..., EnvGroup]) -> None:
    """``factory(num_envs, seed=None, **kwargs) -> EnvGroup``."""
    _FACTORIES[name] = factory


def is_registered(name: str | None) -> bool:
    return name in _FACTORIES


def names() -> list[str]:
    return sorted(_FACTORIES)


def make(name: str, num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    if name not in _FACTORIES:
        raise KeyError(f"unknown srl_lab environment {name!r}; known: {names()}")
    return _FACTORIES[name](num_envs, seed=seed, **kwargs)


def _lite(num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite

    return HideAndSeekLite(num_envs, seed=seed, **kwargs)


def _mujoco(num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    try:
        from srl_lab.envs.hide_and_seek.mujoco_env import HideAndSeekMujoco
    except ImportError as exc:
        raise ImportError("the faithful hide-and-seek variant needs MuJoCo: "
                          "pip install 'srl_lab[mujoco]'") from exc
    return HideAndSeekMujoco(num_envs, seed=seed, **kwargs)


register("hide_and_seek_lite", _lite)
register("hide_and_seek", _mujoco)
