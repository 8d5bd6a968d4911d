"""Build env groups and policies from an ``ExperimentConfig``, and check they fit together."""
from __future__ import annotations

import difflib
import functools
from typing import TYPE_CHECKING

import gymnasium as gym

from srl_lab.api.env import EnvGroup
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
    if env.factory is not None:
        return GymEnvGroup(functools.partial(env.factory, **env.kwargs), num_envs, seed)
    registry = _registry()
    if registry.is_registered(env.id):
        return registry.make(env.id, num_envs, seed=seed, **env.kwargs)
    make = functools.partial(gym.make, env.id, disable_env_checker=True, **env.kwargs)
    return GymEnvGroup(make, num_envs, seed)


def make_policy(config: "ExperimentConfig", observation_space: gym.Space, action_space: gym.Space
                ) -> Policy:
    """The network of ``config.policy``; with ``mapping="per_team"`` one per team (``models.team``)."""
    def build() -> Policy:
        if config.policy.factory is not None:
            return config.policy.factory(observation_space, action_space)
        from srl_lab.models.mlp import MLPPolicy

        return MLPPolicy(observation_space, action_space, tuple(config.policy.hidden))

    if config.policy.mapping != "per_team":
        return build()
    from srl_lab.models.team import team_policies

    probe = make_env_group(config, 1)
    try:
        agent_teams, team_of = getattr(probe, "agent_teams", None), getattr(probe, "team_of", None)
        team_names = getattr(probe, "team_names", None)
    finally:
        probe.close()
    if agent_teams is None or team_of is None:
        raise ValueError(f"policy.mapping='per_team' needs an environment that names each agent's team "
                         f"(agent_teams and team_of, as hide_and_seek_lite has); {type(probe).__name__} does not. "
                         "Use policy.mapping='shared'")
    return team_policies(build, agent_teams, team_of, team_names)


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
        policy = make_policy(config, group.observation_space, group.action_space)
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
