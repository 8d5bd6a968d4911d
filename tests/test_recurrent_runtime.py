"""Recurrent policies on the distributed runtime: actors carry, send, reset and store LSTM states."""
from __future__ import annotations

import functools
import itertools
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
import zmq

from srl_lab.algorithms import recurrent
from srl_lab.config import ActorConfig, EnvConfig, ExperimentConfig, InferenceConfig, PolicyConfig, PPOConfig, TrainerConfig
from srl_lab.envs.gym_group import GymEnvGroup
from srl_lab.envs.memory import CueMemoryEnv
from srl_lab.models.mlp import MLPPolicy
from srl_lab.models.mlp_lstm import MLPLSTMPolicy
from srl_lab.system import codec
from srl_lab.system.actor_ring import ActorRing
from srl_lab.system.controller import launch
from srl_lab.system.fragments import batch_fragments, check_fragment
from srl_lab.system.inference import InlineInference, RemoteInference
from srl_lab.system.policy_worker import BatchServer, read_infer
from srl_lab.system.streams import Refused
from srl_lab.system.streams import FixedEndpoint, bind
from runs import FixedParams, train_until_version

CUES, DELAY = 4, 8  # as in test_recurrent: the query comes 9 steps after the cue
LENGTH = 12  # fragment length of the in-process checks


_delays = itertools.count()


def short_or_cut_cue_memory() -> gym.Env:
    """Every other env ends by termination (delay 3), the rest are truncated at step 8 (delay 8)."""
    return gym.wrappers.TimeLimit(CueMemoryEnv(CUES, 3 if next(_delays) % 2 else DELAY), max_episode_steps=8)


def collect(policy, inference, fragments: int) -> list[dict]:
    """Fragments of a 2-group ring (alternating group 0, group 1) acting with ``inference``."""
    envs = [GymEnvGroup(short_or_cut_cue_memory, 6, seed=g) for g in range(2)]
    out: list[dict] = []

    def emit(builder, last_value) -> bool:
        arrays = builder.arrays(last_value)
        assert check_fragment(arrays, LENGTH) is None
        out.append(arrays)
        return True

    ring = ActorRing.single(envs, LENGTH, inference, emit)
    deadline = time.monotonic() + 60
    while len(out) < fragments and time.monotonic() < deadline:
        assert ring.step(lambda: False)
    ring.close()
    return out


def replay(policy, fragment: dict) -> torch.Tensor:
    """Check every stored state, log-prob and value against the policy stepped locally from the
    fragment's first state; return the state the group's next fragment must start from."""
    T, B = fragment["rewards"].shape
    obs, states = torch.as_tensor(fragment["obs"]), torch.as_tensor(fragment["states"])
    actions = torch.as_tensor(fragment["actions"])
    ended = torch.as_tensor(fragment["terminated"] | fragment["truncated"])
    with torch.no_grad():
        for t in range(T):
            dist, value, after = policy.distribution_and_value(obs[t:t + 1], states[t], torch.zeros(1, B, dtype=torch.bool))
            torch.testing.assert_close(value[0], torch.as_tensor(fragment["values"][t]))
            torch.testing.assert_close(dist.log_prob(actions[t:t + 1])[0], torch.as_tensor(fragment["logp"][t]))
            after[ended[t]] = 0.0
            if t + 1 < T:
                torch.testing.assert_close(states[t + 1], after)
    return after


@pytest.fixture
def lstm():
    torch.manual_seed(0)
    env = CueMemoryEnv(CUES, DELAY)
    return MLPLSTMPolicy(env.observation_space, env.action_space, hidden=(16,), recurrent=True)


