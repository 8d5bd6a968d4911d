"""Train hide-and-seek (the lite variant) on the SRL runtime and plot the emergent-phase statistics.

    python recipes/hide_and_seek.py --minutes 3            # what `make demo` runs
    python recipes/hide_and_seek.py --minutes 60 --hiders 2 --seekers 2 --scheduler tcp://host:8786

Writes the run directory: config, metrics (JSON lines), checkpoints and ``curve.png`` with team
returns, the fraction of play steps hidden and the box/ramp move and lock statistics.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools

from srl_lab.config import (ActorConfig, EnvConfig, ExperimentConfig, InferenceConfig, PolicyConfig,
                            PPOConfig, TrainerConfig)
from srl_lab.models.entity_attention import EntityAttentionPolicy


def hide_and_seek_config(hiders: int = 1, seekers: int = 1, actors: int = 1, scenario: str = "quadrant",
                         envs_per_group: int = 32, hidden: int = 128, embed: int = 64,
                         hider_spawn: str = "room", mapping: str = "shared",
                         random_opponents: float = 0.0) -> ExperimentConfig:
    """A config sized for a small CPU machine; scale ``actors``/sizes up on a cluster.

    ``hider_spawn``: quadrant hiders start in the room (the original's default) or ``"anywhere"``.
    ``mapping``: one network shared by both teams (it reads the hider flag) or one per team.
    ``random_opponents``: fraction of envs where one team plays uniform random actions (the rest is
    self-play); the policy trains only on the team it plays there.
    """
    return ExperimentConfig(
        name=f"hide-and-seek-{scenario}-{hiders}v{seekers}",
        env=EnvConfig(id="hide_and_seek_lite",
                      kwargs={"scenario": scenario, "n_hiders": hiders, "n_seekers": seekers,
                              "hider_spawn": hider_spawn, "random_opponents": random_opponents}),
        actors=ActorConfig(workers=actors, ring_size=2, envs_per_group=envs_per_group, fragment_length=40),
        inference=InferenceConfig(mode="inline"),
        policy=PolicyConfig(factory=functools.partial(EntityAttentionPolicy, hidden=hidden, embed=embed),
                            mapping=mapping),
        # A short receive buffer: a trainer slower than the actors holds them back instead of
        # queueing fragments that would be dropped as stale by the time it reached them.
        trainer=TrainerConfig(batch_steps=8192, max_version_lag=2, buffer_fragments=4),
        # Returns are +-1 per step (up to +-horizon): normalised values keep the critic's gradient from
        # swamping the policy's under the shared grad-norm clip.
        ppo=PPOConfig(lr=3e-4, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, epochs=4, minibatch_size=2048,
                      ent_coef=0.005, vf_coef=0.5, max_grad_norm=5.0, norm_value=True, norm_obs=True),
    )


def override(section, assignments: list[str], parser: argparse.ArgumentParser):
    """A copy of a config dataclass with ``FIELD=VALUE`` assignments applied (values typed like the field)."""
    fields = {f.name for f in dataclasses.fields(section)}
    changes = {}
    for assignment in assignments:
        name, _, text = assignment.partition("=")
        if name not in fields or not text:
            parser.error(f"--ppo {assignment!r}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        changes[name] = _typed(text, getattr(section, name))
    return dataclasses.replace(section, **changes)


def _typed(text: str, current):
    """``text`` as the type of the field's current value (a number when the field is None)."""
    if isinstance(current, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(current, (int, float)) or current is None:
        number = float(text)
        return int(number) if isinstance(current, int) or (current is None and number.is_integer()) else number
    return text


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address (default: embedded cluster)")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--hiders", type=int, default=1)
    parser.add_argument("--seekers", type=int, default=1)
    parser.add_argument("--scenario", default="quadrant", choices=["quadrant", "randomwalls"])
    parser.add_argument("--hider-spawn", default="room", choices=["room", "anywhere"],
                        help="quadrant: hiders start in the room, or anywhere")
    parser.add_argument("--mapping", default="shared", choices=["shared", "per_team"],
                        help="one network for both teams, or one per team")
    parser.add_argument("--random-opponents", type=float, default=0.0, metavar="FRACTION",
                        help="fraction of envs in which one team plays randomly (the rest is self-play)")
    parser.add_argument("--hidden", type=int, default=128, help="width of the dense layer before the heads")
    parser.add_argument("--embed", type=int, default=64, help="entity embedding width")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a PPOConfig field, e.g. --ppo epochs=2 --ppo lr=5e-4 (repeatable)")
    args = parser.parse_args(argv)

    from srl_lab.system.controller import launch

    config = hide_and_seek_config(args.hiders, args.seekers, args.actors, args.scenario, hidden=args.hidden,
                                  embed=args.embed, hider_spawn=args.hider_spawn, mapping=args.mapping,
                                  random_opponents=args.random_opponents)
    config.ppo = override(config.ppo, args.ppo, parser)
    run = launch(config, client=args.scheduler, run_dir=args.run_dir)
    print(f"run directory: {run.run_dir}\nDask dashboard: {run.client.dashboard_link}")
    try:
        run.wait(seconds=args.minutes * 60)
    finally:
        result = run.stop()
    hider = run.metrics.mean_return(100, "hider_return")
    hidden = run.metrics.mean_return(100, "hidden_fraction")
    print(f"{result['env_steps']:,} env steps, {result['version']} updates; last 100 episodes: "
          f"hider return {hider:.1f}, hidden fraction {hidden:.2f}")
    print(f"learning curves: {run.run_dir}/curve.png")
    return {**result, "run": run}


if __name__ == "__main__":
    main()
