"""Head-to-head evaluation: trained policies or uniform random actions play each team.

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


def play(hider: Policy | None, seeker: Policy | None, episodes: int, seed: int = 0, num_envs: int = 64,
         **env_kwargs) -> float:
    """Mean ``hidden_fraction`` over ``episodes`` episodes of ``hider`` against ``seeker``.

    Each team is played by its policy (sampling its actions), or by uniform random actions where it is
    None. A recurrent policy keeps its state per row, zeroed where an episode ends. The same seed
    gives the same scenes to every pairing, and the same policy the same figure: its sampling draws
    from torch's generator seeded here (the caller's generator state is restored afterwards).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _play(hider, seeker, episodes, seed, num_envs, **env_kwargs)


def _play(hider: Policy | None, seeker: Policy | None, episodes: int, seed: int, num_envs: int,
          **env_kwargs) -> float:
    # This function decides who plays randomly: a training-time opponent mix does not apply.
    env = HideAndSeekLite(num_envs, seed=seed, **{**env_kwargs, "random_opponents": 0.0})
    n_hiders, n_agents = env.layout.n_hiders, env.num_agents
    teams = [(hider, slice(0, n_hiders)), (seeker, slice(n_hiders, n_agents))]
    rng = np.random.default_rng(seed)
    nvec = np.asarray(env.action_space.nvec)
    obs = env.reset(seed=seed)
    states = {id(p): p.initial_state(num_envs * n_agents) for p, _ in teams if p is not None and p.recurrent}
    fractions: list[float] = []
    while len(fractions) < episodes:
        actions = (rng.random((num_envs, n_agents, len(nvec))) * nvec).astype(np.int64)
        rows = None
        chosen: dict[int, np.ndarray] = {}  # one step per policy, also where it plays both teams
        for policy, team_rows in teams:
            if policy is None:
                continue
            if id(policy) not in chosen:
                if rows is None:
                    rows = obs_to_tensor(flatten_rows(obs, num_envs * n_agents))
                act = policy.act(rows, states.get(id(policy)))
                chosen[id(policy)] = act.actions.numpy().reshape(num_envs, n_agents, -1)
                if act.state is not None:
                    states[id(policy)] = act.state
            actions[:, team_rows] = chosen[id(policy)][:, team_rows]
        result = env.step(actions)
        ended = torch.from_numpy(np.repeat(result.terminated | result.truncated, n_agents))
        for state in states.values():
            state[ended] = 0.0
        fractions.extend(e["hidden_fraction"] for e in result.episodes)
        obs = result.obs
    env.close()
    return float(np.mean(fractions[:episodes]))


def hidden_fraction(policy: Policy | None, trained_team: Team | None, episodes: int, seed: int = 0,
                    num_envs: int = 64, **env_kwargs) -> float:
    """``play`` with ``policy`` as ``trained_team`` and random actions for the other team (both: None)."""
    hider = policy if trained_team == "hider" else None
    seeker = policy if trained_team == "seeker" else None
    return play(hider, seeker, episodes, seed, num_envs, **env_kwargs)


def gains(policy: Policy, episodes: int, seed: int = 12345, **env_kwargs) -> dict[str, float]:
    """What training bought each team, in percentage points of play steps (same seeds for every arm).

    - ``seeker_gain_pts``: how much more often the trained seeker sees a random hider than a random
      seeker does;
    - ``hider_gain_pts``: against the trained seeker, how much more often the trained hider stays
      hidden than a random hider does.
    """
    def arm(hider: Policy | None, seeker: Policy | None) -> float:
        return play(hider, seeker, episodes, seed, **env_kwargs)

    random_vs_random, random_hider_vs_trained = arm(None, None), arm(None, policy)
    trained_vs_trained = arm(policy, policy)
    return {"seeker_gain_pts": 100 * (random_vs_random - random_hider_vs_trained),
            "hider_gain_pts": 100 * (trained_vs_trained - random_hider_vs_trained),
            "hidden_fraction": {"random_vs_random": random_vs_random,
                                "random_hider_vs_trained_seeker": random_hider_vs_trained,
                                "trained_vs_trained": trained_vs_trained},
            "episodes_per_arm": episodes}
