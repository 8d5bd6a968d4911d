"""Several policies in one experiment: their names, the agents each plays, and each one's own view.

An experiment without ``policies`` has one policy, ``DEFAULT``, built from its ``policy``, ``ppo``,
``trainer`` and ``algorithm`` sections: every single-policy config keeps working unchanged. With
``policies``, each entry gets its own trainer worker(s), parameter stream, checkpoints and books,
and ``policy_mapping`` says which policy plays each agent.

``for_policy(config, name)`` is the config one policy's trainer and inference see: the experiment
with that policy's network, PPO settings, algorithm, trainer count and device in the single-policy
sections, so the learner, the algorithm and the trainer need not know there are others.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from srl_lab.config import ConfigError, ExperimentConfig, PolicyConfig, PoolConfig

DEFAULT = "default"


def policy_ids(config: ExperimentConfig) -> tuple[str, ...]:
    """The experiment's policy names, in the order their trainers are started."""
    return tuple(config.policies) or (DEFAULT,)


def is_multi_policy(config: ExperimentConfig) -> bool:
    return bool(config.policies)


def for_policy(config: ExperimentConfig, name: str) -> ExperimentConfig:
    """The experiment as policy ``name``'s trainer sees it (itself for a single-policy experiment)."""
    if not config.policies:
        if name != DEFAULT:
            raise KeyError(f"no policy {name!r}: this experiment has one policy, {DEFAULT!r}")
        return config
    spec = config.policies[name]
    trainer = dataclasses.replace(config.trainer, trainers=spec.trainers, device=spec.device,
                                  batch_steps=spec.batch_steps or config.trainer.batch_steps)
    return dataclasses.replace(config, policy=PolicyConfig(hidden=tuple(spec.hidden), factory=spec.factory,
                                                           pool=spec.pool),
                               ppo=spec.ppo or config.ppo, trainer=trainer,
                               algorithm=spec.algorithm or config.algorithm)


def mapping_of(config: ExperimentConfig) -> Callable[[str], str]:
    """Agent id -> policy name (every agent plays ``DEFAULT`` in a single-policy experiment)."""
    mapping = config.policy_mapping
    if not config.policies:
        return lambda agent: DEFAULT
    if isinstance(mapping, dict):
        return lambda agent: mapping[agent]
    return mapping  # type: ignore[return-value]


def return_key(config: ExperimentConfig) -> str:
    """The episode key of a run's headline return: its first policy's when it has several."""
    return f"return/{policy_ids(config)[0]}" if config.policies else "return"


def trainer_slots(config: ExperimentConfig) -> list[tuple[str, int]]:
    """``(policy, rank)`` of every trainer worker; the list index is its ``trainer-<i>`` number."""
    return [(name, rank) for name in policy_ids(config) for rank in range(for_policy(config, name).trainer.trainers)]


def most_trainers(config: ExperimentConfig) -> int:
    """The largest data-parallel trainer group of any policy: actor ``i`` feeds rank ``i % trainers``,
    so fewer actor workers than this leave a rank that never fills a batch, and every rank waits on it."""
    return max(for_policy(config, name).trainer.trainers for name in policy_ids(config))


def policy_worker_slots(config: ExperimentConfig) -> list[tuple[str, int]]:
    """``(policy, index)`` of every policy worker (remote inference: each policy has its own)."""
    if config.inference.mode != "remote":
        return []
    return [(name, i) for name in policy_ids(config) for i in range(config.inference.policy_workers)]


def service(kind: str, policy: str, index: int = 0) -> str:
    """A data-plane endpoint's name: ``params``, ``samples``, ``policy`` (+ index, + policy name).

    The single policy's names are those of single-policy runs (``params``, ``samples-1``, ``policy-0``).
    """
    suffix = "" if policy == DEFAULT else f"@{policy}"
    if kind == "params":
        return "params" + suffix
    if kind == "samples":
        return ("samples" if index == 0 else f"samples-{index}") + suffix
    if kind == "policy":
        return f"policy-{index}" + suffix
    raise ValueError(f"unknown service kind {kind!r}")


