# ---
# jupyter:
#   jupytext:
#     formats: notebooks///ipynb,recipes///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Your own multi-agent env, several policies
#
# Coming from RLlib's `policies` / `policy_mapping_fn` or Sample Factory's multi-policy training, the
# pieces have the same names here:
#
# * **bring your own env**: any PettingZoo `ParallelEnv` (or a parallelizable AEC env), defined in this
#   notebook if you like: `EnvConfig(id=None, factory=MyEnv)` ships the class to the Dask workers by
#   value (cloudpickle), and each actor steps a batch of copies of it;
# * **several policies**: `ExperimentConfig(policies={"name": PolicySpec(...), ...})`. Each policy has
#   its own network (`hidden` or a `factory`), its own PPO settings or algorithm, and **its own trainer
#   worker(s)**, parameter stream, checkpoints and books; nothing is shared but the env steps;
# * **policy mapping**: `policy_mapping` (a dict, or a callable from PettingZoo agent id to policy name)
#   says which policy plays each agent. Agents mapped to one policy must share observation and action
#   spaces; agents whose spaces differ need different policies (`validate()` says so before launch).
#
# **Agents that leave early.** PettingZoo agents leave `env.agents` once terminated or truncated; the
# others play on until the episode ends for everyone. srl_lab keeps a fixed row per agent in every
# batch, so after an agent has left, its rows are **masked**: `valid=False`, no action is applied,
# reward 0, a zero observation, and the trainer leaves those rows out of the loss. The step in which
# the agent left carries *its own* terminated (or truncated) flag, so its advantages and value targets
# stop at its own end (a truncated agent bootstraps from its last observation) instead of running on
# into masked rows or to the end of the episode. Episode returns count the steps an agent acted.

# %% tags=["parameters"]
ACTORS = 1  # actor worker processes (on 2 cores: one actor, and one trainer per policy)
MINUTES = 2.0  # training budget; SRL_LAB_SHORT=1 shrinks it to seconds (tests, CI)
SIZE = 5  # the field is SIZE x SIZE cells
HORIZON = 20  # steps before an episode is cut

# %% [markdown]
# ## The env: scouts and a guard
#
# Two **scouts** start on the left edge of a small field and must reach a flag on the right edge
# (+1, and they leave the episode: extracted). A scripted **raider** hunts the nearest scout; a scout it
# catches scores -1 and leaves too, mid-episode. The **guard** can chase the raider off: stepping onto
# it sends it to the far side of the field, stunned for two steps (+0.2 to the guard). It is a team
# game: the guard also scores +1 for every scout that gets home, and when no scout is left out there
# its job is done (it is terminated and the episode ends).
#
# The two agent types see differently: a scout gets a vector of 6 numbers (where the flag, the raider
# and the guard are, relative to itself), the guard a `3 x SIZE x SIZE` map (itself, the raider, the
# scouts still out). Playing at random, scouts mostly get caught (about -0.9); walking straight to the
# flag scores about +0.2, and about +0.8 with a guard that keeps the raider busy.

# %%
import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

import srl_lab
from srl_lab.config import PolicySpec
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


