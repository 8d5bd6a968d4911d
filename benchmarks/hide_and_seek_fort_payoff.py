"""Does a fort pay against a run's trained seeker? Hand-built scenes at the end of preparation.

Loads the newest checkpoint of a finished lite-quadrant run (``--run-dir``, e.g. one of
``hide_and_seek_learning.py``) and plays its policy for both teams from scenes that start at the
first play step, in a quadrant room with one 2-cell door and two cubes:

- ``fort``: a cube locked by the hiders stands inside the room in front of the door;
- ``unlocked_at_door``: the same cube there, unlocked (the seeker can push it away);
- ``open``: that cube far from the door.

The hider, the seeker (outside the room) and their headings are drawn per env from a fixed seed, the
same in every arm. The hider either acts with the policy or stands still. Reports the fraction of
play steps on which the hider stays hidden, per arm. If ``fort`` is not clearly above ``open``, a
policy that learned forts would gain nothing by them in this env, and the fort milestone would
measure nothing a learner could want; if it is, what self-play lacks is finding the fort.

With the policy acting, it also reports the hider's return and what the run's critic expected of it
at the first play step (``critic``, in return units). A critic that values ``fort`` no higher than
``open`` while the returns differ gives a fort-building step no advantage of its own: the fort's
worth reaches it only through GAE's discounted tail of the play steps' surprises. ``--fit-critic
STEPS`` asks whether the critic could tell them apart if it saw forts: a copy of it is fit to fort and
open scenes of other agent draws, then read on the evaluation scenes (``critic_after_fit``).

How it could mislead: the scenes fix one door position and one room shape, so they measure the
payoff of this fort, not of every fort; a seeker the run never trained to enter the room would make
every arm look alike (check ``open`` against ``hide_and_seek_learning.py``'s hidden fraction).

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import copy
import json
from typing import Any

import cloudpickle
import numpy as np
import torch

from srl_lab.algorithms.value_norm import ValueNormalizer
from srl_lab.api.policy import obs_to_tensor
from srl_lab.envs.factory import make_policy, probe_env
from srl_lab.envs.hide_and_seek import spec
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.scene import HIDER, SEEKER, Agent, Box, Scene, Wall
from srl_lab.system import checkpoints
from srl_lab.system.actor_ring import flatten_rows

DOOR = (4.2, 4.6)  # the door's span on the room's vertical wall x = 3
OUTER = spec.OUTER_WALL_HEIGHT
WALLS = [Wall(0, 0, 6, 0, OUTER), Wall(0, 6, 6, 6, OUTER), Wall(0, 0, 0, 6, OUTER), Wall(6, 0, 6, 6, OUTER),
         Wall(3, 3, 3, DOOR[0]), Wall(3, DOOR[1], 3, 6), Wall(3, 3, 6, 3)]
FRONT_OF_DOOR = (3.0 + spec.WALL_THICKNESS / 2 + spec.BOX_SIZE / 2, sum(DOOR) / 2)  # a cube's centre, inside
STILL = (5, 5, 5, 0, 0)  # no force, no torque, no grab, no lock
ARMS = ("fort", "unlocked_at_door", "open")


def scene(arm: str, index: int, prep_steps: int) -> Scene:
    """Env ``index``'s scene of ``arm``: agents drawn from ``index``, the door cube per arm."""
    rng = np.random.default_rng(index)
    hider = Agent(float(rng.uniform(4.0, 5.6)), float(rng.uniform(3.4, 5.6)), float(rng.uniform(-3, 3)), HIDER)
    seeker = Agent(float(rng.uniform(0.5, 2.5)), float(rng.uniform(0.5, 5.5)), float(rng.uniform(-3, 3)), SEEKER)
    door_cube = {"fort": Box(*FRONT_OF_DOOR, locked_by=HIDER), "unlocked_at_door": Box(*FRONT_OF_DOOR),
                 "open": Box(4.6, 5.4)}[arm]
    return Scene(agents=[hider, seeker], walls=WALLS, boxes=[door_cube, Box(5.5, 3.5)], t=prep_steps)


def play_arm(policy, arm: str, hider_acts: bool, envs: int,
             values: ValueNormalizer | None = None) -> dict[str, float]:
    """Over ``envs`` episodes played from ``arm``'s scenes: the mean fraction of play steps hidden, the
    hider's return, and the critic's value of the hider's first play step (through ``values``, the
    run's value normaliser: the value head predicts normalised returns)."""
    played = play_scenes(policy, arm, hider_acts, range(envs))
    critic = played["critic"] if values is None else values.denormalize(played["critic"])
    return {"hidden": float(np.mean(played["hidden"])), "hider_return": float(np.mean(played["hider_return"])),
            "critic": float(np.mean(critic))}