def check_pool(pool: PoolConfig | None, field: str) -> None:
    """``ConfigError`` naming the pool setting that cannot work."""
    if pool is None:
        return
    for name in ("every_versions", "size", "swap_steps"):
        value = getattr(pool, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{field}.{name}", f"must be a positive integer, got {value!r}", "e.g. 10")
    if not isinstance(pool.envs_fraction, (int, float)) or not 0 < pool.envs_fraction <= 1:
        raise ConfigError(f"{field}.envs_fraction", f"must be in (0, 1], got {pool.envs_fraction!r}",
                          "the share of envs where a past version plays, e.g. 0.5")
    if pool.sampling not in ("latest", "uniform", "win_rate"):
        raise ConfigError(f"{field}.sampling", f"unknown sampling {pool.sampling!r}",
                          "use 'latest', 'uniform' or 'win_rate'")


def check_policies(config: ExperimentConfig) -> None:
    """Raise ``ConfigError`` for a policy set that cannot work, naming the field."""
    check_pool(config.policy.pool, "policy.pool")
    if not config.policies:
        if config.policy_mapping is not None:
            raise ConfigError("policy_mapping", "a mapping was given but no policies",
                              "name the policies in ExperimentConfig.policies, or drop policy_mapping")
        return
    if config.policy.mapping != "shared":
        raise ConfigError("policy.mapping", "per_team networks and several policies do not mix",
                          "give each team its own entry in policies and map its agents to it")
    for name, spec in config.policies.items():
        field = f"policies[{name!r}]"
        if not isinstance(name, str) or not name or "@" in name or "/" in name:
            raise ConfigError(field, "a policy name must be a non-empty string without '@' or '/'", "e.g. 'hider'")
        if not isinstance(spec.trainers, int) or isinstance(spec.trainers, bool) or spec.trainers < 1:
            raise ConfigError(f"{field}.trainers", f"must be a positive integer, got {spec.trainers!r}", "e.g. 1")
        if not (spec.device == "cpu" or str(spec.device).startswith("cuda")):
            raise ConfigError(f"{field}.device", f"unknown device {spec.device!r}", "use 'cpu' or 'cuda'")
        if spec.batch_steps is not None and (not isinstance(spec.batch_steps, int) or spec.batch_steps < 1):
            raise ConfigError(f"{field}.batch_steps", f"must be a positive integer or None, got {spec.batch_steps!r}",
                              "None uses trainer.batch_steps")
        check_pool(spec.pool, f"{field}.pool")
        if spec.ppo is not None:
            from srl_lab.config import _check_ppo

            _check_ppo(spec.ppo, config.actors.fragment_length)
    mapping = config.policy_mapping
    if mapping is None or not (callable(mapping) or isinstance(mapping, dict)):
        raise ConfigError("policy_mapping", f"several policies need a mapping from agent id to policy, got {mapping!r}",
                          "e.g. policy_mapping=lambda agent: agent.split('_')[0], or a dict")


def check_mapping(config: ExperimentConfig, agents: tuple[str, ...]) -> dict[str, str]:
    """Agent -> policy for every agent of the env; ``ConfigError`` for an agent mapped to no known policy."""
    policy_of = mapping_of(config)
    known = policy_ids(config)
    assigned: dict[str, str] = {}
    for agent in agents:
        try:
            name = policy_of(agent)
        except Exception as exc:
            raise ConfigError("policy_mapping", f"mapping agent {agent!r} raised {exc!r}",
                              f"map every agent of the env ({', '.join(agents)}) to one of {list(known)}") from exc
        if name not in known:
            raise ConfigError("policy_mapping", f"agent {agent!r} is mapped to {name!r}, which is not a policy",
                              f"map it to one of {list(known)}")
        assigned[agent] = name
    unused = [name for name in known if name not in assigned.values()]
    if unused:
        raise ConfigError("policies", f"no agent plays {unused[0]!r}", "map some agent to it or remove it")
    return assigned