@pytest.fixture
def remote_server():
    """A policy worker's ``BatchServer`` on a real ROUTER socket, served from a thread."""
    ctx, key = zmq.Context(), codec.new_secret()
    stop = threading.Event()
    started: list = []

    def start(policy) -> RemoteInference:
        sock, endpoint = bind(ctx, zmq.ROUTER, "test-recurrent")
        server = BatchServer(policy, sock, key)

        def serve() -> None:
            while not stop.is_set():
                server.serve_once(version=0, timeout_ms=20)
            sock.close(linger=0)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        started.append((thread, server))
        return RemoteInference(ctx, FixedEndpoint(endpoint), key)

    yield start
    stop.set()
    for thread, _ in started:
        thread.join(5)
    ctx.term()


@pytest.mark.parametrize("mode", ["inline", "remote"])
def test_fragments_store_the_states_a_local_rollout_reproduces(mode, lstm, remote_server):
    inference = (InlineInference(lstm, FixedParams(lstm.weights()), lambda: False) if mode == "inline"
                 else remote_server(lstm))
    fragments = collect(lstm, inference, fragments=6)
    assert len(fragments) == 6
    first = fragments[0]
    assert first["states"].shape == (LENGTH, 6, 2, 2, 16) and first["states"].dtype == np.float32
    assert not first["states"][0].any() and first["states"][1:].any()
    done = np.concatenate([f["terminated"] for f in fragments]), np.concatenate([f["truncated"] for f in fragments])
    assert done[0].any() and done[1].any()  # both kinds of episode end were crossed
    assert all(f["trunc_values"][f["truncated"]].all() for f in fragments)  # V(final obs) came back
    for k, fragment in enumerate(fragments):
        carried = replay(lstm, fragment)
        if k + 2 < len(fragments):  # the same group's next fragment
            nxt = fragments[k + 2]
            torch.testing.assert_close(torch.as_tensor(nxt["states"][0]), carried)
            np.testing.assert_allclose(fragment["last_value"], nxt["values"][0], rtol=1e-6)
    batch = batch_fragments(fragments[:2])
    assert batch["states"].shape == (LENGTH, 12, 2, 2, 16)


def test_truncated_rows_are_valued_with_the_state_before_the_reset(lstm):
    """V(final obs) of a truncated episode continues that episode's state, not a fresh one."""
    envs = [GymEnvGroup(lambda: gym.wrappers.TimeLimit(CueMemoryEnv(CUES, DELAY), 3), 2, seed=0)]
    seen: dict = {}

    class Recording(InlineInference):
        def post(self, group, obs, state=None, bootstrap=True):
            seen.setdefault("requests", []).append((obs.copy(), None if state is None else state.copy()))
            super().post(group, obs, state, bootstrap)

    ring = ActorRing.single(envs, 4, Recording(lstm, FixedParams(lstm.weights()), lambda: False), lambda b, v: True)
    for _ in range(3):
        ring.step(lambda: False)
    obs, state = seen["requests"][-1]  # after step 3: 2 rows of new episodes + 2 rows of final observations
    assert obs.shape[0] == 4 and not state[:2].any() and state[2:].all()


def test_feed_forward_policies_send_and_store_no_state(remote_server):
    env = CueMemoryEnv(CUES, DELAY)
    policy = MLPPolicy(env.observation_space, env.action_space, hidden=(16,))
    for inference in (InlineInference(policy, FixedParams(policy.weights()), lambda: False), remote_server(policy)):
        fragments = collect(policy, inference, fragments=2)
        assert fragments and all("states" not in f for f in fragments)
        assert "states" not in batch_fragments(fragments)


def test_malformed_states_are_refused(lstm):
    good = {"obs": np.zeros((3, CUES + 1), np.float32), "states": np.zeros((3, 2, 2, 16), np.float32)}
    assert read_infer({"group": 0}, good, (2, 2, 16))[3] is not None
    assert read_infer({"group": 0}, {"obs": good["obs"]}, (2, 2, 16))[3] is None  # initial state
    for bad in (np.zeros((2, 2, 2, 16), np.float32), np.zeros((3, 2, 16), np.float32), np.zeros((3, 2, 2, 16), np.int64)):
        with pytest.raises(Refused, match="states"):
            read_infer({"group": 0}, {"obs": good["obs"], "states": bad}, (2, 2, 16))
    assert read_infer({"group": 0}, {"obs": good["obs"], "states": bad}, None)[3] is None  # feed-forward: ignored
    fragment = collect(lstm, InlineInference(lstm, FixedParams(lstm.weights()), lambda: False), 1)[0]
    for broken in (fragment["states"][:, :-1], fragment["states"].astype(np.float64), fragment["states"] * np.nan):
        assert "states" in check_fragment({**fragment, "states": broken}, LENGTH)


