"""Invalid configs fail before launch, with an error that names the field and says how to fix it."""
from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest

from srl_lab.config import (ActorConfig, ConfigError, EnvConfig, ExperimentConfig, PolicyConfig, PPOConfig,
                            TrainerConfig, with_overrides)
from srl_lab.models.mlp import MLPPolicy
from srl_lab.system.controller import launch


def _pendulum_policy(observation_space, action_space):
    return MLPPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)))


@pytest.mark.parametrize("config, field", [
    (ExperimentConfig(env=EnvConfig(id="CartPol-v1")), "env.id"),
    (ExperimentConfig(actors=ActorConfig(workers=0)), "actors.workers"),
    (ExperimentConfig(actors=ActorConfig(ring_size=0)), "actors.ring_size"),
    (ExperimentConfig(actors=ActorConfig(fragment_length=0)), "actors.fragment_length"),
    (ExperimentConfig(actors=ActorConfig(envs_per_group=-2)), "actors.envs_per_group"),
    (ExperimentConfig(trainer=TrainerConfig(device="tpu")), "trainer.device"),
    (ExperimentConfig(policy=PolicyConfig(factory=_pendulum_policy)), "policy.observation_space"),
    (ExperimentConfig(env=EnvConfig(id=None)), "env.id"),
    # PPO settings that cannot work together, caught before launch instead of inside the trainer
    (ExperimentConfig(actors=ActorConfig(fragment_length=64), ppo=PPOConfig(chunk_length=24)), "ppo.chunk_length"),
    (ExperimentConfig(ppo=PPOConfig(norm_obs=True)), "ppo.norm_obs"),  # the MLP has no obs normaliser
    (ExperimentConfig(ppo=PPOConfig(gamma=1.5)), "ppo.gamma"),
    (ExperimentConfig(ppo=PPOConfig(gae_lambda=-0.1)), "ppo.gae_lambda"),
    (ExperimentConfig(ppo=PPOConfig(lr=0.0)), "ppo.lr"),
    (ExperimentConfig(ppo=PPOConfig(advantage="td")), "ppo.advantage"),
    (ExperimentConfig(ppo=PPOConfig(burn_in=-1)), "ppo.burn_in"),
    (ExperimentConfig(ppo=PPOConfig(max_staleness=-1)), "ppo.max_staleness"),
    (ExperimentConfig(ppo=PPOConfig(dual_clip=1.1)), "ppo.dual_clip"),  # not past 1 + clip_coef
    (ExperimentConfig(ppo=PPOConfig(minibatches=4)), "ppo.minibatches"),  # and minibatch_size 1024: which?
    (ExperimentConfig(ppo=PPOConfig(minibatch_size=0)), "ppo.minibatches"),  # neither
    (ExperimentConfig(ppo=PPOConfig(minibatch_size=-8)), "ppo.minibatch_size"),
    (ExperimentConfig(trainer=TrainerConfig(batch_per_actor="yes")), "trainer.batch_per_actor"),
])
def test_invalid_config_names_the_field(config, field):
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert info.value.field == field
    assert str(info.value).startswith(field) and "Fix:" in str(info.value)


def test_command_line_overrides_take_the_field_type_and_name_the_fields_on_a_typo():
    base = PPOConfig()
    ppo = with_overrides(base, ["epochs=2", "lr=5e-4", "norm_adv=false", "max_staleness=3", "advantage=vtrace"])
    assert (ppo.epochs, ppo.lr, ppo.norm_adv, ppo.max_staleness, ppo.advantage) == (2, 5e-4, False, 3, "vtrace")
    assert isinstance(ppo.epochs, int) and base.epochs == 4  # a copy: the original is untouched
    with pytest.raises(ValueError, match="'epoch=2'.*'epochs'"):
        with_overrides(base, ["epoch=2"])
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        with_overrides(base, ["lr"])
    with pytest.raises(ValueError, match="lr takes a number, got 'fast'"):
        with_overrides(base, ["lr=fast"])
    with pytest.raises(ValueError, match="epochs takes a whole number, got '2.5'"):
        with_overrides(base, ["epochs=2.5"])
    with pytest.raises(ValueError, match="norm_adv takes true or false, got 'ture'"):
        with_overrides(base, ["norm_adv=ture"])
    assert with_overrides(base, ["norm_adv=0", "epochs=3.0"]) == dataclasses.replace(base, norm_adv=False, epochs=3)


def test_a_chunk_length_that_does_not_divide_the_fragment_suggests_one_that_does():
    config = ExperimentConfig(actors=ActorConfig(fragment_length=64), ppo=PPOConfig(chunk_length=24))
    with pytest.raises(ConfigError, match="24 does not divide actors.fragment_length 64.*e.g. 16"):
        config.validate()


def test_unknown_env_id_suggests_the_close_match():
    with pytest.raises(ConfigError, match="CartPole-v1"):
        ExperimentConfig(env=EnvConfig(id="CartPol-v1")).validate()


def test_gpu_requested_without_gpu_worker_fails_before_anything_runs(dask_client):
    config = ExperimentConfig(trainer=TrainerConfig(device="cuda"))
    before = set(dask_client.who_has())
    with pytest.raises(ConfigError) as info:
        launch(config, client=dask_client)
    assert info.value.field == "trainer.device"
    assert set(dask_client.who_has()) == before  # nothing was submitted


def test_config_round_trips_through_json_dict():
    config = ExperimentConfig(actors=ActorConfig(workers=3), policy=PolicyConfig(hidden=(32,)))
    again = ExperimentConfig.from_dict(config.to_dict())
    assert again == config
    with pytest.raises(ConfigError, match="actors.wrkers"):
        ExperimentConfig.from_dict({"actors": {"wrkers": 2}})
