"""Train hide-and-seek (the lite variant) in self-play on the SRL runtime and show what it learned.

    python recipes/hide_and_seek.py --minutes 3            # what `make demo` runs
    python recipes/hide_and_seek.py --minutes 60 --size cluster --actors 8 --scheduler tcp://host:8786

The experiment is ``showcase_config`` (``srl_lab.envs.hide_and_seek.showcase``), the one
configuration notebook 02 and the benchmarks use too. Writes the run directory: config, metrics (JSON
lines), checkpoints and ``curve.png`` with team returns, the fraction of play steps hidden, the
fort and room statistics and the box/ramp move and lock statistics. At the end the trained policy
plays each team against uniform random actions and the recipe prints the before/after figures.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from srl_lab.config import ExperimentConfig, PoolConfig, with_overrides
from srl_lab.envs.hide_and_seek.showcase import SIZES, showcase_config
from srl_lab.envs.hide_and_seek.spec import DEFAULT_HORIZON, check_action_repeat


def _scale_step(text: str) -> tuple[float, int]:
    """``"MINUTE:ACTORS"`` -> (minute, actors)."""
    minute, _, actors = text.partition(":")
    try:
        step = float(minute), int(actors)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MINUTE:ACTORS, e.g. 1.5:4") from None
    if step[0] < 0 or step[1] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the minute must be >= 0 and the actors >= 1")
    return step


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address (default: embedded cluster)")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--run-dir", default=None)
    short = os.environ.get("SRL_LAB_SHORT", "").strip().lower() in ("1", "true", "yes")
    parser.add_argument("--size", default="short" if short else "laptop", choices=SIZES,
                        help="compute the configuration is sized for (default laptop: 2 cores)")
    parser.add_argument("--hiders", type=int, default=None)
    parser.add_argument("--seekers", type=int, default=None)
    parser.add_argument("--scenario", default="quadrant", choices=["quadrant", "randomwalls"])
    parser.add_argument("--hider-spawn", default="room", choices=["room", "anywhere"],
                        help="quadrant: hiders start in the room (the original's default), or anywhere")
    parser.add_argument("--mapping", default="shared", choices=["shared", "per_team"],
                        help="one network for both teams, or one per team")
    parser.add_argument("--random-opponents", type=float, default=0.0, metavar="FRACTION",
                        help="fraction of envs in which one team plays randomly (default 0: pure self-play)")
    parser.add_argument("--pool-every", type=int, default=0, metavar="VERSIONS",
                        help="keep every N-th version in a pool of 8 past versions; in half of the envs one team "
                             "plays a past version drawn uniformly (--pool changes these; default 0: always the "
                             "latest)")
    parser.add_argument("--pool", action="append", default=[], metavar="FIELD=VALUE",
                        help="with --pool-every, override a PoolConfig field, e.g. --pool sampling=win_rate "
                             "--pool size=16 (repeatable)")
    parser.add_argument("--hidden", type=int, default=None, help="width of the dense layer before the heads")
    parser.add_argument("--embed", type=int, default=None, help="entity embedding width")
    parser.add_argument("--heads", type=int, default=None, help="attention heads over the entities")
    parser.add_argument("--recurrent", action="store_true", help="add the spec's LSTM (BPTT chunks of up to 10 steps)")
    parser.add_argument("--action-repeat", type=int, default=1, metavar="STEPS",
                        help="env steps each decision acts for (default 1)")
    parser.add_argument("--device", default="cpu",
                        help="where the trainer and a policy worker run: cpu (inline inference) or cuda; actors stay "
                             "on the CPU cores")
    parser.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a PPOConfig field, e.g. --ppo epochs=2 --ppo lr=5e-4 (repeatable)")
    parser.add_argument("--trainer", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a TrainerConfig field, e.g. --trainer batch_per_actor=0 (repeatable)")
    parser.add_argument("--scale", action="append", default=[], type=_scale_step, metavar="MINUTE:ACTORS",
                        help="at that minute of training, change the actor workers to ACTORS, as the notebook's "
                             "actor control does, e.g. --scale 1:4 (repeatable)")
    parser.add_argument("--batch-steps", type=int, default=None,
                        help="env-agent steps per update per actor worker sending (default: the size's), in as "
                             "many minibatches (--ppo minibatches)")
    parser.add_argument("--eval-episodes", type=int, default=200,
                        help="episodes per arm of the before/after evaluation (0: skip it)")
    return parser.parse_args(argv), parser


def build_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ExperimentConfig:
    """The showcase config with the command line's changes; a bad override exits naming its flag."""
    try:
        check_action_repeat(args.action_repeat, DEFAULT_HORIZON[args.scenario])
    except ValueError as error:
        parser.error(f"--action-repeat: {error}")
    try:
        config = showcase_config(args.size, args.actors, hiders=args.hiders, seekers=args.seekers,
                                 scenario=args.scenario, hider_spawn=args.hider_spawn, mapping=args.mapping,
                                 hidden=args.hidden, embed=args.embed, heads=args.heads, device=args.device,
                                 recurrent=args.recurrent, action_repeat=args.action_repeat)
    except ValueError as error:
        parser.error(str(error))
    if args.batch_steps is not None:
        config.trainer.batch_steps = args.batch_steps
    if args.random_opponents:
        config.env.kwargs["random_opponents"] = args.random_opponents
    for section in ("ppo", "trainer"):
        try:
            setattr(config, section, with_overrides(getattr(config, section), getattr(args, section)))
        except ValueError as error:
            parser.error(f"--{section}: {error}")
    if args.pool and not args.pool_every:
        parser.error("--pool overrides the pool of past versions, which --pool-every turns on")
    if args.pool_every:
        try:
            config.policy.pool = with_overrides(PoolConfig(every_versions=args.pool_every), args.pool)
        except ValueError as error:
            parser.error(f"--pool: {error}")
    try:  # before a cluster starts: a bad value is a usage error, not a traceback from the launch
        return config.validate()
    except ValueError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, parser = parse_args(argv)
    from srl_lab.envs.factory import make_policy, probe_env
    from srl_lab.envs.hide_and_seek.evaluate import gains
    from srl_lab.system.controller import launch

    config = build_config(args, parser)
    run = launch(config, client=args.scheduler, run_dir=args.run_dir)
    print(f"run directory: {run.run_dir}\nDask dashboard: {run.client.dashboard_link}")
    try:
        started = time.monotonic()
        for minute, actors in sorted(args.scale):
            if minute < args.minutes:
                run.wait(seconds=max(0.0, started + 60 * minute - time.monotonic()))
                print(f"minute {minute:g}: {actors} actor worker(s): {run.scale(actors=actors)}")
        run.wait(seconds=max(0.0, started + 60 * args.minutes - time.monotonic()))
    finally:
        result = run.stop()
    recent = {key: run.metrics.mean_return(100, key) for key in ("hider_return", "hidden_fraction", "fort_prep")}
    repeat = run.config.env.kwargs.get("action_repeat", 1)
    steps = (f"{result['env_steps']:,} env steps" if repeat == 1 else
             f"{result['env_steps']:,} env steps ({result['env_steps'] // repeat:,} decisions of {repeat})")
    print(f"{steps}, {result['version']} updates; last 100 episodes: hider return "
          f"{recent['hider_return']:.1f}, hidden fraction {recent['hidden_fraction']:.2f}, "
          f"fort rate {recent['fort_prep']:.2f}")
    evaluation = None
    if args.eval_episodes > 0:
        probe = probe_env(run.config)
        policy = make_policy(run.config, probe.observation_space, probe.action_space, probe)
        policy.load_weights(run.final_weights)
        policy.eval()
        env = {k: v for k, v in run.config.env.kwargs.items() if k != "random_opponents"}
        evaluation = gains(policy, args.eval_episodes, **env)
        h = evaluation["hidden_fraction"]
        print(f"before/after ({args.eval_episodes} episodes per arm, same seeds): the trained seeker sees a random "
              f"hider on {100 * (1 - h['random_hider_vs_trained_seeker']):.0f}% of play steps (a random seeker: "
              f"{100 * (1 - h['random_vs_random']):.0f}%); against that seeker the trained hider stays hidden "
              f"{100 * h['trained_vs_trained']:.0f}% of play steps (a random hider: "
              f"{100 * h['random_hider_vs_trained_seeker']:.0f}%)")
    print(f"learning curves: {run.run_dir}/curve.png")
    return {**result, "run": run, "evaluation": evaluation}


if __name__ == "__main__":
    main()
