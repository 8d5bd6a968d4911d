"""Self-play against a pool of past versions: which rows they play, how opponents are drawn and
recorded, and a real run whose pool fills, is played, is recorded per opponent and survives resume."""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv

from srl_lab.config import (ActorConfig, ConfigError, EnvConfig, ExperimentConfig, PolicyConfig, PoolConfig,
                            PPOConfig, TrainerConfig)
from srl_lab.system import checkpoints
from srl_lab.system.controller import Run, launch
from srl_lab.system.inference import Reply
from srl_lab.system.opponent_pool import OpponentPlay, Seat, draw, frozen_teams
from srl_lab.system.policy_views import PolicyView

ROUNDS = 10


class RockPaperScissors(ParallelEnv):
    """Two players, ``ROUNDS`` rounds; each sees the other's last throw; +1 / -1 per round won / lost."""

    metadata = {"name": "rps_v0", "is_parallelizable": True}
    render_mode = None

    def __init__(self):
        self.possible_agents = ["player_0", "player_1"]
        self.agents: list[str] = []

    def observation_space(self, agent):
        return gym.spaces.Box(0, 1, (3,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(3, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        a, b = int(actions["player_0"]), int(actions["player_1"])
        score = 0.0 if a == b else (1.0 if (a - b) % 3 == 1 else -1.0)
        self.t += 1
        done = self.t >= ROUNDS
        obs = {"player_0": np.eye(3, dtype=np.float32)[b], "player_1": np.eye(3, dtype=np.float32)[a]}
        flags = {agent: done for agent in self.agents}
        rewards = {"player_0": score, "player_1": -score}
        self.agents = [] if done else self.agents
        return obs, rewards, flags, {k: False for k in flags}, {k: {} for k in flags}


def test_past_versions_play_one_team_per_pool_env_alternating():
    view = PolicyView(num_envs=6, num_agents=2, observation_space=None, action_space=None)
    frozen = frozen_teams(view, envs_fraction=0.5).reshape(6, 2)
    assert frozen[:3].tolist() == [[0, -1], [-1, 1], [0, -1]]  # each agent its own team: no teams named
    assert (frozen[3:] == -1).all()  # the other envs are plain self-play


def test_win_rate_sampling_prefers_the_versions_the_trained_side_beats_least():
    rng = np.random.default_rng(0)
    wins = {0: [95, 100], 10: [50, 100], 20: [5, 100]}
    drawn = [draw([0, 10, 20], "win_rate", wins, rng) for _ in range(2000)]
    counts = [drawn.count(v) for v in (0, 10, 20)]
    assert counts[0] < counts[1] < counts[2], counts
    assert draw([0, 10, 20], "latest", wins, rng) == 20


class Constant:
    """A stand-in opponent network that always throws 2 (only its load_weights and act are used)."""

    recurrent = False

    def load_weights(self, weights):
        self.loaded = weights

    def act(self, obs, state=None):
        import torch

        from srl_lab.api.policy import Act

        n = len(obs)
        return Act(torch.full((n,), 2), torch.zeros(n), torch.zeros(n), None)


def test_an_episode_is_recorded_against_the_version_that_played_all_of_it():
    versions = [4]  # env 0's first agent is frozen; 2 envs x 2 agents
    play = OpponentPlay(PoolConfig(swap_steps=3, sampling="latest"), [Seat("team_0", np.array([0]), Constant())],
                        lambda: versions, lambda v: {"w": np.zeros(1)}, seed=0, num_rows=4)
    obs = np.zeros((4, 3), np.float32)
    reply = play.act(obs, Reply(np.zeros(4, np.int64), np.ones(4), np.ones(4), version=7))
    assert reply.actions.tolist() == [2, 0, 0, 0] and play.seats[0].version == 4  # only the frozen row replaced
    for step in range(3):
        play.record(np.array([-1.0, 1.0, 0.0, 0.0]), np.array([step == 2, step == 2, False, False]))
    assert play.take_results() == [{"opponent": 4, "team": "team_0", "return": -3.0, "won": True}]
    versions.append(6)
    play.act(obs, reply)  # 3 steps played: a new draw, the newest
    assert play.seats[0].version == 6
    play.record(np.zeros(4), np.zeros(4, bool))
    versions.append(8)
    play.steps = 3
    play.act(obs, reply)  # swapped mid-episode: that episode is nobody's
    play.record(np.zeros(4), np.array([True, True, False, False]))
    assert play.take_results() == []


def test_each_team_draws_its_past_versions_from_its_own_record():
    """A version strong in one team and weak in the other is drawn for the team it beats the trained side in."""
    versions = [0, 10]
    seats = [Seat("hider", np.array([0]), Constant()), Seat("seeker", np.array([3]), Constant())]
    play = OpponentPlay(PoolConfig(swap_steps=1, sampling="win_rate"), seats, lambda: versions,
                        lambda v: {"w": np.zeros(1)}, seed=0, num_rows=4)  # env 0's hider, env 1's seeker
    obs = np.zeros((4, 3), np.float32)
    drawn: dict[str, list[int]] = {"hider": [], "seeker": []}
    for _ in range(400):
        play.act(obs, Reply(np.zeros(4, np.int64), np.ones(4), np.ones(4), version=7))
        for seat in seats:
            drawn[seat.name].append(seat.version)
        # version 10 beats the trained side when it hides, version 0 when it seeks
        wins = {s.name: s.version == (10 if s.name == "hider" else 0) for s in seats}
        rewards = np.array([1.0 if wins["hider"] else -1.0, 0.0, 0.0, 1.0 if wins["seeker"] else -1.0])
        play.record(rewards, np.ones(4, bool))
    results = play.take_results()
    assert {(r["team"], r["opponent"]) for r in results} == {("hider", 0), ("hider", 10), ("seeker", 0), ("seeker", 10)}
    late = slice(200, None)
    assert drawn["hider"][late].count(10) > 0.8 * 200 and drawn["seeker"][late].count(0) > 0.8 * 200
    assert seats[0].wins[0][0] == seats[0].wins[0][1] and seats[0].wins[10][0] == 0  # the hider seat's record


def test_a_bad_pool_setting_names_its_field():
    with pytest.raises(ConfigError, match=r"policy.pool.envs_fraction"):
        ExperimentConfig(policy=PolicyConfig(pool=PoolConfig(envs_fraction=0.0))).validate()
    with pytest.raises(ConfigError, match=r"policy.pool.sampling"):
        ExperimentConfig(policy=PolicyConfig(pool=PoolConfig(sampling="elo"))).validate()


def pool_config() -> ExperimentConfig:
    return ExperimentConfig(
        name="rps-pool", env=EnvConfig(id=None, factory=RockPaperScissors),
        actors=ActorConfig(workers=1, ring_size=1, envs_per_group=8, fragment_length=10),
        trainer=TrainerConfig(batch_steps=160, checkpoint_every_versions=4),
        ppo=PPOConfig(lr=1e-3, epochs=2, minibatch_size=80),
        policy=PolicyConfig(hidden=(16,), pool=PoolConfig(every_versions=2, size=3, swap_steps=10)),
        metrics_interval_s=0.5)


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


@pytest.mark.timeout(300)
def test_a_run_plays_past_versions_records_them_and_resumes_with_its_pool(dask_client, tmp_path):
    run_dir = str(tmp_path / "rps")
    run = launch(pool_config(), client=dask_client, run_dir=run_dir)
    try:
        assert _wait(lambda: len(run.status()["pools"]["default"]) >= 2, 120), run.status()
    finally:
        run.stop()
    played = run.metrics.pool_results["default"]
    assert played and all(r["opponent"] <= r["learner_version"] for r in played)  # past versions only
    assert {r["opponent"] % 2 for r in played} == {0}  # versions the pool took, every 2nd
    assert {r["team"] for r in played} == {"team_0", "team_1"}  # each player's seat keeps its own record
    table = run.status()["pools"]["default"]
    assert sum(row["episodes"] for row in table) == len(played)
    assert all(0.0 <= row["win_rate"] <= 1.0 for row in table)

    _, state = checkpoints.load_latest(checkpoints.folder(run_dir))
    kept = set(state["pool"])
    assert len(kept) == 3 and max(kept) <= state["version"]
    resumed = Run.resume(run_dir, client=dask_client)
    try:  # the restored pool is played before any version of the resumed run could join it
        assert _wait(lambda: any(r["opponent"] in kept and r["opponent"] < state["version"]
                                 for r in resumed.metrics.pool_results.get("default", [])), 120)
    finally:
        resumed.stop()
