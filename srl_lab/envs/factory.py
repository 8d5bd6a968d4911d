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
from srl_lab.policies import DEFAULT, for_policy, policy_ids

if TYPE_CHECKING:
    from srl_lab.config import ExperimentConfig
    from srl_lab.system.policy_views import EnvSplit


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
        make = functools.partial(env.factory, **env.kwargs)
        first = make()
        if _is_pettingzoo(first):
            from srl_lab.envs.pettingzoo_group import PettingZooGroup

            return PettingZooGroup(make, num_envs, seed, first=first)
        first.close()
        return GymEnvGroup(make, num_envs, seed)
    registry = _registry()
    if registry.is_registered(env.id):
        return registry.make(env.id, num_envs, seed=seed, **env.kwargs)
    make = functools.partial(gym.make, env.id, disable_env_checker=True, **env.kwargs)
    return GymEnvGroup(make, num_envs, seed)


def _is_pettingzoo(env: object) -> bool:
    """A PettingZoo env (parallel or AEC) comes in keyed by agent (``envs.pettingzoo_group``)."""
    from srl_lab.envs.pettingzoo_group import is_pettingzoo

    return is_pettingzoo(env)


def make_split(config: "ExperimentConfig", num_envs: int, seed: int | None = None) -> "EnvSplit":
    """An env group of ``config`` split into one view per policy (``system.policy_views``)."""
    from srl_lab.system.policy_views import split

    group = make_env_group(config, num_envs, seed)
    try:
        return split(config, group)
    except Exception:
        group.close()
        raise


@dataclass(frozen=True, eq=False)
class EnvProbe:
    """What a process without envs of its own (trainer, policy worker) needs to know about the env."""

    observation_space: gym.Space  # per agent
    action_space: gym.Space  # per agent
    extras: EnvExtras  # teams, phases (``trained_rows`` is that of the group described)
    env_type: str  # the env group's class name, for messages


def describe(group: EnvGroup) -> EnvProbe:
    """The spaces and optional attributes of an env group (or one policy's view of one) at hand."""
    return EnvProbe(group.observation_space, group.action_space, extras(group), type(group).__name__)


def probe_env(config: "ExperimentConfig", policy: str = DEFAULT) -> EnvProbe:
    """Build one env of ``config`` only to ``describe`` ``policy``'s rows, then close it."""
    env = make_split(config, 1)
    try:
        return describe(env.views[policy])
    finally:
        env.close()


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
        from srl_lab.system.policy_views import split

        env = split(config, group)
    except Exception:
        group.close()
        raise
    try:
        for name in policy_ids(config):
            _check_policy(for_policy(config, name), env.views[name],
                          "" if name == DEFAULT else f"policies[{name!r}].")
    finally:
        env.close()


def _check_policy(config: "ExperimentConfig", view: EnvGroup, prefix: str) -> None:
    """Build one policy for its rows of the env; ``prefix`` names it in errors (several policies)."""
    from srl_lab.config import ConfigError

    try:
        policy = make_policy(config, view.observation_space, view.action_space, describe(view))
    except Exception as exc:
        raise ConfigError(prefix + "policy" if not prefix else prefix + "factory",
                          f"building the policy failed: {exc!r}", "check the policy's factory / hidden") from exc
    if config.policy.pool is not None and policy.recurrent:
        raise ConfigError(prefix + "pool" if prefix else "policy.pool", "past versions play feed-forward policies "
                          "only; this one is recurrent", "drop the pool or use a feed-forward network")
    if config.ppo.norm_obs and config.algorithm is None and not hasattr(policy, "obs_normalizer"):
        raise ConfigError(prefix + "ppo.norm_obs", f"{type(policy).__name__} has no obs_normalizer to normalise "
                          "observations", "build the network on srl_lab.models.actor_critic.ActorCriticPolicy, "
                          "or set norm_obs=False")
    for what in ("observation_space", "action_space"):
        expected, actual = getattr(policy, what), getattr(view, what)
        if not spaces_compatible(expected, actual):
            raise ConfigError(prefix + f"policy.{what}",
                              f"the policy expects {expected} but the environment gives {actual}",
                              "build the policy from the spaces the factory receives")
