"""Data-parallel trainers: two trainer workers learn one policy together and never drift apart."""
from __future__ import annotations

import dataclasses
import datetime
import multiprocessing
import os
import signal
import sys
import time
import traceback

import gymnasium as gym
import numpy as np
import pytest
import torch.distributed as dist
from distributed import get_worker

from srl_lab.config import ActorConfig, ConfigError, EnvConfig, ExperimentConfig, TrainerConfig
from srl_lab.presets import fast_cartpole
from srl_lab.system import checkpoints
from srl_lab.system.controller import Run, launch
from srl_lab.system.data_parallel import TrainerGroup, TrainerGroupBroken, collective
from srl_lab.system.learner import Learner
from srl_lab.policies import service
from srl_lab.system.sample_stream import trainer_of_actor
from runs import shipped_by_value, train_until_version, wait_for

SOLVED = 475.0


def test_actors_are_split_evenly_over_the_trainers():
    assert [trainer_of_actor(a, 2) for a in range(4)] == [0, 1, 0, 1]
    assert [service("samples", "default", r) for r in range(3)] == ["samples", "samples-1", "samples-2"]


def test_trainer_count_must_be_positive_and_every_rank_needs_an_actor():
    with pytest.raises(ConfigError, match="trainer.trainers"):
        ExperimentConfig(trainer=TrainerConfig(trainers=0)).validate()
    # actor i feeds rank i % trainers: with fewer actors a rank never fills a batch and the group waits
    with pytest.raises(ConfigError, match="actors.workers.*cannot feed 2 data-parallel trainers"):
        ExperimentConfig(actors=ActorConfig(workers=1), trainer=TrainerConfig(trainers=2)).validate()


def test_each_rank_waits_for_a_whole_batch_of_its_own():
    """As a DistributedDataParallel process takes its own batch: an update averages the gradients of
    ``trainers`` batches. Halving it per rank would double the updates per fragment in flight, and
    the versions between acting and training with them (a third of the CartPole test's fragments were
    then dropped as stale)."""
    config = ExperimentConfig(actors=ActorConfig(workers=3), trainer=TrainerConfig(trainers=2, batch_steps=1001))
    assert Learner(config).batch_target() == 1001


def test_a_failed_collective_is_a_broken_group_with_its_cause_chained():
    lost = RuntimeError("[gloo] Connection closed by peer")

    def fails(*args, **kwargs):
        raise lost

    with pytest.raises(TrainerGroupBroken, match="trainer-1 lost a peer .* in agree .*Run.resume") as broken:
        collective(1, "agree", fails, 1, op=2)
    assert broken.value.__cause__ is lost
    with pytest.raises(TypeError):  # not a failure of the collective: a bug, and it stays one
        collective(1, "agree", lambda: int([]))
    assert collective(0, "gather", lambda rank, what: rank + what, 1, what=2) == 3  # any keyword passes on


def _rank(rank: int, store_file: str, outcome) -> None:
    """One trainer rank: agree once with its peer; rank 1 then dies, rank 0 tries to agree again."""
    try:
        store = dist.FileStore(store_file, 2)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=30))
        group = TrainerGroup(rank, 2, store)
        group.agree(True, False, False)
        if rank == 1:
            os._exit(0)  # the process is gone without leaving the group
        group.agree(True, False, False)
        outcome.put("agreed without its peer")
    except TrainerGroupBroken as error:
        outcome.put(f"broken: {error} / cause {type(error.__cause__).__name__}")
    except BaseException:
        outcome.put(traceback.format_exc())


def test_a_lost_peer_breaks_the_group_by_type(tmp_path):
    """A real gloo group of two processes: when one dies, the other's next collective raises
    ``TrainerGroupBroken`` (not whatever RuntimeError torch chose), with torch's error as its cause."""
    spawn = multiprocessing.get_context("spawn")
    outcome = spawn.Queue()
    ranks = [spawn.Process(target=_rank, args=(r, str(tmp_path / "store"), outcome)) for r in (0, 1)]
    for process in ranks:
        process.start()
    try:
        result = outcome.get(timeout=120)
    finally:
        for process in ranks:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert result.startswith("broken: trainer-0 lost a peer"), result
    assert result.rsplit("cause ", 1)[-1].endswith("Error"), result  # torch's error, chained


