"""Build env groups and policies from an ``ExperimentConfig``, and check they fit together."""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium as gym

from srl_lab.api.env import EnvExtras, EnvGroup, extras
from srl_lab.api.policy import Policy, spaces_compatible
from srl_lab.envs.gym_group import GymEnvGroup

if TYPE_CHECKING:
    from srl_lab.config import ExperimentConfig


def _registry():
    from srl_lab.envs import registry

    return registry


def make_env_group(config: "ExperimentConfig", num_envs: int, seed: int | None = None) -> EnvGroup:
    """A batch of ``num_envs`` envs: a registered srl_lab env, a gymnasium id, or a factory."""
    env = config.env
    if env.vector:
        from srl_lab.envs.vector_group import VectorEnvGroup

        vector_env = (env.factory(num_envs=num_envs, **env.kwargs) if env.factory is not None else
                      gym.make_vec(env.id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env.kwargs))
        return VectorEnvGroup(vector_env, seed)
    if env.factory is not None:
        return GymEnvGroup(functools.partial(env.factory, **env.kwargs), num_envs, seed)
    registry = _registry()
    if registry.is_registered(env.id):
        return registry.make(env.id, num_envs, seed=seed, **env.kwargs)
    make = functools.partial(gym.make, env.id, disable_env_checker=True, **env.kwargs)
    return GymEnvGroup(make, num_envs, seed)


@dataclass(frozen=True, eq=False)
class EnvProbe:
    """What a process without envs of its own (trainer, policy worker) needs to know about the env."""

    observation_space: gym.Space  # per agent
    action_space: gym.Space  # per agent
    extras: EnvExtras  # teams, phases (``trained_rows`` is that of the group described)
    env_type: str  # the env group's class name, for messages


def describe(group: EnvGroup) -> EnvProbe:
    """The spaces and optional attributes of an env group at hand."""
    return EnvProbe(group.observation_space, group.action_space, extras(group), type(group).__name__)


def probe_env(config: "ExperimentConfig") -> EnvProbe:
    """Build one env of ``config`` only to ``describe`` it, then close it: one probe per caller."""
    group = make_env_group(config, 1)
    try:
        return describe(group)
    finally:
        group.close()


def make_policy(config: "ExperimentConfig", observation_space: gym.Space, action_space: gym.Space,
                probe: EnvProbe | None = None) -> Policy:
    """The network of ``config.policy``; with ``mapping="per_team"`` one per team (``models.team``).

    A per-team policy reads the teams from ``probe`` (``describe`` of an env at hand, or
    ``probe_env``); without one it probes an env of ``config`` itself.
    """
    def build() -> Policy:
        if config.policy.factory is not None:
            return config.policy.factory(observation_space, action_space)
        from srl_lab.models.mlp import MLPPolicy

        return MLPPolicy(observation_space, action_space, tuple(config.policy.hidden))

    if config.policy.mapping != "per_team":
        return build()
    from srl_lab.models.team import team_policies

    probe = probe or probe_env(config)
    teams = probe.extras
    if not teams.has_teams:
        raise ValueError(f"policy.mapping='per_team' needs an environment that names each agent's team "
                         f"(agent_teams and team_of, as hide_and_seek_lite has); {probe.env_type} does not. "
                         "Use policy.mapping='shared'")
    return team_policies(build, teams.agent_teams, teams.team_of, teams.team_names)


def check_env_and_policy(config: "ExperimentConfig") -> None:
    """Build one env and the policy locally; raise ``ConfigError`` naming the field that is wrong."""
    from srl_lab.config import ConfigError

    if config.env.id is not None and not _registry().is_registered(config.env.id):
        if config.env.id not in gym.registry:
            known = list(gym.registry) + list(_registry().names())
            close = difflib.get_close_matches(config.env.id, known, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "register it or pass env.factory"
            raise ConfigError("env.id", f"unknown environment id {config.env.id!r}", hint)
    try:
        group = make_env_group(config, 1, seed=config.seed)
    except Exception as exc:
        raise ConfigError("env", f"building the environment failed: {exc!r}",
                          "check env.id / env.factory and env.kwargs") from exc
    try:
        policy = make_policy(config, group.observation_space, group.action_space, describe(group))
    except Exception as exc:
        raise ConfigError("policy", f"building the policy failed: {exc!r}",
                          "check policy.factory / policy.hidden") from exc
    finally:
        group.close()
    if config.ppo.norm_obs and config.algorithm is None and not hasattr(policy, "obs_normalizer"):
        raise ConfigError("ppo.norm_obs", f"{type(policy).__name__} has no obs_normalizer to normalise observations",
                          "build the network on srl_lab.models.actor_critic.ActorCriticPolicy, or set norm_obs=False")
    for what in ("observation_space", "action_space"):
        expected, actual = getattr(policy, what), getattr(group, what)
        if not spaces_compatible(expected, actual):
            raise ConfigError(f"policy.{what}",
                              f"the policy expects {expected} but the environment gives {actual}",
                              "build the policy from the spaces policy.factory receives")
