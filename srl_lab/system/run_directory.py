"""A run's directory: ``config.json``, ``metrics.jsonl``, TensorBoard events, ``checkpoints/`` (with
several policies, ``checkpoints@<policy>/`` each), ``curve.png`` and ``result.json``.

A fresh run refuses a directory holding checkpoints of an earlier one (it would otherwise continue
from them by accident); ``Run.resume(run_dir)`` continues such a run and keeps the list of the run
ids that wrote into the directory.
"""
from __future__ import annotations

import json
import os
from typing import Any

from srl_lab.config import ConfigError, ExperimentConfig
from srl_lab.policies import for_policy, policy_ids
from srl_lab.system import checkpoints

RUN_ID_KEYS = ("run_id", "run_ids")  # config.json keys that are not config fields


def prepare(run_dir: str, run_id: str, config: ExperimentConfig, resumed: bool) -> None:
    """Create the directory and write ``config.json``; a fresh run refuses an earlier run's checkpoints."""
    if not resumed and any(checkpoints.paths(folder) for folder in checkpoints.all_folders(run_dir)):
        raise ConfigError("run_dir", f"{run_dir} holds checkpoints of an earlier run",
                          "continue it with Run.resume(run_dir), or choose an empty run directory")
    for policy in policy_ids(config):
        os.makedirs(checkpoints.folder(run_dir, policy), exist_ok=True)
    path = os.path.join(run_dir, "config.json")
    earlier = read_json(path).get("run_ids", []) if resumed else []
    with open(path, "w") as f:
        json.dump({"run_id": run_id, "run_ids": [*earlier, run_id], **config.to_dict()}, f, indent=2)


def newest_checkpoints(run_dir: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Checkpoint folder -> ``(path, state)`` of its newest readable checkpoint, for every folder
    holding one: read once, for both checks a resume makes before any worker starts."""
    found = {folder: checkpoints.load_latest(folder) for folder in checkpoints.all_folders(run_dir)}
    return {folder: newest for folder, newest in found.items() if newest is not None}


def config_to_resume(run_dir: str, newest: dict[str, tuple[str, dict[str, Any]]]) -> ExperimentConfig:
    """The config a run was launched with: exact from its newest checkpoint (``newest``, from
    ``newest_checkpoints``), else rebuilt from config.json."""
    import cloudpickle

    if newest:  # any policy's checkpoint holds the whole config
        _, state = next(iter(newest.values()))
        return cloudpickle.loads(state["config_pickle"])
    saved = read_json(os.path.join(run_dir, "config.json"))
    if not saved:
        raise FileNotFoundError(f"{run_dir} holds neither a checkpoint nor config.json to resume from")
    return ExperimentConfig.from_dict({k: v for k, v in saved.items() if k not in RUN_ID_KEYS})


def check_checkpoints_fit(run_dir: str, config: ExperimentConfig,
                          newest: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """Refuse to resume, before any worker starts, when a policy's newest checkpoint (``newest``, from
    ``newest_checkpoints``) holds weights that ``config`` would build a network of another shape for
    (a changed model size or env, or a checkpoint from an older release): a ValueError naming the
    checkpoint and the tensors."""
    from srl_lab.api.policy import weights_mismatch
    from srl_lab.envs.factory import make_policy, probe_env

    for policy in policy_ids(config):
        found = newest.get(checkpoints.folder(run_dir, policy))
        if found is None:
            continue
        path, state = found
        weights = state.get("algorithm", {}).get("policy")
        if weights is None:  # an algorithm whose checkpoints keep the policy elsewhere: its own load decides
            continue
        policy_config = for_policy(config, policy)
        probe = probe_env(policy_config, policy)
        network = make_policy(policy_config, probe.observation_space, probe.action_space, probe)
        problem = weights_mismatch(type(network).__name__, network.state_dict(), weights)
        if problem:
            raise ValueError(f"cannot resume from {path}: {problem}")


def write_result(run_dir: str, result: dict[str, Any]) -> None:
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