@pytest.mark.slow
def test_two_data_parallel_trainers_solve_cartpole_with_identical_weights(tmp_path):
    """On its own embedded cluster: processes that hosted a trainer group are not reused by other tests.
    The shipped fast CartPole preset over two trainers, each taking a preset batch from its actor in
    minibatches of half the preset's, so each averaged gradient step covers a preset minibatch:
    15-17 s from launch to 475 on 4 seeds alone, against 36 s with 4096-step batches."""
    preset = fast_cartpole(actors=2, name="test-ddp")
    config = dataclasses.replace(
        preset, trainer=dataclasses.replace(preset.trainer, trainers=2, checkpoint_every_versions=20),
        ppo=dataclasses.replace(preset.ppo, minibatch_size=preset.ppo.minibatch_size // 2))
    run = launch(config, run_dir=str(tmp_path))
    try:
        status = run.wait(target_return=SOLVED, seconds=420, progress=False)
        roles = sorted(w["worker"] for w in status["workers"] if w["role"] == "trainer")
        assert roles == ["trainer-0", "trainer-1"]
        with pytest.raises(ConfigError, match="cannot feed 2 data-parallel trainers"):
            run.scale(actors=1)  # trainer-1 would be left without samples
        assert len(run.actors) == 2
    finally:
        result = run.stop()
    assert status["mean_return_last_20"] >= SOLVED, (status, result)
    # Both ranks trained every version, and their weights hashed the same after every single step.
    rank0, rank1 = run.trainer_digests
    assert len(rank0) == result["version"] >= 10
    assert rank0 == rank1
    assert [v for v, _ in rank0] == list(range(1, result["version"] + 1))
    assert len({d for _, d in rank0}) == len(rank0)  # the weights did change at every step
    # Each rank consumed its own share, and the books close over both.
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"], result
    assert result["dropped_stale"] <= result["fragments_produced"] // 10, result  # batches keep pace with actors
    assert result["checkpoint"] is not None


def _task() -> str:
    """The Dask task this code runs in ("" outside a worker, e.g. where the launch probes the env)."""
    try:
        return str(get_worker().get_current_task())
    except ValueError:
        return ""


class SlowInActorOne(gym.Wrapper):
    """CartPole with 16 KiB observations (a few fragments outgrow the socket buffers) that takes 5 ms
    a step in actor 1, known by the Dask task it runs in (``WorkerSet.submit`` names the tasks)."""

    PADDING = 4092

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4 + self.PADDING,), np.float32)
        self.delay_s = 0.005 if _task().endswith("actor-1") else 0.0

    def observe(self, obs):
        return np.concatenate([obs, np.zeros(self.PADDING, np.float32)])

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observe(obs), info

    def step(self, action):
        time.sleep(self.delay_s)
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.observe(obs), reward, terminated, truncated, info


@pytest.mark.slow
def test_a_rank_waiting_on_a_slow_peer_still_takes_its_actors_last_fragments_at_stop(tmp_path):
    """Rank 0's actor is fast and rank 1's slow: rank 0 holds two batches and stops reading while it
    waits for rank 1. Stopping then leaves rank 1 short of a batch, so the group trains no more
    until the trainers are told to stop, after every actor has returned. Rank 0 must read on while
    the actors stop, or the fragments its actor queued die with the actor's socket after
    ``FLUSH_LINGER_MS`` and the books count them lost in a run where nothing failed."""
    config = ExperimentConfig(
        name="test-ddp-slow-peer", env=EnvConfig(id=None, factory=SlowInActorOne),
        actors=ActorConfig(workers=2, ring_size=2, envs_per_group=64, fragment_length=4),
        trainer=TrainerConfig(trainers=2, batch_steps=512, buffer_fragments=1))
    with shipped_by_value(sys.modules[__name__]):
        run = train_until_version(config, None, str(tmp_path), version=2, timeout_s=180)  # books close
    assert run.result["fragments_lost"] == 0, run.result


def _worker(run, worker_id: str) -> dict:
    return next(w for w in run.status()["workers"] if w["worker"] == worker_id)


@pytest.mark.slow
def test_a_killed_trainer_stops_the_run_clearly_and_resume_continues_it(tmp_path):
    """Each run gets its own embedded cluster (fresh processes; see the scale-out notes)."""
    config = ExperimentConfig(
        name="test-ddp-fault", actors=ActorConfig(workers=2, ring_size=1, envs_per_group=8, fragment_length=32),
        trainer=TrainerConfig(trainers=2, batch_steps=1024, checkpoint_every_versions=3))
    run = launch(config, run_dir=str(tmp_path))
    try:
        wait_for(lambda: run.status()["version"] >= 6 and _worker(run, "trainer-1")["pid"], 180, "training")
        os.kill(_worker(run, "trainer-1")["pid"], signal.SIGKILL)
        with pytest.raises(RuntimeError, match="lost a peer of its data-parallel group.*Run.resume"):
            run.wait(seconds=120, progress=False)
    finally:
        with pytest.raises(RuntimeError, match="lost a peer"):
            run.stop()  # nothing hangs: the remaining tasks are cancelled
    checkpointed = checkpoints.load_latest(checkpoints.folder(str(tmp_path)))[1]["version"]
    resumed = Run.resume(str(tmp_path))
    try:
        wait_for(lambda: resumed.status()["version"] >= checkpointed + 3, 180, "training after resume")
    finally:
        result = resumed.stop()
    rank0, rank1 = resumed.trainer_digests
    assert rank0 == rank1 and rank0[0][0] == checkpointed + 1  # both ranks continue from the checkpoint
    # The books span both runs: fragments in flight when the group broke are counted as lost.
    assert result["fragments_produced"] == (result["fragments_consumed"] + result["dropped_stale"]
                                            + result["fragments_lost"]), result
