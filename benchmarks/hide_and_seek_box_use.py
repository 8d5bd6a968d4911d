"""Does a run's trained hider carry a box, and does carrying it pay? Self-play from its checkpoint.

Loads the newest checkpoint of a finished lite run (``--run-dir``, e.g. one of
``hide_and_seek_learning.py``) and plays its policy for both teams in its own env configuration,
``--envs`` episodes from one fixed seed, twice: as trained, and with every hider's grab action
forced to 0 (nothing else changed). Reports, over hiders and steps of the first arm:

- ``hider_holds_prep``: share of hiders holding an object (box or ramp) when preparation ends;
- ``hider_holds_play``: share of hider play steps spent holding one;
- ``shield``: among those steps, the share with the held object within 60° of the direction to the
  nearest seeker (a direction drawn at random gives 1/3): the object carried between hider and
  seeker, where it hides the hider;
- ``hider_prep_heads``: the hiders' grab and lock heads in preparation, averaged over hider rows and
  steps: the probability of a 1 and the entropy (ln 2 = 0.69 at most): whether the policy still tries
  the grabs and locks a fort is built with, or has settled on never or always;

and the fraction of play steps with every hider hidden in each arm, ``box_use_pts`` being the
difference in points. The ``fort`` rule never sees this: a held box is not locked.

How it could mislead: the arm without grabs plays a hider that never trained that way, so its loss
bounds what carrying is worth to this policy from above rather than measuring what an opponent of
the carrying hider could take away; the seeker plays as trained in both arms and never adapts. The
episodes start from the env's own resets on one seed, the same in both arms, and the policy's
actions are sampled (from that seed too), so each figure carries sampling noise: two unseeded
repeats of 256 episodes differed by up to 9 points in ``hider_holds_prep`` and 2.5 elsewhere.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np
import torch

from srl_lab.api.policy import obs_to_tensor
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.system.actor_ring import flatten_rows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hide_and_seek_fort_payoff import trained_policy  # noqa: E402

GRAB, LOCK = 3, 4  # the grab and lock columns of an agent's action row
SHIELD_COS = 0.5  # within 60°


def play(policy: Any, env_kwargs: dict[str, Any], envs: int, seed: int, grab: bool) -> dict[str, Any]:
    """One episode per env from ``seed``'s resets; the hiders' grabs forced to 0 unless ``grab``."""
    torch.manual_seed(seed)  # the policy's action sampling, so that a rerun repeats every figure
    env = HideAndSeekLite(envs, **env_kwargs, seed=seed)
    hiders = env.layout.n_hiders
    obs = env.reset(seed=seed)
    holds_prep, holds_play, shields, heads = 0.0, [], [], []
    hider_rows = torch.from_numpy(np.arange(envs * env.num_agents) % env.num_agents < hiders)
    with torch.no_grad():
        for t in range(1, env.horizon + 1):
            dist, _ = policy.distribution_and_value(obs_to_tensor(flatten_rows(obs, envs * env.num_agents)))
            actions = dist.sample().numpy().reshape(envs, env.num_agents, -1)
            if t <= env.prep_steps:
                heads.append([float(figure) for column in (GRAB, LOCK) for figure in (
                    dist.parts[column].probs[hider_rows, 1].mean(), dist.parts[column].entropy()[hider_rows].mean())])
            if not grab:
                actions[:, :hiders, GRAB] = 0
            result = env.step(actions)
            if result.episodes:  # every env started together, so all end on this step (and reset)
                hidden = float(np.mean([e["hidden_fraction"] for e in result.episodes]))
                break
            obs = result.obs
            held = env.held_object_xy()[:, :hiders]
            holding = ~np.isnan(held[..., 0])
            if t == env.prep_steps:
                holds_prep = float(holding.mean())
            elif t > env.prep_steps:
                holds_play.append(holding.mean())
                shields.extend(_shield_cosines(obs["observation_self"][..., :2], hiders, held)[holding])
    return {"hidden": hidden, "holds_prep": holds_prep, "holds_play": float(np.mean(holds_play)),
            "shield": float(np.mean(np.asarray(shields) > SHIELD_COS)) if shields else float("nan"),
            "prep_heads": dict(zip(("grab_p1", "grab_entropy", "lock_p1", "lock_entropy"),
                                   np.mean(heads, axis=0).tolist()))}


def _shield_cosines(xy: np.ndarray, hiders: int, held: np.ndarray) -> np.ndarray:
    """``[envs, hiders]``: cosine between each hider's ways to its held object and its nearest seeker."""
    to_seekers = xy[:, None, hiders:] - xy[:, :hiders, None]  # [envs, hiders, seekers, 2]
    nearest = np.linalg.norm(to_seekers, axis=-1).argmin(axis=-1)
    to_seeker = np.take_along_axis(to_seekers, nearest[..., None, None], axis=2)[:, :, 0]
    to_object = held - xy[:, :hiders]
    norms = np.linalg.norm(to_seeker, axis=-1) * np.linalg.norm(to_object, axis=-1)
    return np.nan_to_num(np.sum(to_seeker * to_object, axis=-1) / np.maximum(norms, 1e-9))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, help="a finished lite run with a checkpoint")
    parser.add_argument("--envs", type=int, default=256, help="episodes per arm")
    parser.add_argument("--seed", type=int, default=12345, help="the resets' seed, the same in both arms")
    args = parser.parse_args(argv)
    path, version, policy, config = trained_policy(args.run_dir, parser)
    if config.env.id != "hide_and_seek_lite":
        parser.error(f"{args.run_dir} trained {config.env.id!r}; this diagnostic plays the lite env")
    arms = {arm: play(policy, config.env.kwargs, args.envs, args.seed, grab=arm == "as_trained")
            for arm in ("as_trained", "no_grab")}
    trained = arms["as_trained"]
    print(f"hiders hold an object on {100 * trained['holds_play']:.1f} % of play steps "
          f"({100 * trained['holds_prep']:.1f} % when preparation ends), held towards the nearest seeker on "
          f"{100 * trained['shield']:.1f} % of those; hidden {100 * trained['hidden']:.1f} % of play steps, "
          f"{100 * arms['no_grab']['hidden']:.1f} % with grabs forced off")
    heads = trained["prep_heads"]
    print(f"in preparation hiders grab with probability {heads['grab_p1']:.2f} (entropy {heads['grab_entropy']:.2f}) "
          f"and lock with {heads['lock_p1']:.2f} (entropy {heads['lock_entropy']:.2f}; ln 2 = 0.69 at most)")
    print(json.dumps({"checkpoint": path, "version": version, "episodes_per_arm": args.envs,
                      "hider_holds_prep": trained["holds_prep"], "hider_holds_play": trained["holds_play"],
                      "shield": trained["shield"], "hider_prep_heads": trained["prep_heads"],
                      "hidden_fraction": {arm: figures["hidden"] for arm, figures in arms.items()},
                      "no_grab_holds_play": arms["no_grab"]["holds_play"],
                      "box_use_pts": 100 * (trained["hidden"] - arms["no_grab"]["hidden"])}))


if __name__ == "__main__":
    main()