class ScoutsAndGuard(ParallelEnv):
    """Scouts cross to a flag while a scripted raider hunts them; a guard chases the raider off."""

    metadata = {"name": "scouts_and_guard_v0", "is_parallelizable": True}
    render_mode = None
    MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # stay, up, down, left, right

    def __init__(self, size: int = 5, horizon: int = 20, scouts: int = 2, chase: float = 0.6):
        self.size, self.horizon, self.chase = size, horizon, chase  # chase: how often the raider hunts
        self.scouts = [f"scout_{i}" for i in range(scouts)]
        self.possible_agents = [*self.scouts, "guard"]
        self.agents: list[str] = []
        self.rng = np.random.default_rng()
        scout_view = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)  # flag, raider, guard: (rows, columns) away
        guard_view = gym.spaces.Box(0.0, 1.0, (3, size, size), np.float32)  # maps: itself, raider, scouts
        self.observation_spaces = {a: scout_view for a in self.scouts} | {"guard": guard_view}
        self.action_spaces = {a: gym.spaces.Discrete(5) for a in self.possible_agents}

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        s = self.size
        self.agents, self.t, self.stunned = list(self.possible_agents), 0, 0
        self.pos = {a: np.array([self.rng.integers(s), 0]) for a in self.scouts}  # (row, column)
        self.pos["guard"] = np.array([s // 2, s // 2])
        self.flag = np.array([self.rng.integers(s), s - 1])
        self.raider = np.array([self.rng.integers(s), s // 2 + 1])
        return self._observe(self.agents, self.scouts), {a: {} for a in self.agents}

    def _observe(self, agents: list[str], scouts_out: list[str]) -> dict[str, np.ndarray]:
        s, obs = self.size, {}
        for a in agents:
            if a == "guard":
                grid = np.zeros((3, s, s), np.float32)
                grid[0][tuple(self.pos["guard"])] = 1.0
                grid[1][tuple(self.raider)] = 1.0
                for scout in scouts_out:
                    grid[2][tuple(self.pos[scout])] = 1.0
                obs[a] = grid
            else:
                p = self.pos[a]
                offsets = np.concatenate([self.flag - p, self.raider - p, self.pos["guard"] - p])
                obs[a] = offsets.astype(np.float32) / (s - 1)
        return obs

    def _tagged(self) -> bool:
        """The guard on the raider's cell sends it to the far side of the field, stunned for two steps."""
        if not np.array_equal(self.pos["guard"], self.raider):
            return False
        self.raider = (self.pos["guard"] + self.size // 2 + self.rng.integers(0, 2, 2)) % self.size
        self.stunned = 2
        return True

    def _raider_moves(self, out: list[str]) -> None:
        if self.stunned:
            self.stunned -= 1
        elif self.rng.random() < self.chase:  # one step towards the nearest scout still out
            target = min((self.pos[a] for a in out), key=lambda p: np.abs(p - self.raider).sum())
            delta = target - self.raider
            axis = int(abs(delta[1]) > abs(delta[0]))
            self.raider[axis] += np.sign(delta[axis])
        else:
            self.raider = np.clip(self.raider + self.MOVES[self.rng.integers(5)], 0, self.size - 1)

    def step(self, actions):
        rewards = dict.fromkeys(self.agents, 0.0)
        for a in self.agents:
            self.pos[a] = np.clip(self.pos[a] + self.MOVES[int(actions[a])], 0, self.size - 1)
        left = set()
        for a in self.agents[:-1]:  # the scouts still out ("guard" is always last)
            if np.array_equal(self.pos[a], self.flag):
                rewards[a] = 1.0
                rewards["guard"] += 1.0
                left.add(a)
        out = [a for a in self.agents[:-1] if a not in left]
        tagged = self._tagged()
        if out:
            self._raider_moves(out)
        if tagged or self._tagged():
            rewards["guard"] += 0.2
        for a in out:
            if np.array_equal(self.pos[a], self.raider):
                rewards[a] = -1.0
                left.add(a)
        self.t += 1
        still_out = [a for a in out if a not in left]
        # a scout ends when home or caught; the guard when no scout is left out there (its job is done)
        terminated = {a: a in left or (a == "guard" and not still_out) for a in self.agents}
        truncated = {a: self.t >= self.horizon and not terminated[a] for a in self.agents}
        obs = self._observe(self.agents, still_out)  # agents that leave now get their last view too
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, {a: {} for a in terminated}


# %% [markdown]
# ## Two policies, one mapping
#
# `policy_of` maps PettingZoo's agent ids to policy names: both scouts play `scout` (their rows are
# batched together), the guard plays `guard`. Each `PolicySpec` sizes its own MLP and carries its own PPO
# settings; what a spec leaves unset (here `batch_steps` of the scouts) comes from the experiment's
# sections. Two trainers start, one per policy, each publishing its own weight versions.

# %%
def policy_of(agent: str) -> str:
    """PettingZoo agent id -> policy name: ``scout_0``, ``scout_1`` -> ``scout``; ``guard`` -> ``guard``."""
    return "guard" if agent == "guard" else "scout"


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    return srl_lab.ExperimentConfig(
        name="scouts-and-guard",
        env=srl_lab.EnvConfig(id=None, factory=ScoutsAndGuard, kwargs={"size": SIZE, "horizon": HORIZON}),
        actors=srl_lab.ActorConfig(workers=args.actors, ring_size=2, envs_per_group=16, fragment_length=32),
        trainer=srl_lab.TrainerConfig(batch_steps=2048),
        policies={
            "scout": PolicySpec(hidden=(64, 64), ppo=srl_lab.PPOConfig(
                lr=1e-3, gamma=0.95, epochs=4, minibatch_size=512, ent_coef=0.01)),
            "guard": PolicySpec(hidden=(128,), batch_steps=1024, ppo=srl_lab.PPOConfig(
                lr=1e-3, gamma=0.95, epochs=4, minibatch_size=256, ent_coef=0.01)),
        },
        policy_mapping=policy_of,
        metrics_interval_s=0.5,
    )


def report(run: srl_lab.Run, result: dict) -> None:
    """Each policy's books, and its mean return over its first and last 100 episodes and its last 20."""
    for policy, books in result["policies"].items():
        returns = run.metrics.returns(f"return/{policy}")
        first, last = (returns[:100].mean(), returns[-100:].mean()) if len(returns) else (np.nan, np.nan)
        print(f"{policy:>5}: version {books['version']}, fragments {books['fragments_produced']} produced = "
              f"{books['fragments_consumed']} consumed + {books['dropped_stale']} dropped stale; "
              f"{len(returns)} episodes, return first 100 {first:+.2f} -> last 100 {last:+.2f} "
              f"(last 20: {books['mean_return_last_20']:+.2f})")


def main(argv: list[str] | None = None) -> dict:
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, description="scouts and guard: two policies")
    run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
    try:
        run.wait(seconds=60 * args.minutes)
    finally:
        result = run.stop()
    report(run, result)
    print(f"{result['env_steps']:,} env steps in {result['seconds']:.0f} s; "
          f"curves and metrics in {run.run_dir}")
    return result


# %% [markdown]
# ## Train
#
# `launch` first checks the config against one local copy of the env (every agent mapped to a known
# policy, each policy's agents sharing spaces), then starts the actor and the two trainers. The panel
# follows the run while it trains.

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES)
# run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
# run.panel()

# %% [markdown]
# This cell blocks for the budget (about two minutes; seconds in short mode), with a progress bar
# showing each policy's recent return, then stops the run: the actor first, then each trainer drains
# the fragments sent to it.

# %% tags=["active-ipynb"]
# run.wait(seconds=60 * args.minutes)
# result = run.stop()

# %% [markdown]
# Each policy closes its own books: every fragment its rows produced was either trained on or dropped
# as too stale (`fragments_produced == fragments_consumed + dropped_stale`), and `version` counts its
# own updates. `result["policies"][name]["mean_return_last_20"]` is `run.metrics.mean_return(20,
# "return/<name>")`: the mean over that policy's agents of their episode returns.

# %% tags=["active-ipynb"]
# report(run, result)
# result["policies"]

# %% [markdown]
# ## What to try next
#
# * Give the guard a `factory` instead of an MLP (a small conv net suits its map), or one scout its own
#   policy (`policy_mapping={"scout_0": "scout", "scout_1": "rookie", "guard": "guard"}`) and compare them.
# * Turn the raider into a learner: add it to `possible_agents` with its own policy, and the curves
#   become an arms race (notebook 02 shows one at scale).
# * `PolicySpec(algorithm=...)` trains one policy with another algorithm (notebook 04 writes one), and
#   `PolicySpec(trainers=2)` or `device="cuda"` gives a heavy policy more trainers or a GPU.
# * More scouts (`kwargs={"scouts": 4}`) or a bigger field: every scout still plays the one `scout` policy.

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
