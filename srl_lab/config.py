"""Typed experiment configuration, validated before anything launches.

Every check names the offending field and says how to fix it, so a typo costs a second, not a
cluster allocation. ``ExperimentConfig.validate()`` runs the checks that need nothing but the config
and one local environment instance; ``srl_lab.system.controller.launch`` adds the checks that need the
cluster (e.g. a GPU was requested but no Dask worker offers one).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal


class ConfigError(ValueError):
    """An invalid configuration; ``field`` is the dotted path of the offending entry."""

    def __init__(self, field: str, problem: str, fix: str):
        self.field = field
        super().__init__(f"{field}: {problem}. Fix: {fix}")


@dataclass
class EnvConfig:
    """Which environment to run: a registered name / gymnasium id, or a factory callable.

    A factory (e.g. a class defined in a notebook cell) is called as ``factory(**kwargs)`` for a
    single gymnasium env; it travels to the workers with cloudpickle at launch.

    ``vector=True`` uses a gymnasium ``VectorEnv`` as each env group, at its native speed: a
    gymnasium id is built with ``gymnasium.make_vec(id, num_envs, vectorization_mode=
    "vector_entry_point")`` (numpy-vectorised where the env has it, e.g. CartPole), a factory is
    called as ``factory(num_envs=n, **kwargs)`` and must return a ``VectorEnv``.
    """

    id: str | None = "CartPole-v1"
    factory: Callable[..., Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    vector: bool = False


@dataclass
class ActorConfig:
    """Actor workers: each runs a ring of ``ring_size`` env groups of ``envs_per_group`` envs."""

    workers: int = 2
    ring_size: int = 2
    envs_per_group: int = 16
    fragment_length: int = 64


@dataclass
class InferenceConfig:
    """``inline``: the policy runs inside each actor process. ``remote``: dedicated policy workers."""

    mode: Literal["inline", "remote"] = "inline"
    policy_workers: int = 1
    max_batch_rows: int = 4096  # cap on rows merged into one forward pass
    device: str = "cpu"  # "cuda" places policy workers on Dask workers offering resource GPU
    weight_poll_s: float = 0.05


@dataclass
class TrainerConfig:
    """The trainer: consumes fragments, runs the algorithm, publishes versioned weights."""

    batch_steps: int = 4096  # env-agent steps per training batch, per data-parallel trainer
    # True: batch_steps counts per actor worker. The trainer updates once it holds batch_steps times
    # the actors that sent to it over its last two batches, so actors added or removed live (Run.scale)
    # keep the policy lag, in versions, near one actor's (pair it with ppo.minibatches).
    batch_per_actor: bool = False
    trainers: int = 1  # data-parallel trainer workers (torch.distributed: gloo on CPU, nccl on CUDA)
    max_version_lag: int = 2  # fragments whose oldest step is older than this are dropped (counted)
    device: str = "cpu"
    checkpoint_every_versions: int = 50
    buffer_fragments: int = 256  # receive high-water mark: a slow trainer slows actors
    checkpoint_every_s: float = 300.0  # also checkpoint when this long has passed (0: only by versions)
    checkpoint_keep: int = 5  # newest checkpoints kept in run_dir/checkpoints
    heartbeat_timeout_s: float = 60.0  # a worker silent this long is restarted (any role)


@dataclass
class PPOConfig:
    lr: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    dual_clip: float = 3.0  # where the advantage is negative, ratios past this give no gradient (0: off)
    epochs: int = 4
    minibatch_size: int = 1024  # rows per minibatch; 0 to split each batch into ``minibatches`` instead
    minibatches: int = 0  # > 0: minibatches per epoch whatever the batch's size (needs minibatch_size=0)
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    norm_adv: bool = True
    anneal_lr_steps: int = 0  # linearly anneal lr to 0 over this many env steps (0: constant)
    value_clip: float = 0.0  # keep V within this of the values the advantages came from (0: no clipping)
    norm_value: bool = False  # the value head predicts returns normalised by a running mean/std
    value_norm_beta: float = 0.99  # EMA decay per update of those statistics
    norm_obs: bool = False  # update the policy's running observation mean/std from every batch
    # vtrace: off-policy correction of stale samples; vtrace_minibatch: V-trace from each minibatch's own
    # pass, the clip measured from the behaviour policy (feed-forward policies; a quarter fewer passes)
    advantage: Literal["gae", "vtrace", "vtrace_minibatch"] = "gae"
    vtrace_rho_bar: float = 1.0  # truncation of the importance weights in V-trace
    vtrace_c_bar: float = 1.0
    max_staleness: int | None = None  # epoch e uses samples at most (max_staleness - e) versions old
    chunk_length: int = 0  # recurrent policies: BPTT chunk length in steps (0: the whole fragment)
    # recurrent policies, GAE only: steps before a chunk replayed without gradient to refresh its stored
    # state (with V-trace every chunk starts from the state the proximal pass reached)
    burn_in: int = 0


@dataclass
class PoolConfig:
    """Self-play against frozen past versions of a policy (``srl_lab.system.opponent_pool``).

    The policy's trainer keeps every ``every_versions``-th version, ``size`` at most (the oldest
    leaves). In ``envs_fraction`` of each env group one team of the policy's agents (alternating
    over those envs) is played by a past version drawn by ``sampling`` ("latest", "uniform", or
    "win_rate": the versions the trained side beats least as that team, more often), each team its
    own, redrawn every ``swap_steps`` steps of the group; those rows are never trained on.
    """

    every_versions: int = 10
    size: int = 8
    envs_fraction: float = 0.5
    sampling: Literal["latest", "uniform", "win_rate"] = "uniform"
    swap_steps: int = 256


@dataclass
class PolicyConfig:
    """The network. ``factory(observation_space, action_space) -> Policy`` overrides the MLP."""

    hidden: tuple[int, ...] = (64, 64)
    factory: Callable[..., Any] | None = None
    mapping: Literal["shared", "per_team"] = "shared"  # all agents share one network, or one per team
    pool: PoolConfig | None = None  # play part of the envs against past versions of this policy


@dataclass
class PolicySpec:
    """One of several policies (``ExperimentConfig.policies``): its network, algorithm, trainers and device.

    Unset fields take the experiment's: ``ppo`` its ``ppo``, ``batch_steps`` its ``trainer.batch_steps``,
    ``algorithm`` its ``algorithm``.
    """

    factory: Callable[..., Any] | None = None  # factory(observation_space, action_space) -> Policy
    hidden: tuple[int, ...] = (64, 64)  # the MLP's layers when there is no factory
    ppo: PPOConfig | None = None
    algorithm: Callable[..., Any] | None = None
    trainers: int = 1
    device: str = "cpu"
    batch_steps: int | None = None
    pool: PoolConfig | None = None  # some of its agents play past versions of it (PoolConfig)


@dataclass
class ExperimentConfig:
    name: str = "cartpole"
    env: EnvConfig = field(default_factory=EnvConfig)
    actors: ActorConfig = field(default_factory=ActorConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    seed: int = 0
    run_dir: str | None = None  # defaults to runs/<name>-<timestamp>
    metrics_interval_s: float = 1.0
    algorithm: Callable[..., Any] | None = None  # algorithm(policy, ppo_config, device) -> Algorithm; None: PPO
    # Several policies, each with its own trainers and parameter stream (empty: one policy, the
    # ``policy`` / ``ppo`` / ``trainer`` sections above), and which plays each agent: a dict or a
    # callable from agent id (PettingZoo's names) to policy name.
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    policy_mapping: dict[str, str] | Callable[[str], str] | None = None

    def validate(self) -> "ExperimentConfig":
        """Raise ``ConfigError`` naming the first invalid field; returns self for chaining."""
        _positive(self.actors.workers, "actors.workers", "the number of actor worker processes, e.g. 2")
        _positive(self.actors.ring_size, "actors.ring_size", "the number of env groups per actor, e.g. 2")
        _positive(self.actors.envs_per_group, "actors.envs_per_group", "envs stepped together, e.g. 16")
        _positive(self.actors.fragment_length, "actors.fragment_length", "steps per fragment, e.g. 64")
        _positive(self.trainer.batch_steps, "trainer.batch_steps", "env steps per update, e.g. 4096")
        _positive(self.trainer.trainers, "trainer.trainers", "the number of data-parallel trainers, e.g. 1")
        if not isinstance(self.trainer.batch_per_actor, bool):
            raise ConfigError("trainer.batch_per_actor", f"must be True or False, got {self.trainer.batch_per_actor!r}",
                              "True sizes each batch to the actor workers sending")
        if self.policy.mapping not in ("shared", "per_team"):
            raise ConfigError("policy.mapping", f"unknown mapping {self.policy.mapping!r}",
                              "use 'shared' (one network for all agents) or 'per_team' (one per team)")
        _check_ppo(self.ppo, self.actors.fragment_length)
        from srl_lab.policies import check_policies

        check_policies(self)
        check_actors_feed_trainers(self, self.actors.workers, "actors.workers")
        if self.trainer.max_version_lag < 0:
            raise ConfigError("trainer.max_version_lag", f"must be >= 0, got {self.trainer.max_version_lag}",
                              "use 0 for strictly on-policy samples or a small positive lag")
        _positive(self.trainer.checkpoint_keep, "trainer.checkpoint_keep", "how many checkpoints to keep, e.g. 5")
        for name in ("trainer.checkpoint_every_s", "trainer.heartbeat_timeout_s"):
            value = _get(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ConfigError(name, f"must be a number of seconds >= 0, got {value!r}",
                                  "e.g. 300 for checkpoints, 60 for heartbeats")
        if self.trainer.heartbeat_timeout_s < 5:
            raise ConfigError("trainer.heartbeat_timeout_s", f"{self.trainer.heartbeat_timeout_s} s would restart "
                              "healthy workers (heartbeats come every second)", "use 5 s or more, e.g. 60")
        if self.inference.mode not in ("inline", "remote"):
            raise ConfigError("inference.mode", f"unknown mode {self.inference.mode!r}",
                              "use 'inline' (policy in the actor) or 'remote' (policy workers)")
        if self.inference.mode == "remote":
            _positive(self.inference.policy_workers, "inference.policy_workers", "e.g. 1")
        for name in ("inference.device", "trainer.device"):
            device = _get(self, name)
            if not (device == "cpu" or device.startswith("cuda")):
                raise ConfigError(name, f"unknown device {device!r}", "use 'cpu' or 'cuda'")
        if (self.env.id is None) == (self.env.factory is None):
            raise ConfigError("env.id", "give exactly one of env.id and env.factory",
                              "set env.id to a registered name or gymnasium id, or env.factory to a callable")
        if self.env.vector and self.env.id is not None and _registry_has(self.env.id):
            raise ConfigError("env.vector", f"{self.env.id!r} is an srl_lab env group, already batched",
                              "leave env.vector False for it")
        from srl_lab.envs.factory import check_env_and_policy

        check_env_and_policy(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (callables are recorded by name) for the run directory."""
        from srl_lab.config_io import jsonable

        return jsonable(dataclasses.asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ExperimentConfig":
        """Rebuild a config saved by ``to_dict`` (factories are not restorable and come back None)."""
        from srl_lab.config_io import config_from_dict

        return config_from_dict(d)


def _check_ppo(ppo: PPOConfig, fragment_length: int) -> None:
    """PPO settings that cannot work, alone or together, named before launch rather than in the trainer."""
    _positive(ppo.epochs, "ppo.epochs", "passes over each batch, e.g. 4")
    for name in ("minibatch_size", "minibatches"):
        value = getattr(ppo, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"ppo.{name}", f"must be an integer >= 0, got {value!r}", "e.g. 1024 rows, or 4 minibatches")
    if (ppo.minibatch_size > 0) == (ppo.minibatches > 0):
        raise ConfigError("ppo.minibatches", f"give exactly one of ppo.minibatch_size ({ppo.minibatch_size}) and "
                          f"ppo.minibatches ({ppo.minibatches})",
                          "set ppo.minibatch_size=0 to split each batch into ppo.minibatches, or ppo.minibatches=0")
    for name, value, low, high, hint in (
            ("lr", ppo.lr, 0.0, None, "e.g. 2.5e-4"), ("clip_coef", ppo.clip_coef, 0.0, None, "e.g. 0.2"),
            ("gamma", ppo.gamma, 0.0, 1.0, "a discount in (0, 1], e.g. 0.99"),
            ("gae_lambda", ppo.gae_lambda, -1e-12, 1.0, "in [0, 1], e.g. 0.95"),
            ("vtrace_rho_bar", ppo.vtrace_rho_bar, 0.0, None, "e.g. 1.0"),
            ("vtrace_c_bar", ppo.vtrace_c_bar, 0.0, None, "e.g. 1.0"),
            ("value_norm_beta", ppo.value_norm_beta, 0.0, 1.0, "an EMA decay in (0, 1], e.g. 0.99")):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > low \
                or (high is not None and value > high):
            bounds = (">= 0" if low < 0 else f"> {low:g}") + (f" and <= {high:g}" if high is not None else "")
            raise ConfigError(f"ppo.{name}", f"must be a number {bounds}, got {value!r}", hint)
    for name in ("ent_coef", "vf_coef", "max_grad_norm", "value_clip", "anneal_lr_steps", "burn_in", "chunk_length"):
        value = getattr(ppo, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"ppo.{name}", f"must be a number >= 0, got {value!r}", "0 turns it off")
    if not isinstance(ppo.dual_clip, (int, float)) or isinstance(ppo.dual_clip, bool) \
            or not (ppo.dual_clip == 0 or ppo.dual_clip > 1 + ppo.clip_coef):
        raise ConfigError("ppo.dual_clip", f"must be 0 (off) or above 1 + clip_coef = {1 + ppo.clip_coef:g}, "
                          f"got {ppo.dual_clip!r}", "e.g. 3.0")
    if ppo.advantage not in ("gae", "vtrace", "vtrace_minibatch"):
        raise ConfigError("ppo.advantage", f"unknown estimator {ppo.advantage!r}",
                          "use 'gae', 'vtrace' (corrects stale samples) or 'vtrace_minibatch' (the same "
                          "from each minibatch's own pass)")
    if ppo.max_staleness is not None and (not isinstance(ppo.max_staleness, int) or ppo.max_staleness < 0):
        raise ConfigError("ppo.max_staleness", f"must be None or an integer >= 0, got {ppo.max_staleness!r}",
                          "None keeps every sample for every epoch")
    if ppo.chunk_length and fragment_length % ppo.chunk_length:
        raise ConfigError("ppo.chunk_length", f"{ppo.chunk_length} does not divide actors.fragment_length "
                          f"{fragment_length}: fragments are cut into whole chunks",
                          f"use a divisor of {fragment_length}, e.g. {whole_chunk_length(fragment_length, ppo.chunk_length)}, "
                          "or 0")


def whole_chunk_length(fragment_length: int, at_most: int) -> int:
    """The longest BPTT chunk, up to ``at_most`` steps, that cuts a fragment into whole chunks."""
    return max(d for d in range(1, at_most + 1) if fragment_length % d == 0)


def check_actors_feed_trainers(config: "ExperimentConfig", actors: int, field: str) -> None:
    """``ConfigError`` naming ``field`` when ``actors`` actor workers leave a data-parallel trainer
    without samples: actor i feeds rank i % trainers, and every rank waits for the others' batches."""
    from srl_lab.policies import most_trainers

    if actors < (trainers := most_trainers(config)):
        raise ConfigError(field, f"{actors} actor worker(s) cannot feed {trainers} data-parallel trainers "
                          "(actor i feeds trainer i % trainers; one without actors never fills a batch)",
                          f"use at least {trainers} actor workers, or fewer trainers")


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _positive(value: Any, name: str, example: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(name, f"must be a positive integer, got {value!r}", f"set it to {example}")


def _registry_has(name: str) -> bool:
    from srl_lab.envs import registry

    return registry.is_registered(name)


def with_overrides(section: Any, assignments: list[str]) -> Any:
    """A copy of a config dataclass (e.g. a ``PPOConfig``) with ``FIELD=VALUE`` assignments applied, each
    value typed like the field's current one (a number where it is None); command lines use it."""
    fields = {f.name for f in dataclasses.fields(section)}
    changes = {}
    for assignment in assignments:
        name, _, text = assignment.partition("=")
        if name not in fields or not text:
            raise ValueError(f"{assignment!r}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        try:
            changes[name] = _typed(text, getattr(section, name))
        except ValueError as wanted:
            raise ValueError(f"{assignment!r}: {name} takes {wanted}, got {text!r}") from None
    return dataclasses.replace(section, **changes)


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _typed(text: str, current: Any) -> Any:
    """``text`` as the type of the field's current value; a ValueError says what the field takes."""
    if isinstance(current, bool):
        if text.lower() not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError("true or false")  # not silently False for a typo such as "ture"
        return text.lower() in TRUE_WORDS
    if isinstance(current, (int, float)) or current is None:
        try:
            number = float(text)
        except ValueError:
            raise ValueError("a number") from None
        if isinstance(current, int) and not number.is_integer():
            raise ValueError("a whole number")  # epochs=2.5 is not quietly 2
        return int(number) if isinstance(current, int) or (current is None and number.is_integer()) else number
    return text