def cue_memory_config(mode: str) -> ExperimentConfig:
    return ExperimentConfig(
        name=f"cue-memory-{mode}",
        env=EnvConfig(id=None, factory=CueMemoryEnv, kwargs={"num_cues": CUES, "delay": DELAY}),
        policy=PolicyConfig(factory=functools.partial(MLPLSTMPolicy, hidden=(64,), recurrent=True)),
        actors=ActorConfig(workers=1, ring_size=2, envs_per_group=32, fragment_length=32),
        inference=InferenceConfig(mode=mode),
        trainer=TrainerConfig(batch_steps=2048, buffer_fragments=2),  # a slow trainer holds the actor back
        # lr annealed to 0 over 800k trained steps (~390 updates): at a constant 1e-3 a solved policy drifted more
        ppo=PPOConfig(lr=1e-3, epochs=4, minibatch_size=512, chunk_length=16, burn_in=8, anneal_lr_steps=800_000))


def greedy_success(weights: dict) -> float:
    env = GymEnvGroup(functools.partial(CueMemoryEnv, CUES, DELAY), 64, seed=1)
    policy = MLPLSTMPolicy(env.observation_space, env.action_space, hidden=(64,), recurrent=True)
    policy.load_weights(weights)
    return recurrent.mean_return(env, policy, episodes=500, seed=1)


@pytest.mark.slow
def test_lstm_learns_cue_memory_through_launch(dask_client, tmp_path):
    """Trains until 100 sampled episodes in a row answer 7 in 10 queries (within 150 s), then plays the
    final weights greedily: they must recall the cue far better than a memoryless policy, which answers
    one fixed cue and so succeeds 1 time in 4 (``CUES``). Either bar needs the LSTM states to travel
    whole from the actors through the fragments to the trainer's chunks.

    Why not full recall: with PPO on lagged recurrent samples a solved policy now and then loses one
    cue's answer for a few updates (the newest weights run ahead of the episodes the stop rule reads).
    Full recall is checked in one process (test_recurrent), where it is seeded.
    """
    run = launch(cue_memory_config("inline"), client=dask_client, run_dir=str(tmp_path))
    deadline = time.time() + 150

    def recalled() -> bool:
        return len(run.metrics.episodes) >= 100 and run.metrics.mean_return(100) >= 0.7

    try:
        while time.time() < deadline and not recalled():
            run.wait(seconds=1, progress=False)
        recalled_most_cues = recalled()
    finally:
        result = run.stop()
    success = greedy_success(run.final_weights)
    print(f"CueMemory through launch (inline): greedy success {success:.3f} after {result['version']} updates, "
          f"{result['env_steps']} env steps, {result['seconds']:.0f} s; last-100 return {run.metrics.mean_return(100)}")
    assert result["fragments_produced"] == result["fragments_consumed"] + result["dropped_stale"]
    assert recalled_most_cues, "100 sampled episodes in a row never answered 7 in 10 queries within 150 s"
    assert success >= 0.5  # at least 2 of the 4 cues


def test_remote_inference_serves_a_recurrent_policy_through_launch(dask_client, tmp_path):
    """A policy worker answers with states; the trainer accepts every fragment (none malformed)."""
    result = train_until_version(cue_memory_config("remote"), dask_client, str(tmp_path)).result
    assert result["malformed"] == 0 and result["rejected"] == 0, result
