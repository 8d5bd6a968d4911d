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
# # 04 · Your own environment and algorithm, defined right here
#
# Classes defined in notebook cells travel to the Dask workers by value (cloudpickle), so an
# experiment can use an environment and a learning algorithm that exist nowhere but in this notebook.
# Below: a gymnasium environment (a corridor the agent must walk to its far end) and an actor-critic
# with V-trace off-policy correction, written against srl_lab's two small interfaces:
#
# * an **environment** is any `gymnasium.Env`; `EnvConfig(factory=...)` builds one per slot of the
#   actors' env groups (a registered batched env is faster, see `srl_lab.envs.registry`);
# * an **algorithm** subclasses `srl_lab.api.algorithm.Algorithm`: `train(batch) -> stats` on a batch of
#   `[T, B]` arrays (observations, actions, behaviour log-probs and values, rewards, terminated,
#   truncated, ...); `ExperimentConfig(algorithm=...)` hands it to the trainer, which calls it and
#   publishes the updated weights (`srl_lab.algorithms.a2c` is a library example of the same size).

# %% tags=["parameters"]
ACTORS = 2
MINUTES = 2.0
LENGTH = 8  # corridor cells

# %%
import gymnasium as gym
import numpy as np
import torch
from torch import nn

import srl_lab
from srl_lab.algorithms.advantages import vtrace
from srl_lab.api.algorithm import Algorithm, Batch
from srl_lab.api.policy import obs_to_tensor
from srl_lab.api.tree import tree_map
from srl_lab.notebook.recipe import RecipeArgs, recipe_args


class Corridor(gym.Env):
    """Walk from cell 0 to cell ``length - 1``: +1 on arrival, -0.01 per step, truncated after 4 x length."""

    def __init__(self, length: int = 8):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)  # 0: left, 1: right
        self.position = 0
        self.steps = 0

    def _obs(self) -> np.ndarray:
        one_hot = np.zeros(self.length, np.float32)
        one_hot[self.position] = 1.0
        return one_hot

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.position = int(np.clip(self.position + (1 if int(action) == 1 else -1), 0, self.length - 1))
        self.steps += 1
        arrived = self.position == self.length - 1
        reward = 1.0 if arrived else -0.01
        return self._obs(), reward, arrived, self.steps >= 4 * self.length, {}


# %% [markdown]
# The algorithm: an actor-critic with IMPALA's **V-trace** correction. Actors act with the policy
# version they last fetched, so by the time a fragment is trained on, the learner's policy has moved
# on; V-trace reweights each step by the truncated importance ratio
# $\rho_t = \min(\bar\rho, \pi(a_t|s_t) / \mu(a_t|s_t))$ between the current policy $\pi$ and the
# behaviour policy $\mu$ whose log-probs the actors recorded. One gradient step per batch on
#
# $$L = -\rho_t \log\pi(a_t|s_t)\,(r_t + \gamma v_{t+1} - V(s_t))
#       + \tfrac{c_v}{2}(V(s_t) - v_t)^2 - c_H\,H[\pi(\cdot|s_t)]$$
#
# with $v_t$ the V-trace targets. It reads its hyper-parameters from `PPOConfig` (`lr`, `gamma`,
# `vtrace_rho_bar`, `vtrace_c_bar`, `vf_coef`, `ent_coef`, `max_grad_norm`), as the trainer passes it.

# %%
class VTraceActorCritic(Algorithm):
    """Actor-critic with V-trace off-policy correction (IMPALA's loss), one gradient step per batch."""

    def __init__(self, policy, config: srl_lab.PPOConfig, device: str = "cpu"):
        super().__init__(policy, config, device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)

    def optimizers(self) -> tuple[torch.optim.Optimizer, ...]:
        """Declared so checkpoints keep its state and data-parallel trainers average its gradients."""
        return (self.optimizer,)

    def train(self, batch: Batch, version: int | None = None) -> dict[str, float]:
        cfg = self.config
        T, B = batch["rewards"].shape
        obs = tree_map(lambda x: x.reshape(T * B, *x.shape[2:]), obs_to_tensor(batch["obs"], self.device))
        actions = torch.as_tensor(batch["actions"], device=self.device)
        logp, entropy, value = self.policy.evaluate(obs, actions.reshape(T * B, *actions.shape[2:]))

        # V-trace on [T, B] arrays: the current policy's log-probs and values against the behaviour ones.
        log_rhos = logp.detach().cpu().numpy().reshape(T, B) - batch["logp"]
        advantages, targets = vtrace(batch["rewards"], value.detach().cpu().numpy().reshape(T, B),
                                     batch["terminated"], batch["truncated"], batch["trunc_values"],
                                     batch["last_value"], log_rhos, cfg.gamma, cfg.vtrace_rho_bar,
                                     cfg.vtrace_c_bar)
        adv = torch.as_tensor(advantages.reshape(-1), device=self.device)
        target = torch.as_tensor(targets.reshape(-1), device=self.device)

        policy_loss = -(logp * adv).mean()
        value_loss = 0.5 * ((value - target) ** 2).mean()
        loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                "entropy": entropy.mean().item(), "mean_rho": float(np.exp(log_rhos).mean())}


def best_return() -> float:
    """Straight to the end: LENGTH - 2 steps at -0.01, then +1 on arrival."""
    return 1.0 - 0.01 * (LENGTH - 2)


def make_config(args: RecipeArgs) -> srl_lab.ExperimentConfig:
    return srl_lab.ExperimentConfig(
        name="corridor",
        env=srl_lab.EnvConfig(id=None, factory=Corridor, kwargs={"length": LENGTH}),
        algorithm=VTraceActorCritic,
        actors=srl_lab.ActorConfig(workers=args.actors, ring_size=2, envs_per_group=8, fragment_length=32),
        trainer=srl_lab.TrainerConfig(batch_steps=1024),
        ppo=srl_lab.PPOConfig(lr=1e-3, gamma=0.98, ent_coef=0.01),
        policy=srl_lab.PolicyConfig(hidden=(32,)),
        metrics_interval_s=0.5,
    )


def main(argv: list[str] | None = None) -> dict:
    args = recipe_args(argv, actors=ACTORS, minutes=MINUTES, description="env and algorithm of notebook 04")
    run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
    try:
        run.wait(seconds=60 * args.minutes)
    finally:
        result = run.stop()
    print(f"return (last 20) {result['mean_return_last_20']:.2f}; the best possible is {best_return():.2f}")
    return result


# %% [markdown]
# ## Train
#
# A quick local check first — the environment steps, the spaces fit a policy — happens inside
# `launch` (`ExperimentConfig.validate`), before anything reaches the cluster.

# %% tags=["active-ipynb"]
# args = recipe_args([], actors=ACTORS, minutes=MINUTES)
# run = srl_lab.launch(make_config(args), client=args.scheduler, run_dir=args.run_dir)
# run.panel()

# %% tags=["active-ipynb"]
# run.wait(seconds=60 * args.minutes)
# result = run.stop()
# print(f"return (last 20) {result['mean_return_last_20']:.2f}; the best possible is {best_return():.2f}")

# %% tags=["active-py"]
if __name__ == "__main__":
    main()
