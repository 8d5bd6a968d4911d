"""Play one episode of a policy and film it: what the viewing process runs.

The policy comes from a ``WeightsSource``: the live run's parameter service (the latest version), a
checkpoint file, or weights handed over (a stopped run's final ones). Every agent is played by the
policy, as in self-play training; actions are sampled, as the actors do. The env is built like the
actors build it, for one env, with ``render_mode="rgb_array"`` where a gymnasium env needs it.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import cloudpickle
import numpy as np
import torch

from srl_lab.api.env import extras
from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.envs.factory import describe, make_env_group, make_policy
from srl_lab.system import checkpoints
from srl_lab.system.actor_ring import flatten_rows
from srl_lab.viewer import frames

TEAM_COLOURS = ((40, 110, 230), (220, 50, 50))  # the top-down renderer's hider and seeker colours
WEIGHTS_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class WeightsSource:
    """Where the policy's weights come from: ``endpoint`` + ``key`` (a live run's parameter service),
    ``checkpoint`` (a file in a run's ``checkpoints/``) or ``weights`` (with their ``version``)."""

    endpoint: dict[str, Any] | None = None
    key: bytes | None = None
    checkpoint: str | None = None
    weights: dict[str, np.ndarray] | None = None
    version: int = -1


@dataclasses.dataclass
class Episode:
    """A filmed episode: one PNG per step for the player, the GIF to save, what the episode scored."""

    version: int
    pngs: list[bytes]
    gif: bytes
    size: tuple[int, int]  # (height, width) of a frame, caption included
    stats: dict[str, float]
    seconds: float  # wall-clock time the viewing process spent on it
    seed: int


class Player:
    """Plays episodes, keeping the env and network of the last config between them (the viewing
    process plays the same run's episodes again and again: building them each time costs more than
    a frame)."""

    def __init__(self) -> None:
        self._built: tuple[bytes, Any, Policy] | None = None  # (pickled config, env, policy)

    def play(self, config: Any, source: WeightsSource, seed: int = 0, pixels: int = 400,
             max_steps: int = 1000, fps: float = 10.0) -> Episode:
        """Play and film one episode of ``config``'s env (an ``ExperimentConfig``; None: the checkpoint's)."""
        start = time.perf_counter()
        torch.set_num_threads(1)
        weights, version, config = _load(source, config)
        env, policy = self._build(config, seed)
        policy.load_weights(weights)
        shots, stats = _film(env, policy, seed, pixels, max_steps, version)
        return Episode(version=version, pngs=[frames.png(f) for f in shots], gif=frames.gif(shots, fps),
                       size=shots[0].shape[:2], stats=stats, seconds=time.perf_counter() - start, seed=seed)

    def _build(self, config: Any, seed: int) -> tuple[Any, Policy]:
        key = cloudpickle.dumps(config)
        if self._built is None or self._built[0] != key:
            self.close()
            env = _viewing_env(config, seed)
            policy = make_policy(config, env.observation_space, env.action_space, describe(env))
            policy.eval()
            self._built = (key, env, policy)
        return self._built[1], self._built[2]

    def close(self) -> None:
        if self._built is not None:
            self._built[1].close()
            self._built = None


def play_episode(config: Any, source: WeightsSource, seed: int = 0, pixels: int = 400,
                 max_steps: int = 1000, fps: float = 10.0) -> Episode:
    """Play and film one episode with a player of its own (``Player.play``)."""
    player = Player()
    try:
        return player.play(config, source, seed, pixels, max_steps, fps)
    finally:
        player.close()


def _load(source: WeightsSource, config: Any) -> tuple[dict[str, np.ndarray], int, Any]:
    if source.checkpoint is not None:
        state = checkpoints.load(source.checkpoint)
        config = config or cloudpickle.loads(state["config_pickle"])
        weights = {k: v.numpy() for k, v in state["algorithm"]["policy"].items()}
        return weights, int(state["version"]), config
    if config is None:
        raise ValueError("the run's config is needed unless the weights come from a checkpoint")
    if source.weights is not None:
        return source.weights, source.version, config
    if source.endpoint is None or source.key is None:
        raise ValueError("a WeightsSource needs an endpoint and key, a checkpoint, or weights")
    return (*_latest_published(source.endpoint, source.key), config)


def _latest_published(endpoint: dict[str, Any], key: bytes) -> tuple[dict[str, np.ndarray], int]:
    import zmq

    from srl_lab.system.parameters import ParameterClient
    from srl_lab.system.streams import Endpoint

    ctx = zmq.Context()
    client = ParameterClient(ctx, Endpoint.from_dict(endpoint), key)
    try:
        weights = client.wait_first(timeout_s=WEIGHTS_TIMEOUT_S)
        return weights, client.version
    finally:
        client.close()
        ctx.term()


def _viewing_env(config: Any, seed: int):
    """One env of the run's kind that can render: gymnasium envs are asked for ``rgb_array``."""
    from srl_lab.envs import registry

    if registry.is_registered(config.env.id):
        return make_env_group(config, 1, seed=seed)
    env = dataclasses.replace(config.env, kwargs={**config.env.kwargs, "render_mode": "rgb_array"})
    try:
        return make_env_group(dataclasses.replace(config, env=env), 1, seed=seed)
    except TypeError:  # a factory without a render_mode argument: its envs may render anyway
        return make_env_group(config, 1, seed=seed)


def _film(env: Any, policy: Policy, seed: int, pixels: int, max_steps: int, version: int
          ) -> tuple[list[np.ndarray], dict[str, float]]:
    """Step one episode (or ``max_steps``), rendering each state before acting on it."""
    n_agents = env.num_agents
    info = extras(env)
    names, prep, horizon = info.team_names, info.prep_steps, info.horizon
    legend = [(f"{name}s", colour) for name, colour in zip(names, TEAM_COLOURS)] if names else []
    obs = env.reset(seed=seed)
    state = policy.initial_state(n_agents) if policy.recurrent else None
    shots: list[np.ndarray] = []
    stats: dict[str, float] = {}
    for t in range(max_steps):
        frame = env.render(0, pixels)
        if frame is None:
            raise RuntimeError(f"{type(env).__name__} rendered nothing: the viewer needs an env whose render() "
                               "returns an RGB array (gymnasium: render_mode='rgb_array')")
        phase = ("preparation" if t < prep else "play") if prep else ""
        steps = f"step {t + 1}/{horizon}" if horizon else f"step {t + 1}"
        shots.append(frames.caption(frames.fit(frame, pixels), f"v{version}  {steps}  {phase}".rstrip(), legend))
        rows = obs_to_tensor(flatten_rows(obs, n_agents))
        actions, _, _, state = policy.act(rows, state)
        result = env.step(actions.numpy().reshape(1, n_agents, *actions.shape[1:]))
        obs = result.obs
        if result.episodes or bool(result.terminated[0] or result.truncated[0]):
            stats = dict(result.episodes[0]) if result.episodes else {}
            break
    return shots, {k: float(v) for k, v in stats.items() if isinstance(v, (int, float, np.number))}
