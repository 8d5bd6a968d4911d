"""Would bf16 autocast or ``torch.compile`` make the showcase network cheaper per row on a CPU core?

The laptop showcase's entity-attention policy (``showcase_config()``), on one thread, on observations
from real lite-quadrant steps under random actions, in three modes:

- ``eager``: float32, as the trainer and the actors run it;
- ``bf16``: the same under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (fast on CPUs with
  AMX or AVX-512 BF16, slower elsewhere);
- ``compile``: ``torch.compile`` of the training loss and of the act call (float32).

Per mode: ``train_rows_per_s``, one minibatch of the size's shape (forward and backward of the log-probs,
entropy and values, then an Adam step; the median of ``--repeats`` timings of 5 steps), ``act_ms``,
one 128-row inference call as an actor makes it (median over 200), and the seconds the first call
took (compilation, for ``compile``). Modes run one after another in this process, so the ratios are
what to read: a busy machine slows all three.

How it could mislead: the loss is the network's part of PPO's (log-probs, entropy, squared values),
not the whole update, whose other costs (V-trace, batching) no mode changes; and one CPU is not
another: check ``cpu_flags`` before carrying a ratio to another machine.

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable

import numpy as np
import torch

from srl_lab.api.policy import Act, obs_to_tensor
from srl_lab.config import ExperimentConfig
from srl_lab.envs.factory import make_policy, probe_env
from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
from srl_lab.envs.hide_and_seek.showcase import showcase_config
from srl_lab.system.actor_ring import flatten_rows

MODES = ("eager", "bf16", "compile")
ACT_ROWS = 128


def observations(rows: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``rows`` agent rows from lite-quadrant envs 40 random steps into their episodes."""
    envs = rows // 2
    env = HideAndSeekLite(envs, scenario="quadrant", n_hiders=1, n_seekers=1, seed=seed)
    obs = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    nvec = env.action_space.nvec
    for _ in range(40):
        obs = env.step((rng.random((envs, env.num_agents, len(nvec))) * nvec).astype(np.int64)).obs
    return obs_to_tensor(flatten_rows(obs, rows))


def median_seconds(call: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean seconds per call of ``calls`` calls."""
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        timings.append((time.perf_counter() - start) / calls)
    return statistics.median(timings)


def measure(mode: str, config: ExperimentConfig, rows: dict[str, torch.Tensor], repeats: int) -> dict[str, float]:
    """``mode``'s figures (module docstring) for a fresh network of ``config``."""
    probe = probe_env(config)
    policy = make_policy(config, probe.observation_space, probe.action_space, probe)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-4)
    n = len(next(iter(rows.values())))
    actions = torch.stack([torch.randint(0, int(k), (n,)) for k in probe.action_space.nvec], dim=-1)
    act_rows = {key: value[:ACT_ROWS] for key, value in rows.items()}

    def loss() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            log_probs, entropy, values = policy.evaluate(rows, actions)
        return -log_probs.float().mean() - 0.01 * entropy.float().mean() + values.float().pow(2).mean()

    def act() -> Act:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            return policy.act(act_rows)

    if mode == "compile":
        loss, act = torch.compile(loss, dynamic=False), torch.compile(act, dynamic=False)

    def train_step() -> None:
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()

    start = time.perf_counter()
    train_step()
    first_train = time.perf_counter() - start
    with torch.no_grad():
        start = time.perf_counter()
        act()
        first_act = time.perf_counter() - start
        act_s = median_seconds(act, 200, repeats)
    train_step()
    train_s = median_seconds(train_step, 5, repeats)
    return {"train_rows_per_s": n / train_s, "act_ms": 1e3 * act_s,
            "first_train_s": first_train, "first_act_s": first_act}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure (the median is quoted)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = showcase_config()
    minibatch = config.trainer.batch_steps // config.ppo.minibatches
    rows = observations(minibatch)
    results = {}
    for mode in args.modes:
        results[mode] = measure(mode, config, rows, args.repeats)
        r = results[mode]
        print(f"{mode:8s} train {r['train_rows_per_s']:9,.0f} rows/s   act {ACT_ROWS} rows {r['act_ms']:5.2f} ms   "
              f"first calls {r['first_train_s']:.1f} s + {r['first_act_s']:.1f} s")
    print(json.dumps({"minibatch_rows": minibatch, "act_rows": ACT_ROWS, "torch": torch.__version__,
                      "cpu_flags": bf16_flags(),
                      "modes": results,
                      "ratio_to_eager": {mode: {"train": r["train_rows_per_s"] / results["eager"]["train_rows_per_s"],
                                                "act": results["eager"]["act_ms"] / r["act_ms"]}
                                         for mode, r in results.items()} if "eager" in results else None}))


def bf16_flags() -> list[str]:
    """This CPU's bf16 matrix features (Linux; empty elsewhere): AMX tiles or AVX-512 BF16."""
    try:
        with open("/proc/cpuinfo") as f:
            line = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return []
    return sorted(flag for flag in line.split() if flag.startswith(("amx", "avx512_bf16")))


if __name__ == "__main__":
    main()
