"""Several policies on a real cluster: a PettingZoo env written here, shipped by value, two agent types.

``PointAndMatch`` has a ``pointer`` (observation: a one-hot target of 3, action: Discrete(3), reward
+1 for pointing at the target) that leaves the episode after ``POINTER_STEPS`` steps, and a
``matcher`` (observation: a 2 x 2 picture of a bit, action: Discrete(2), reward +1 for naming the
bit) that stays for all ``HORIZON`` steps. Their observation shapes differ, so they need two
policies. Uniformly random play scores POINTER_STEPS / 3 = 1.7 and HORIZON / 2 = 4.0; a policy that
reads its observation scores 5 and 8. The thresholds (4.0 and 7.0) are far above random and need
each policy to have learned its own mapping, which neither can learn from the other's rows.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv

from srl_lab.config import (ActorConfig, ConfigError, EnvConfig, ExperimentConfig, InferenceConfig, PolicySpec,
                            PPOConfig, TrainerConfig)
from srl_lab.envs.factory import make_split
from srl_lab.system.controller import Run, launch
from srl_lab.system.fragments import check_spaces

POINTER_STEPS, HORIZON = 5, 8


class PointAndMatch(ParallelEnv):
    metadata = {"name": "point_and_match_v0", "is_parallelizable": True}
    render_mode = None

    def __init__(self):
        self.possible_agents = ["pointer", "matcher"]
        self.agents: list[str] = []
        self.rng = np.random.default_rng()

    def observation_space(self, agent: str) -> gym.Space:
        return gym.spaces.Box(0, 1, (3,) if agent == "pointer" else (2, 2), np.float32)

    def action_space(self, agent: str) -> gym.Space:
        return gym.spaces.Discrete(3 if agent == "pointer" else 2)

    def _observe(self) -> dict[str, np.ndarray]:
        self.target, self.bit = int(self.rng.integers(3)), int(self.rng.integers(2))
        picture = np.zeros((2, 2), np.float32)
        picture[self.bit] = 1.0
        obs = {"pointer": np.eye(3, dtype=np.float32)[self.target], "matcher": picture}
        return {a: obs[a] for a in self.agents}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents, self.t = list(self.possible_agents), 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        rewards = {"pointer": float(actions.get("pointer") == self.target),
                   "matcher": float(actions.get("matcher") == self.bit)}
        self.t += 1
        terminated = {a: a == "pointer" and self.t >= POINTER_STEPS for a in self.agents}
        truncated = {a: self.t >= HORIZON for a in self.agents}
        rewards = {a: rewards[a] for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        obs = self._observe()
        return obs, rewards, terminated, truncated, {a: {} for a in terminated}


def config(**overrides) -> ExperimentConfig:
    ppo = PPOConfig(lr=3e-3, epochs=4, minibatch_size=256, ent_coef=0.0)
    base = dict(name="point-and-match", env=EnvConfig(id=None, factory=PointAndMatch),
                actors=ActorConfig(workers=1, ring_size=2, envs_per_group=8, fragment_length=16),
                trainer=TrainerConfig(batch_steps=512),
                policies={"pointer": PolicySpec(hidden=(32,), ppo=ppo), "matcher": PolicySpec(hidden=(16,), ppo=ppo)},
                policy_mapping={"pointer": "pointer", "matcher": "matcher"}, metrics_interval_s=0.5)
    return ExperimentConfig(**{**base, **overrides})


def test_each_policy_plays_its_own_rows_with_its_own_spaces():
    env = make_split(config(), 4, seed=0)
    try:
        obs = env.reset()
        assert obs["pointer"].shape == (4, 1, 3) and obs["matcher"].shape == (4, 1, 2, 2)
        for t in range(1, HORIZON + 1):
            results = env.step({"pointer": np.zeros((4, 1), np.int64), "matcher": np.zeros((4, 1), np.int64)})
            pointer, matcher = results["pointer"], results["matcher"]
            # the pointer acted in steps 1..POINTER_STEPS and ended on its own in the last of them
            assert pointer.valid.all() == (t <= POINTER_STEPS), t
            assert pointer.agent_terminated.all() == (t == POINTER_STEPS), t
            assert matcher.valid.all() and not matcher.agent_terminated.any()
            assert matcher.agent_truncated.all() == (t == HORIZON), t
        assert [e["length"] for e in matcher.episodes] == [HORIZON] * 4
        assert all(set(e) >= {"return", "return/matcher"} for e in matcher.episodes)
    finally:
        env.close()


def test_a_trainer_takes_only_rows_shaped_like_its_policys_spaces():
    env = PointAndMatch()
    spaces = {agent: (env.observation_space(agent), env.action_space(agent)) for agent in env.possible_agents}
    for agent, other in (("pointer", "matcher"), ("matcher", "pointer")):
        rows = {"obs": np.zeros((16, 8, *spaces[agent][0].shape), np.float32), "actions": np.zeros((16, 8), np.int64)}
        assert check_spaces(rows, *spaces[agent]) is None
        assert "obs rows have shape" in check_spaces(rows, *spaces[other])
    wrong_actions = {"obs": np.zeros((16, 8, 3), np.float32), "actions": np.zeros((16, 8, 2), np.int64)}
    assert "actions rows have shape (2,)" in check_spaces(wrong_actions, *spaces["pointer"])


def test_a_mapping_to_no_known_policy_names_the_agent():
    with pytest.raises(ConfigError, match="policy_mapping.*'matcher' is mapped to 'nobody'"):
        config(policy_mapping={"pointer": "pointer", "matcher": "nobody"}).validate()
    with pytest.raises(ConfigError, match="policy_mapping.*spaces differ"):
        ExperimentConfig(env=EnvConfig(id=None, factory=PointAndMatch)).validate()  # one policy for both


@pytest.mark.timeout(300)
def test_two_policies_each_learn_their_agents_with_their_own_books(dask_client, tmp_path):
    run = launch(config(), client=dask_client, run_dir=str(tmp_path / "run"))
    try:
        run.wait(env_steps=2000, seconds=60, progress=False)
        assert run.scale(actors=2)["actors"] == 2  # the actor control scales a run of several policies live
        deadline_reached = _wait_until_learned(run, timeout_s=150)
        assert sum(w["role"] == "actor" for w in run.status()["workers"]) == 2
    finally:
        result = run.stop()
    assert deadline_reached, result
    for policy in ("pointer", "matcher"):
        books = result["policies"][policy]
        assert books["fragments_produced"] > 0 and books["version"] > 0, result
        assert books["fragments_produced"] == books["fragments_consumed"] + books["dropped_stale"], result
    assert result["policies"]["pointer"]["mean_return_last_20"] >= 4.0, result
    assert result["policies"]["matcher"]["mean_return_last_20"] >= 7.0, result
    # trainers refuse rows not shaped like their policy's spaces: every fragment carried only its policy's rows
    assert result["rejected"] == 0, result
    assert set(run.final_weights_by_policy) == {"pointer", "matcher"}
    folders = sorted(p.name for p in (tmp_path / "run").iterdir() if p.name.startswith("checkpoints"))
    assert folders == ["checkpoints@matcher", "checkpoints@pointer"]  # no empty single-policy folder


def _wait_until_learned(run, timeout_s: float) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pointer = run.metrics.mean_return(20, "return/pointer")
        matcher = run.metrics.mean_return(20, "return/matcher")
        if pointer >= 4.5 and matcher >= 7.5:
            return True
        time.sleep(0.5)
    return False


def knights_and_archers():
    """PettingZoo's knights-archers-zombies, where a knight or archer a zombie reaches leaves the episode."""
    import os

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from pettingzoo.butterfly import knights_archers_zombies_v11

    return knights_archers_zombies_v11.parallel_env(line_death=True, spawn_delay=1, max_cycles=40)


