"""An ``ExperimentConfig`` to and from JSON (``config.json`` in every run directory).

Callables (factories, mappings, algorithms) are recorded by name and cannot be restored: they come
back None. ``Run.resume`` therefore takes the exact config pickled in a checkpoint when there is one.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from srl_lab.config import (ActorConfig, ConfigError, EnvConfig, ExperimentConfig, InferenceConfig, PolicyConfig,
                            PolicySpec, PoolConfig, PPOConfig, TrainerConfig)

SECTIONS = {"env": EnvConfig, "actors": ActorConfig, "inference": InferenceConfig, "trainer": TrainerConfig,
            "ppo": PPOConfig, "policy": PolicyConfig}


def jsonable(value: Any) -> Any:
    """``value`` with every callable replaced by ``"<callable its-name>"``."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    return value


def config_from_dict(d: dict[str, Any]) -> ExperimentConfig:
    """The config ``ExperimentConfig.to_dict`` wrote; ``ConfigError`` names an unknown section or field."""
    sections = {f.name for f in dataclasses.fields(ExperimentConfig)}
    kwargs: dict[str, Any] = {}
    for key, value in d.items():
        if key not in sections:
            raise ConfigError(key, "unknown config section", f"use one of {sorted(sections)}")
        if key == "policies":
            kwargs[key] = {name: _section(PolicySpec, f"policies[{name!r}]", spec) for name, spec in value.items()}
        elif key in SECTIONS:
            kwargs[key] = _section(SECTIONS[key], key, value)
        else:
            kwargs[key] = None if _is_callable_marker(value) else value
    return ExperimentConfig(**kwargs)


def _section(cls: type, name: str, value: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(value) - names
    if unknown:
        raise ConfigError(f"{name}.{sorted(unknown)[0]}", "unknown field", f"use one of {sorted(names)}")
    value = {k: (None if _is_callable_marker(v) else v) for k, v in value.items()}
    if "hidden" in value:
        value["hidden"] = tuple(value["hidden"])
    if value.get("pool"):
        value["pool"] = PoolConfig(**value["pool"])
    if value.get("ppo"):
        value["ppo"] = PPOConfig(**value["ppo"])
    return cls(**value)


def _is_callable_marker(value: Any) -> bool:
    """``jsonable`` records callables as ``"<callable name>"``; they cannot be restored from JSON."""
    return isinstance(value, str) and value.startswith("<callable")
