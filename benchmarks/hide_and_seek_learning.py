"""Does hide-and-seek training learn? Lite 1v1 quadrant, trained on the runtime, then evaluated.

Trains for ``--minutes`` (default 20) with the hide-and-seek recipe's config on an embedded cluster,
then plays the trained policy for one team against uniform random actions for the other, on the same
seeds as a random-vs-random baseline (``--episodes`` per arm):

- ``seeker_gain_pts``: percentage points of play steps on which the hider is seen, trained seeker
  minus random seeker;
- ``hider_gain_pts``: percentage points of play steps hidden, trained hider minus random hider.

Hiders start anywhere (``--hider-spawn anywhere``, the original's uniform hider placement) by
default: when they start in the room, a random hider is already hidden on ~93 % of play steps
against a random seeker, which leaves a trained hider at most ~7 points to gain. The room-start
random baseline is reported next to the result either way.

Training opponents (``--random-opponents``, default 0.75): in that fraction of the envs one team
plays uniform random actions and the policy trains only on the other team there (half of those envs
train the hider, half the seeker); the rest is self-play. Self-play alone learns to beat the
*current* opponent, which specialises: a seeker trained only against hiders that run for the room
does poorly against hiders that stay where they spawn. Keeping the random policy in the opponent
pool (as league training keeps old and scripted opponents) trains the skills the evaluation asks
for. ``--random-opponents 0`` is pure self-play. One 20-minute run each gave these gains (seeker /
hider, points): pure self-play with 4 epochs, lr 3e-4, entropy 0.005: 10.7 / 7.1; 0.5 with 2 epochs:
14.3 / 12.7; 0.75 with the defaults: 34.1 / 22.1. The evaluation plays envs of its own on fixed
seeds, never the training envs.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import time

from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.envs.hide_and_seek.evaluate import hidden_fraction


# The trainer is the bottleneck on 2 cores: two epochs per batch give twice the updates, and a larger
# step with less entropy pull moves the near-uniform initial policy faster (KL stays < 0.01 per update).
FAST_PPO = ["epochs=2", "lr=6e-4", "ent_coef=0.002"]


def _recipe():
    path = os.path.join(os.path.dirname(__file__), "..", "recipes", "hide_and_seek.py")
    spec = importlib.util.spec_from_file_location("hide_and_seek_recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _number(value: float) -> float | None:
    """JSON has no NaN: a statistic with no episodes behind it is null."""
    return None if math.isnan(value) else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes per arm")
    parser.add_argument("--run-dir", default=f"runs/bench-hide-and-seek-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--hider-spawn", default="anywhere", choices=["room", "anywhere"])
    parser.add_argument("--mapping", default="shared", choices=["shared", "per_team"])
    parser.add_argument("--hidden", type=int, default=64, help="smaller than the recipe's default: more updates")
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--random-opponents", type=float, default=0.75, metavar="FRACTION")
    parser.add_argument("--ppo", action="append", default=None, metavar="FIELD=VALUE",
                        help=f"PPOConfig overrides (default: {' '.join(FAST_PPO)})")
    args = parser.parse_args()
    ppo = FAST_PPO if args.ppo is None else args.ppo

    recipe = _recipe()
    result = recipe.main(["--minutes", str(args.minutes), "--run-dir", args.run_dir,
                          "--hider-spawn", args.hider_spawn, "--mapping", args.mapping,
                          "--hidden", str(args.hidden), "--embed", str(args.embed),
                          "--random-opponents", str(args.random_opponents),
                          *(arg for assignment in ppo for arg in ("--ppo", assignment))])
    run = result.pop("run")
    probe = make_env_group(run.config, 1)
    policy = make_policy(run.config, probe.observation_space, probe.action_space)
    policy.load_weights(run.final_weights)
    policy.eval()
    env = dict(run.config.env.kwargs)
    seed = 12345
    random_hidden = hidden_fraction(None, None, args.episodes, seed=seed, **env)
    room_start_random = hidden_fraction(None, None, args.episodes, seed=seed, **{**env, "hider_spawn": "room"})
    seeker_hidden = hidden_fraction(policy, "seeker", args.episodes, seed=seed, **env)
    hider_hidden = hidden_fraction(policy, "hider", args.episodes, seed=seed, **env)
    print(json.dumps({
        "seeker_gain_pts": 100 * (random_hidden - seeker_hidden),
        "hider_gain_pts": 100 * (hider_hidden - random_hidden),
        "episodes_per_arm": args.episodes,
        "hidden_fraction": {"random_vs_random": random_hidden, "trained_seeker": seeker_hidden,
                            "trained_hider": hider_hidden, "random_vs_random_room_start": room_start_random},
        "training_last_100_episodes": {key: _number(run.metrics.mean_return(100, key)) for key in (
            "hidden_fraction", "hidden_fraction_vs_random_seeker", "hidden_fraction_vs_random_hider")},
        "hider_spawn": args.hider_spawn, "mapping": args.mapping, "hidden": args.hidden, "embed": args.embed,
        "random_opponents": args.random_opponents, "ppo_overrides": ppo,
        "env_steps_trained": result["env_steps"], "updates": result["version"], "minutes": args.minutes,
        "run_dir": run.run_dir,
    }))


if __name__ == "__main__":
    main()
