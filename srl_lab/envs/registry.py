"""Named batched environments: ``make(name, num_envs)`` builds an ``EnvGroup``.

The runtime asks this registry first for an env id, so registering a factory here is how a new
srl_lab environment becomes usable from an experiment config. Factories import their module
lazily: looking a name up never pulls in heavy dependencies.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from srl_lab.api.env import EnvGroup

Factory = Callable[..., EnvGroup]  # factory(num_envs, seed=None, **kwargs)

_FACTORIES: dict[str, Factory] = {}


def register(name: str, factory: Factory) -> None:
    """Make ``factory(num_envs, seed=..., **kwargs)`` available as ``name`` (replacing any previous one)."""
    _FACTORIES[name] = factory


def is_registered(name: str | None) -> bool:
    return name in _FACTORIES


def names() -> list[str]:
    return sorted(_FACTORIES)


def make(name: str, num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    """Build ``num_envs`` environments of the registered ``name``."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"no environment registered as {name!r}; known: {', '.join(names())}") from None
    return factory(num_envs, seed=seed, **kwargs)


def _hide_and_seek_lite(num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite

    return HideAndSeekLite(num_envs, seed=seed, **kwargs)


def _hide_and_seek_mujoco(num_envs: int, seed: int | None = None, **kwargs: Any) -> EnvGroup:
    try:
        import mujoco  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "the 'hide_and_seek' environment needs MuJoCo: pip install srl_lab[mujoco] "
            "(or use 'hide_and_seek_lite')"
        ) from exc
    from srl_lab.envs.hide_and_seek.mujoco_env import HideAndSeekMujoco

    return HideAndSeekMujoco(num_envs, seed=seed, **kwargs)


register("hide_and_seek_lite", _hide_and_seek_lite)
register("hide_and_seek", _hide_and_seek_mujoco)
