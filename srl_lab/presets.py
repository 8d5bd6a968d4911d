"""Ready-made experiments, each sized by measurement on a 2-core machine.

``fast_cartpole``: PPO on gymnasium's numpy-vectorised CartPole-v1, solved (a last-20 mean return of
475) within seconds of ``launch``. Every choice follows from where the time goes there:

* one actor worker with two 256-env groups: the vectorised env steps 2M+ rows/s, so the actor's time
  is inference on large batches, and one actor keeps the trainer fed (the other core trains);
* 16,384-step batches trained in 4 epochs of 8,192-row minibatches: a small MLP's update costs
  mostly per minibatch, so large ones train ~3x more rows/s than 1,024-row ones, and the larger
  learning rate (5e-3) makes up for the fewer gradient steps; it is annealed to 0 over 5M env steps
  (about 40 s), which keeps the return at 500 once there instead of dipping now and then;
* a one-fragment receive buffer paces the actor to the trainer (it blocks instead of queueing
  samples that would go stale), and ``max_version_lag=4`` keeps the few fragments acted a few
  versions back, which PPO's clipped ratio against their behaviour log-probs corrects.

``benchmarks/cartpole_throughput.py`` measures it: env steps/s while training, the share of them
trained on, and the seconds from ``launch`` to 475 over several seeds.
"""
from __future__ import annotations

from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, PPOConfig, TrainerConfig


def fast_cartpole(seed: int = 0, actors: int = 1, name: str = "fast-cartpole") -> ExperimentConfig:
    """Vectorised CartPole-v1 with PPO sized to solve it in seconds on 2 cores (module docstring)."""
    return ExperimentConfig(
        name=name, seed=seed,
        env=EnvConfig(id="CartPole-v1", vector=True),
        actors=ActorConfig(workers=actors, ring_size=2, envs_per_group=256, fragment_length=32),
        trainer=TrainerConfig(batch_steps=16_384, buffer_fragments=1, max_version_lag=4),
        ppo=PPOConfig(lr=5e-3, epochs=4, minibatch_size=8192, anneal_lr_steps=5_000_000))
