"""Head-to-head evaluation: a trained policy plays one team, uniform random actions the other.

The signal is the episode statistic ``hidden_fraction`` (fraction of play steps with every hider
hidden). A trained seeker should lower it against random hiders; a trained hider should raise it
against random seekers; both compared with random against random on the same seeds.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.system.actor_ring import flatten_rows

Team = Literal["hider", "seeker"]


def hidden_fraction(policy: Policy | None, trained_team: Team | None, episodes: int, seed: int = 0,
                    num_envs: int = 64, **env_kwargs) -> float:
    """Mean ``hidden_fraction`` over ``episodes`` episodes; ``policy=None`` plays both teams randomly."""
    # This function decides who plays randomly: a training-time opponent mix does not apply.
    env = HideAndSeekLite(num_envs, seed=seed, **{**env_kwargs, "random_opponents": 0.0})
    n_hiders, n_agents = env.layout.n_hiders, env.num_agents
    team_rows = slice(0, n_hiders) if trained_team == "hider" else slice(n_hiders, n_agents)
    rng = np.random.default_rng(seed)
    nvec = np.asarray(env.action_space.nvec)
    obs = env.reset(seed=seed)
    fractions: list[float] = []
    while len(fractions) < episodes:
        actions = (rng.random((num_envs, n_agents, len(nvec))) * nvec).astype(np.int64)
        if policy is not None:
            with torch.no_grad():
                chosen, _, _ = policy.act(obs_to_tensor(flatten_rows(obs, num_envs * n_agents)))
            chosen = chosen.numpy().reshape(num_envs, n_agents, -1)
            actions[:, team_rows] = chosen[:, team_rows]
        result = env.step(actions)
        fractions.extend(e["hidden_fraction"] for e in result.episodes)
        obs = result.obs
    env.close()
    return float(np.mean(fractions[:episodes]))