@pytest.mark.timeout(300)
def test_a_pettingzoo_package_env_trains_two_policies_remotely_and_resumes_both(dask_client, tmp_path):
    run_dir = str(tmp_path / "kaz")
    cfg = config(name="kaz", env=EnvConfig(id=None, factory=knights_and_archers),
                 inference=InferenceConfig(mode="remote"),  # each policy gets its own policy worker
                 actors=ActorConfig(workers=1, ring_size=1, envs_per_group=4, fragment_length=16),
                 trainer=TrainerConfig(batch_steps=256),
                 policies={"knight": PolicySpec(hidden=(32,)), "archer": PolicySpec(hidden=(32,))},
                 policy_mapping=lambda agent: agent.split("_")[0])
    first = _train_to_version(launch(cfg, client=dask_client, run_dir=run_dir), 2)
    later = max(p["version"] for p in first["policies"].values()) + 2
    resumed = _train_to_version(Run.resume(run_dir, client=dask_client), later)
    for policy in ("knight", "archer"):
        # each policy continues from its own checkpoint: versions never go back
        assert resumed["policies"][policy]["version"] > first["policies"][policy]["version"], (first, resumed)
        books = resumed["policies"][policy]
        assert books["fragments_produced"] == books["fragments_consumed"] + books["dropped_stale"], resumed


def _train_to_version(run, version: int) -> dict:
    import time

    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and min(p["version"] for p in run.status()["policies"].values()) < version:
            time.sleep(0.5)
    finally:
        result = run.stop()
    assert all(p["version"] >= version for p in result["policies"].values()), result
    assert run.metrics.episodes, result  # episodes ended, agents leaving them one by one on the way
    return result