def play_scenes(policy, arm: str, hider_acts: bool, scenes: range) -> dict[str, Any]:
    """One episode from each of ``arm``'s scenes ``scenes``, per env: the hider's observation and the
    critic's output (normalised) at the first play step, its return and its hidden fraction."""
    envs = len(scenes)
    env = HideAndSeekLite(envs, scenario="quadrant", n_hiders=1, n_seekers=1, seed=0)
    env.reset(seed=0)
    rows = [env.load_scene(e, scene(arm, index, env.prep_steps)) for e, index in enumerate(scenes)]
    obs = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    first_obs = {key: value[:, 0].copy() for key, value in obs.items()}
    hider_return, critic = np.zeros(envs), None
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the same sampled actions on every rerun
        while True:
            act = policy.act(obs_to_tensor(flatten_rows(obs, envs * 2)))
            if critic is None:
                critic = act.values.numpy().reshape(envs, 2)[:, 0]
            actions = act.actions.numpy().reshape(envs, 2, -1)
            if not hider_acts:
                actions[:, 0] = STILL
            result = env.step(actions)
            hider_return += result.reward[:, 0]
            if result.episodes:  # every env started at the same step, so all end together
                return {"first_obs": first_obs, "critic": critic, "hider_return": hider_return,
                        "hidden": np.array([e["hidden_fraction"] for e in result.episodes])}
            obs = result.obs


def fit_critic(policy, values: ValueNormalizer | None, steps: int, envs: int,
               train_scenes: int = 1024, minibatch: int = 256) -> dict[str, float]:
    """Could this critic hold a fort's worth, given forts to learn from? A copy of the policy's critic
    regresses the hider's first-play-step return on ``train_scenes`` fort and open scenes of their own
    agent draws for ``steps`` Adam steps; returns its values (in return units) on the ``envs``
    evaluation scenes of each arm."""
    critic = copy.deepcopy(policy)
    values = values or ValueNormalizer()  # the identity before any update
    train = [play_scenes(critic, arm, True, range(10_000, 10_000 + train_scenes)) for arm in ("fort", "open")]
    obs = {key: np.concatenate([arm["first_obs"][key] for arm in train]) for key in train[0]["first_obs"]}
    targets = torch.as_tensor(values.normalize(np.concatenate([arm["hider_return"] for arm in train])))
    optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)  # a value loss reaches only the critic's
    rng = np.random.default_rng(0)
    for _ in range(steps):
        rows = rng.integers(0, len(targets), minibatch)
        _, predicted = critic.distribution_and_value(obs_to_tensor({key: v[rows] for key, v in obs.items()}))
        loss = torch.mean((predicted - targets[rows]) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {arm: play_arm(critic, arm, True, envs, values)["critic"] for arm in ("fort", "open")}


def newest_checkpoint(run_dir: str, parser: argparse.ArgumentParser) -> tuple[str, dict[str, Any]]:
    """(path, loaded state) of ``run_dir``'s newest checkpoint; a usage error where there is none."""
    found = checkpoints.load_latest(checkpoints.folder(run_dir))
    if found is None:
        parser.error(f"{run_dir} has no checkpoint to load a policy from")
    return found


def trained_policy(run_dir: str, parser: argparse.ArgumentParser) -> tuple[str, int, Any, Any]:
    """(checkpoint path, version, policy in eval mode, the run's config) from ``run_dir``'s newest checkpoint."""
    path, state = newest_checkpoint(run_dir, parser)
    return (path, *policy_in(state))


def policy_in(state: dict[str, Any]) -> tuple[int, Any, Any]:
    """(version, policy in eval mode, the run's config) from a loaded checkpoint."""
    config = cloudpickle.loads(state["config_pickle"])  # the run's exact config, saved with its weights
    probe = probe_env(config)
    policy = make_policy(config, probe.observation_space, probe.action_space, probe)
    policy.load_state_dict(state["algorithm"]["policy"])
    policy.eval()
    return int(state["version"]), policy, config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a finished 1v1 lite-quadrant run with a checkpoint")
    parser.add_argument("--envs", type=int, default=128, help="episodes per arm")
    parser.add_argument("--fit-critic", type=int, default=0, metavar="STEPS",
                        help="also fit a copy of the critic to fort and open scenes for STEPS Adam steps")
    args = parser.parse_args(argv)
    path, state = newest_checkpoint(args.run_dir, parser)
    version, policy, _ = policy_in(state)
    values = value_normalizer(state)
    played = {f"{arm}/{'policy' if acts else 'still'}_hider": play_arm(policy, arm, acts, args.envs, values)
              for arm in ARMS for acts in (True, False)}
    hidden = {name: arm["hidden"] for name, arm in played.items()}
    acting = {name.split("/")[0]: arm for name, arm in played.items() if name.endswith("/policy_hider")}
    for name, arm in played.items():
        print(f"{name:32s} hidden on {100 * arm['hidden']:5.1f} % of play steps")
    for arm, figures in acting.items():
        print(f"{arm:18s} hider return {figures['hider_return']:6.1f}, the critic expected {figures['critic']:6.1f}")
    print(json.dumps({"checkpoint": path, "version": version, "episodes_per_arm": args.envs,
                      "hidden_fraction": hidden,
                      "fort_payoff_pts": 100 * (hidden["fort/policy_hider"] - hidden["open/policy_hider"]),
                      "hider_return": {arm: figures["hider_return"] for arm, figures in acting.items()},
                      "critic": {arm: figures["critic"] for arm, figures in acting.items()},
                      "critic_after_fit": ({"steps": args.fit_critic,
                                            **fit_critic(policy, values, args.fit_critic, args.envs)}
                                           if args.fit_critic else None)}))


def value_normalizer(state: dict[str, Any]) -> ValueNormalizer | None:
    """The run's value normaliser in a loaded checkpoint, or None where it trained without one."""
    saved = state["algorithm"].get("value_normalizer")
    if saved is None:
        return None
    values = ValueNormalizer()
    values.load_state_dict(saved)
    return values


if __name__ == "__main__":
    main()
