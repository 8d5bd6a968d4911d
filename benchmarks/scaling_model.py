"""Scaling-model figures for hide-and-seek: what one core of each SRL role can do.

Every figure runs the real code on one thread of this process (``torch.set_num_threads(1)``), with
the hide-and-seek showcase config (``showcase_config()``: lite 1v1 quadrant, 2 agents per env, its
env groups, fragments and entity-attention policy) and is a rate per CPU-second of this
process (``time.process_time()``), so load from other processes on a shared machine inflates it
less than wall-clock time would:

- ``env``: random-action env steps of one 32-env group, no policy (the env's own ceiling);
- ``actor_inline``: one actor's ``ActorRing`` with the real ``InlineInference`` (weights from a real
  ``ParameterService`` in this process), every fragment encoded as ``SampleSender`` does;
- ``actor_remote_side``: the same ring with remote inference's actor-side work only (encode each
  request, decode a reply) and no forward pass: what an actor core costs when a policy worker does
  the inference;
- ``policy_batch``: one policy-worker loop iteration at batch sizes 64..4096 rows, merged from
  64-row requests as actors send them: decode every request, ``read_infer``, concatenate,
  ``run_policy``, encode every reply (the ZeroMQ hop itself is left out);
- ``trainer``: one ``Learner.train`` (``batch_fragments`` + ``PPO.train``) on a batch of real
  fragments from ``actor_inline``, after decoding them; with 4 epochs and with 1;
- ``broadcast``: weight bytes, encode time (``ParameterService.publish``: msgpack header + HMAC),
  decode + ``load_weights`` time per reader, and the wall time for a real ``ParameterService`` to
  deliver one new version to N ``ParameterClient`` readers in this process (readers here share one
  core with the service, so this is an upper bound on the service's own cost per reader);
- ``mujoco_env``: random-action env steps of the MuJoCo variant (4 envs), if it is installed.

    python benchmarks/scaling_model.py [--quick]

The last stdout line is one JSON object. ``benchmarks/scaling.py`` runs this too.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import statistics
import time
from typing import Any, Callable

import numpy as np

SUBSCRIBERS = (1, 4, 16, 64)
BATCH_SIZES = (64, 256, 1024, 4096)
REQUEST_ROWS = 64  # an env group of 32 envs x 2 agents


def recipe_config(actors: int = 1, mode: str = "inline", epochs: int | None = None):
    """The hide-and-seek showcase config (``showcase_config``), optionally with other PPO epochs."""
    from srl_lab.envs.hide_and_seek.showcase import showcase_config

    config = showcase_config(actors=actors)
    config.inference = dataclasses.replace(config.inference, mode=mode)
    if epochs is not None:
        config.ppo = dataclasses.replace(config.ppo, epochs=epochs)
    return config


def _cpu_rate(work: Callable[[], int], seconds: float, min_calls: int = 3) -> float:
    """Units of ``work()`` per CPU-second of this process, calling it for at least ``seconds``."""
    units, calls, start = 0, 0, time.process_time()
    while calls < min_calls or time.process_time() - start < seconds:
        units += work()
        calls += 1
    return units / (time.process_time() - start)


def _random_actions(env, rng: np.random.Generator) -> np.ndarray:
    nvec = env.action_space.nvec
    return rng.integers(0, nvec, (env.num_envs, env.num_agents, len(nvec)))


def measure_env(config, seconds: float) -> float:
    """Env steps per CPU-second of one random-action env group (no policy)."""
    from srl_lab.envs.factory import make_env_group

    env = make_env_group(config, config.actors.envs_per_group, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    pool = [_random_actions(env, rng) for _ in range(16)]
    env.step(pool[0])  # compile / load every kernel first
    k = [0]

    def work() -> int:
        k[0] += 1
        env.step(pool[k[0] % len(pool)])
        return env.num_envs

    rate = _cpu_rate(work, seconds)
    env.close()
    return rate


def measure_mujoco_env(seconds: float) -> float | None:
    """Env steps per CPU-second of the MuJoCo variant (quadrant 1v1, 4 envs); None if not installed."""
    if not (importlib.util.find_spec("mujoco") and importlib.util.find_spec("srl_lab.envs.hide_and_seek.mujoco_env")):
        return None
    from srl_lab.envs import registry

    env = registry.make("hide_and_seek", 4, seed=0, scenario="quadrant", n_hiders=1, n_seekers=1)
    env.reset()
    rng = np.random.default_rng(0)
    env.step(_random_actions(env, rng))

    def work() -> int:
        env.step(_random_actions(env, rng))
        return env.num_envs

    rate = _cpu_rate(work, seconds)
    env.close()
    return rate


class _ActorSideOfRemote:
    """Remote inference as the actor pays for it: encode the request, decode a reply; no network, no model."""

    latency_s = 0.0

    def __init__(self, action_space, key: bytes):
        self.key = key
        self.action_space = action_space
        self._encoded: dict[int, list] = {}  # rows -> an encoded reply
        self._rows: dict[int, int] = {}

    def _reply_frames(self, rows: int) -> list:
        if rows not in self._encoded:
            from srl_lab.system import codec

            rng = np.random.default_rng(rows)
            nvec = self.action_space.nvec
            arrays = {"actions": rng.integers(0, nvec, (rows, len(nvec))),
                      "logp": np.zeros(rows, np.float32), "values": np.zeros(rows, np.float32)}
            frames = codec.encode("actions", {"group": 0, "version": 0}, arrays, key=self.key)
            self._encoded[rows] = [bytes(f) for f in frames]  # as received: contiguous bytes
        return self._encoded[rows]

    def post(self, group: int, obs: Any, state: Any = None, bootstrap: bool = True) -> None:
        from srl_lab.api.tree import tree_first_leaf
        from srl_lab.system import codec

        codec.encode("infer", {"group": group}, {"obs": obs}, key=self.key)
        self._rows[group] = len(tree_first_leaf(obs))

    def wait(self, group: int, should_stop: Callable[[], bool]):
        from srl_lab.system import codec
        from srl_lab.system.inference import read_actions

        _, meta, arrays = codec.decode(self._reply_frames(self._rows.pop(group)), frozenset({"actions"}),
                                       key=self.key)
        return read_actions(meta, arrays)[1]

    def close(self) -> None:
        pass


def measure_actors(config, seconds: float, keep_fragments: int) -> dict[str, Any]:
    """Per-core actor rates (inline; actor side of remote) and a few encoded fragments for the trainer."""
    import torch
    import zmq

    from srl_lab.envs.factory import make_env_group, make_policy, probe_env
    from srl_lab.system import codec
    from srl_lab.system.actor_ring import ActorRing
    from srl_lab.system.inference import InlineInference
    from srl_lab.system.learner import needs_behaviour_values
    from srl_lab.system.parameters import ParameterClient, ParameterService
    from srl_lab.system.streams import FixedEndpoint

    torch.set_num_threads(1)
    acfg = config.actors
    key = codec.new_secret()
    zctx = zmq.Context()
    fragments: list[list[bytes]] = []

    def emit(builder, last_value) -> bool:
        frames = codec.encode("fragment", {"episodes": builder.episodes, "env_errors": builder.env_errors,
                                           "actor": 0, "inc": 0, "seq": len(fragments)},
                              builder.arrays(last_value), key=key)
        if len(fragments) < keep_fragments:
            fragments.append([bytes(f) for f in frames])
        return True

    def ring_rate(inference) -> float:
        envs = [make_env_group(config, acfg.envs_per_group, seed=g) for g in range(acfg.ring_size)]
        ring = ActorRing.single(envs, acfg.fragment_length, inference, emit)
        for _ in range(acfg.fragment_length + 2):  # warm-up: every code path, first fragments
            ring.step(lambda: False)
        before = ring.counters["env_steps"]

        def work() -> int:
            nonlocal before
            ring.step(lambda: False)
            steps, before = ring.counters["env_steps"] - before, ring.counters["env_steps"]
            return steps

        rate = _cpu_rate(work, seconds)
        ring.close()
        return rate

    try:
        probe = probe_env(config)
        policy = make_policy(config, probe.observation_space, probe.action_space, probe)
        service = ParameterService(zctx, "scaling-model", key)
        service.publish(1, policy.weights())
        params = ParameterClient(zctx, FixedEndpoint(service.endpoint), key, config.inference.weight_poll_s)
        inline = ring_rate(InlineInference(make_policy(config, probe.observation_space, probe.action_space, probe),
                                           params, lambda: False, needs_behaviour_values(config)))
        remote_side = ring_rate(_ActorSideOfRemote(probe.action_space, key))
        service.close()
    finally:
        zctx.destroy(linger=0)
    return {"actor_inline": inline, "actor_remote_side": remote_side, "fragments": fragments, "key": key}


def measure_policy_batches(config, seconds_each: float, sizes: tuple[int, ...] = BATCH_SIZES) -> dict[str, float]:
    """Rows per CPU-second of one policy-worker iteration at each batch size (64-row requests)."""
    import torch

    from srl_lab.api.tree import tree_concat
    from srl_lab.envs.factory import make_env_group, make_policy
    from srl_lab.system import codec
    from srl_lab.system.actor_ring import flatten_rows
    from srl_lab.system.inference import run_policy
    from srl_lab.system.policy_worker import read_infer

    torch.set_num_threads(1)
    key = codec.new_secret()
    envs = max(sizes) // 2
    env = make_env_group(config, envs, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(10):  # a few steps in, so visibility masks are mixed
        result = env.step(_random_actions(env, rng))
    obs = flatten_rows(result.obs, envs * env.num_agents)
    policy = make_policy(config, env.observation_space, env.action_space)
    env.close()
    kinds = frozenset({"infer"})
    rates = {}
    for size in sizes:
        requests = [[bytes(f) for f in codec.encode(
            "infer", {"group": g % 2}, {"obs": {k: v[s:s + REQUEST_ROWS] for k, v in obs.items()}}, key=key)]
            for g, s in enumerate(range(0, size, REQUEST_ROWS))]

        def work() -> int:
            parsed = []
            for frames in requests:
                _, meta, arrays = codec.decode(frames, kinds, key=key)
                parsed.append(read_infer(meta, arrays))
            actions, logp, values = run_policy(policy, tree_concat([p[1] for p in parsed]))
            offset = 0
            for request in parsed:  # (group, obs, rows, ...)
                part = slice(offset, offset + request[2])
                offset += request[2]
                codec.encode("actions", {"group": request[0], "version": 1},
                             {"actions": actions[part], "logp": logp[part], "values": values[part]}, key=key)
            return offset

        work()  # warm-up at this shape
        rates[str(size)] = _cpu_rate(work, seconds_each)
    return rates


def measure_trainer(config, fragments: list[list[bytes]], key: bytes, epochs: tuple[int, ...], repeats: int
                    ) -> dict[str, Any]:
    """Env-agent steps per CPU-second of decoding a batch of fragments and one ``Learner.train``."""
    import torch

    from srl_lab.system import codec
    from srl_lab.system.learner import Learner

    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    for n_epochs in epochs:
        cfg = dataclasses.replace(config, ppo=dataclasses.replace(config.ppo, epochs=n_epochs))
        learner = Learner(cfg)
        rates, rows = [], 0
        for attempt in range(repeats + 1):  # the first update warms torch up and is not counted
            start = time.process_time()
            rows = 0
            for frames in fragments:
                _, _, arrays = codec.decode(frames, frozenset({"fragment"}), key=key)
                arrays["versions"] = np.full_like(arrays["versions"], learner.version)  # never stale
                learner.offer(arrays, [], 0)
                rows += arrays["rewards"].size
                if learner.ready():
                    break
            learner.train()
            if attempt:
                rates.append(rows / (time.process_time() - start))
        out[str(n_epochs)] = statistics.median(rates)
        out["batch_env_agent_steps"] = rows
    return out


def measure_broadcast(config, subscribers: tuple[int, ...] = SUBSCRIBERS, versions: int = 3) -> dict[str, Any]:
    """Weight size, encode and per-reader decode/load cost, and delivery of one version to N readers."""
    import torch
    import zmq

    from srl_lab.envs.factory import make_policy, probe_env
    from srl_lab.system import codec
    from srl_lab.system.parameters import ParameterClient, ParameterService
    from srl_lab.system.streams import FixedEndpoint

    torch.set_num_threads(1)
    probe = probe_env(config)
    policy = make_policy(config, probe.observation_space, probe.action_space, probe)
    weights = policy.weights()
    key = codec.new_secret()

    def timed(fn: Callable[[], Any], n: int = 7) -> float:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    frames = [bytes(f) for f in codec.encode("params", {"version": 1, "origin": 0}, weights, key=key)]
    result: dict[str, Any] = {
        "weight_bytes": int(sum(v.nbytes for v in weights.values())),
        "parameters": int(sum(p.numel() for p in policy.parameters())),
        "encode_s": timed(lambda: codec.encode("params", {"version": 1, "origin": 0}, weights, key=key)),
        "decode_s": timed(lambda: codec.decode(frames, frozenset({"params"}), key=key)),
        "load_weights_s": timed(lambda: policy.load_weights(weights)),
        "deliver_s": {},
    }
    zctx = zmq.Context()
    service = ParameterService(zctx, "scaling-broadcast", key)
    try:
        for n in subscribers:
            clients = [ParameterClient(zctx, FixedEndpoint(service.endpoint), key, poll_s=0.0) for _ in range(n)]
            times = []
            for v in range(1, versions + 2):  # the first version connects every reader and is not counted
                service.publish(v, weights)
                start = time.perf_counter()
                # Every reader asks once (the reply is the new weights; a fast one may be in already).
                waiting = {c.peer.sock: c for c in clients if c.poll() is None}
                poller = zmq.Poller()
                for sock in waiting:
                    poller.register(sock, zmq.POLLIN)
                while waiting:  # block in zmq (GIL released) so the service thread runs freely
                    for sock, _ in poller.poll(1000):
                        if sock in waiting and waiting[sock].poll() is not None:
                            poller.unregister(sock)
                            del waiting[sock]
                if v > 1:
                    times.append(time.perf_counter() - start)
            result["deliver_s"][str(n)] = statistics.median(times)
            for c in clients:
                c.close()
    finally:
        service.close()
        zctx.destroy(linger=0)
    lo, hi = min(subscribers), max(subscribers)
    # marginal cost of one more reader (fixed costs cancel): what the service pays per subscriber
    result["deliver_s_per_reader"] = (result["deliver_s"][str(hi)] - result["deliver_s"][str(lo)]) / (hi - lo)
    return result


# Assumptions of the projection (not measured here; change them to match a cluster).
GPU_CORE_EQUIVALENTS = 200  # one GPU does the work of this many of the measured CPU cores for this model
NIC_BYTES_PER_S = 25e9 / 8  # the parameter service's network link: 25 Gb/s
GPUS = 32  # SRL's GPU count
SCALES = (1_000, 15_000)  # actor cores


def project(model: dict[str, Any], cores: int, env: str = "lite", epochs: str = "4", gpus: int = GPUS,
            gpu_core_equivalents: float = GPU_CORE_EQUIVALENTS, nic_bytes_per_s: float = NIC_BYTES_PER_S,
            poll_s: float = 0.05) -> dict[str, Any]:
    """Projected rates and needs for ``cores`` actor cores, from the measured per-core figures.

    Per env step an actor core spends ``1/E`` in the env plus the measured rest of the actor loop
    (inline: the 64-row forward pass, fragments; remote: request/reply codec, fragments), so the
    ``mujoco`` projection swaps only the env term. Inference and training loads are rows (env-agent
    steps) per second divided by the measured per-core rates: CPU core-equivalents, then GPUs at
    ``gpu_core_equivalents`` cores per GPU (an assumption). With ``gpus`` GPUs shared by policy
    workers and trainers, the env rate is the smaller of what the actor cores make and what the GPUs
    can infer and train on. Inline, every actor process reads the weights; remote, only the policy
    workers do (one per GPU here).
    """
    k = model["agents_per_env"]
    env_rate = model["env_steps_per_cpu_s"] if env == "lite" else model["mujoco_env_steps_per_cpu_s"]
    if env_rate is None:
        return {}
    lite_env_s = 1.0 / model["env_steps_per_cpu_s"]
    policy_rows = max(model["policy_rows_per_cpu_s"].values())  # a GPU policy worker batches fully
    trainer_rows = model["trainer_env_agent_steps_per_cpu_s_by_epochs"][epochs]
    weight_bytes = model["broadcast"]["weight_bytes"]
    out: dict[str, Any] = {}
    for mode, actor_rate in (("inline", model["actor_inline_env_steps_per_cpu_s"]),
                             ("remote", model["actor_remote_side_env_steps_per_cpu_s"])):
        per_core = 1.0 / (1.0 / env_rate + (1.0 / actor_rate - lite_env_s))
        made = cores * per_core
        # GPU work per env step, in GPU-seconds: inference (remote only) + training
        gpu_s_per_step = k * ((1.0 / policy_rows if mode == "remote" else 0.0) + 1.0 / trainer_rows) \
            / gpu_core_equivalents
        gpu_limit = gpus / gpu_s_per_step
        rate = min(made, gpu_limit)
        policy_gpus = rate * k / policy_rows / gpu_core_equivalents if mode == "remote" else 0.0
        trainer_gpus = rate * k / trainer_rows / gpu_core_equivalents
        readers = cores if mode == "inline" else max(1, math.ceil(policy_gpus))
        out[mode] = {
            "actor_env_steps_per_core_s": per_core,
            "env_steps_per_s_actors_can_make": made,
            "env_steps_per_s_gpus_can_serve": gpu_limit,
            "env_steps_per_s": rate,
            "bottleneck": "actor cores" if made <= gpu_limit else
                          ("GPUs (inference + training)" if mode == "remote" else "GPUs (training)"),
            "policy_worker_gpus": policy_gpus,
            "trainer_gpus": trainer_gpus,
            "gpus_needed_for_all_actors": made * gpu_s_per_step,
            "weight_readers": readers,
            # one version to every reader: at least this long on the service's link; every reader
            # fetching a new version every poll_s would need broadcast_bytes_per_s
            "link_s_per_version_to_all_readers": readers * weight_bytes / nic_bytes_per_s,
            "broadcast_bytes_per_s_at_poll": readers * weight_bytes / poll_s,
            # the service's own measured cost per reader (in one process, with the readers' decoding)
            "service_s_per_version_measured_per_reader": readers * model["broadcast"]["deliver_s_per_reader"],
        }
    return out


def projections(model: dict[str, Any]) -> dict[str, Any]:
    """``project`` at every scale in ``SCALES`` for both env variants (the showcase's PPO epochs)."""
    return {"assumptions": {"gpu_core_equivalents": GPU_CORE_EQUIVALENTS, "nic_bytes_per_s": NIC_BYTES_PER_S,
                            "gpus": GPUS, "ppo_epochs": 4, "weight_poll_s": 0.05},
            **{env: {str(cores): project(model, cores, env) for cores in SCALES} for env in ("lite", "mujoco")}}


def run_model(quick: bool = False, epochs: tuple[int, ...] = (4, 1)) -> dict[str, Any]:
    """Every scaling-model figure, printed as it comes; returns them as one dict."""
    scale = 0.25 if quick else 1.0
    config = recipe_config()
    agents = config.env.kwargs["n_hiders"] + config.env.kwargs["n_seekers"]
    fragment_rows = config.actors.fragment_length * config.actors.envs_per_group * agents
    model: dict[str, Any] = {"agents_per_env": agents, "envs_per_group": config.actors.envs_per_group,
                             "policy": "EntityAttentionPolicy(hidden=64, embed=32) as in showcase_config()"}
    model["env_steps_per_cpu_s"] = measure_env(config, 3 * scale)
    print(f"env only: {model['env_steps_per_cpu_s']:,.0f} env steps/CPU-s", flush=True)
    actors = measure_actors(config, 8 * scale, keep_fragments=-(-config.trainer.batch_steps // fragment_rows))
    model["actor_inline_env_steps_per_cpu_s"] = actors["actor_inline"]
    model["actor_remote_side_env_steps_per_cpu_s"] = actors["actor_remote_side"]
    print(f"actor, inline inference: {actors['actor_inline']:,.0f} env steps/CPU-s; actor side of remote "
          f"inference: {actors['actor_remote_side']:,.0f} env steps/CPU-s", flush=True)
    model["policy_rows_per_cpu_s"] = measure_policy_batches(config, 2.0 * scale)
    print("policy worker rows/CPU-s by batch size: "
          + ", ".join(f"{b}: {r:,.0f}" for b, r in model["policy_rows_per_cpu_s"].items()), flush=True)
    trainer = measure_trainer(config, actors["fragments"], actors["key"], epochs, repeats=1 if quick else 2)
    model["trainer_batch_env_agent_steps"] = trainer.pop("batch_env_agent_steps")
    model["trainer_env_agent_steps_per_cpu_s_by_epochs"] = trainer
    print("trainer env-agent steps/CPU-s by PPO epochs: "
          + ", ".join(f"{e}: {r:,.0f}" for e, r in trainer.items()), flush=True)
    model["broadcast"] = measure_broadcast(config, versions=2 if quick else 3)
    b = model["broadcast"]
    print(f"weights {b['weight_bytes'] / 1e6:.2f} MB ({b['parameters']:,} parameters): encode "
          f"{1e3 * b['encode_s']:.2f} ms, decode {1e3 * b['decode_s']:.2f} ms, load {1e3 * b['load_weights_s']:.2f} ms;"
          " delivery to N readers: " + ", ".join(f"{n}: {1e3 * s:.1f} ms" for n, s in b["deliver_s"].items()),
          flush=True)
    model["mujoco_env_steps_per_cpu_s"] = measure_mujoco_env(3 * scale)
    if model["mujoco_env_steps_per_cpu_s"] is not None:
        print(f"mujoco variant env only: {model['mujoco_env_steps_per_cpu_s']:,.0f} env steps/CPU-s", flush=True)
    model["projection"] = projections(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurements (a smoke run)")
    args = parser.parse_args()
    print(json.dumps(run_model(args.quick)))


if __name__ == "__main__":
    main()
