"""The one hide-and-seek configuration, the head-to-head evaluation and the pure self-play benchmark."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from srl_lab.envs.hide_and_seek.evaluate import gains, hidden_fraction, play
from srl_lab.envs.hide_and_seek.showcase import SIZES, showcase_config
from srl_lab.system.metrics import MetricsLog

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"loaded_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("size", SIZES)
def test_every_size_is_a_valid_self_play_config(size):
    config = showcase_config(size, actors=2).validate()
    assert config.actors.workers == 2
    assert config.env.kwargs.get("random_opponents", 0.0) == 0.0  # self-play only
    assert config.ppo.advantage.startswith("vtrace") and config.trainer.max_version_lag >= 1
    recurrent = showcase_config(size, actors=2, recurrent=True).validate()  # chunks divide the fragments
    assert recurrent.policy.factory.keywords["recurrent"] and 5 <= recurrent.ppo.chunk_length <= 10
    assert recurrent.ppo.advantage == "vtrace"  # a recurrent policy trains in chunks, not whole columns


@pytest.mark.parametrize("size", SIZES)
def test_the_batch_is_sized_per_actor_sending_in_a_fixed_count_of_minibatches(size):
    """Rows in flight grow with the actors: at a fixed batch four actors on 2 cores trained 6.2 versions
    behind (one actor: 1.5) and the policy's entropy collapsed within 10 minutes; a batch per actor kept
    the lag at 1.5 (the recipe with --actors 4, both ways). The trainer counts the actors sending, so
    the batch also follows actors added live (test_algorithms and test_runtime check that)."""
    one, four = showcase_config(size, actors=1), showcase_config(size, actors=4)
    assert one.trainer.batch_per_actor and one.ppo.minibatch_size == 0 and one.ppo.minibatches >= 2
    assert (four.trainer, four.ppo) == (one.trainer, one.ppo)


def test_keywords_override_the_size_and_a_bad_size_is_named():
    config = showcase_config("laptop", hiders=2, seekers=3, hidden=96, heads=4)
    assert (config.env.kwargs["n_hiders"], config.env.kwargs["n_seekers"]) == (2, 3)
    assert config.policy.factory.keywords["hidden"] == 96 and config.policy.factory.keywords["heads"] == 4
    with pytest.raises(ValueError, match="size must be one of"):
        showcase_config("huge")


def test_notebook_02_and_the_recipe_train_the_showcase_config():
    notebook = _load(ROOT / "recipes" / "02_hide_and_seek.py")
    from srl_lab.notebook.recipe import recipe_args

    args = recipe_args([], actors=1, minutes=1.0)
    assert notebook.make_config(args).to_dict() == showcase_config(actors=1).to_dict()
    recipe = _load(ROOT / "recipes" / "hide_and_seek.py")
    parsed, _ = recipe.parse_args([])
    assert parsed.size == "laptop" and parsed.random_opponents == 0.0 and parsed.scale == []
    assert recipe.parse_args(["--scale", "1:4", "--scale", "0.5:2"])[0].scale == [(1.0, 4), (0.5, 2)]


@pytest.mark.parametrize("bad", ["4", "1:0", "-1:2", "one:2"])
def test_the_recipe_names_a_bad_actor_schedule(bad, capsys):
    recipe = _load(ROOT / "recipes" / "hide_and_seek.py")
    with pytest.raises(SystemExit):
        recipe.parse_args([f"--scale={bad}"])
    assert f"argument --scale: {bad!r}: " in capsys.readouterr().err


def test_the_recipe_sets_the_pool_of_past_versions_and_names_a_bad_override(capsys):
    recipe = _load(ROOT / "recipes" / "hide_and_seek.py")

    def config(*argv: str):
        return recipe.build_config(*recipe.parse_args(list(argv)))

    assert config().policy.pool is None
    pool = config("--pool-every", "50", "--pool", "sampling=win_rate", "--pool", "size=16").policy.pool
    assert (pool.every_versions, pool.sampling, pool.size, pool.envs_fraction) == (50, "win_rate", 16, 0.5)
    for argv, said in ((["--pool", "size=16"], "which --pool-every turns on"),
                       (["--pool-every", "50", "--pool", "sise=16"], "--pool: 'sise=16'")):
        with pytest.raises(SystemExit):
            config(*argv)
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        config("--pool-every", "50", "--pool", "sampling=best")
    assert "error: policy.pool.sampling" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["--hiders", "0"], "n_hiders must be one of (1, 2, 3), got 0"),  # not read as "the size's default"
    (["--seekers", "4"], "n_seekers must be one of (1, 2, 3), got 4"),
    (["--hidden", "0"], "hidden must be a positive whole number, got 0"),
    (["--heads", "0"], "heads must be a positive whole number, got 0"),
    (["--heads", "3"], "heads must divide the embedding width 32, got 3"),
    (["--embed", "48", "--heads", "5"], "heads must divide the embedding width 48, got 5"),
    (["--batch-steps", "0"], "trainer.batch_steps: must be a positive integer, got 0"),
    (["--ppo", "epochs=2.5"], "epochs takes a whole number, got '2.5'"),
    (["--trainer", "batch_per_actor=-1"], "batch_per_actor takes true or false, got '-1'"),
])
def test_the_recipe_refuses_a_bad_value_before_any_cluster_starts(argv, said, capsys):
    recipe = _load(ROOT / "recipes" / "hide_and_seek.py")
    with pytest.raises(SystemExit) as exit_info:
        recipe.build_config(*recipe.parse_args(argv))
    assert exit_info.value.code == 2 and said in capsys.readouterr().err


def test_the_recipe_sets_the_action_repeat_and_names_a_bad_one(capsys):
    recipe = _load(ROOT / "recipes" / "hide_and_seek.py")

    def config(*argv: str):
        return recipe.build_config(*recipe.parse_args(list(argv)))

    assert config().env.kwargs["action_repeat"] == 1
    assert config("--action-repeat", "2").env.kwargs["action_repeat"] == 2
    with pytest.raises(SystemExit):
        config("--action-repeat", "3")
    assert "--action-repeat: action_repeat must be a positive divisor of the horizon (80 steps)" in capsys.readouterr().err


def test_play_uses_the_same_scenes_for_every_pairing():
    assert play(None, None, 16, seed=3, n_hiders=1, n_seekers=1) == play(None, None, 16, seed=3, n_hiders=1,
                                                                        n_seekers=1)
    assert hidden_fraction(None, None, 16, seed=3, n_hiders=1, n_seekers=1) == play(None, None, 16, seed=3,
                                                                                   n_hiders=1, n_seekers=1)


def test_milestone_times_come_from_the_rolling_mean():
    bench = _load(ROOT / "benchmarks" / "hide_and_seek_learning.py")
    records = [{"time": 100.0 + 6 * i, "fort_prep": float(i >= 10)} for i in range(20)]
    # window 4: the rolling mean first reaches 0.5 over episodes 10..13's window that holds two ones
    assert bench.minutes_to(records, "fort_prep", 0.5, +1, 4, start=100.0) == pytest.approx(6 * 11 / 60)
    assert bench.minutes_to(records, "fort_prep", 0.5, -1, 4, start=100.0) == pytest.approx(6 * 3 / 60)
    assert bench.minutes_to(records, "fort_prep", 2.0, +1, 4, start=100.0) is None
    # episodes reported together share a time and keep their order: sorted by value, the first
    # report's 1, 0, 1, 0, 1, 0 would end in three ones and cross 0.9 at once
    tied = [{"time": t, "fort_prep": v} for t, v in zip([100.0] * 6 + [106.0] * 3, [1, 0, 1, 0, 1, 0, 1, 1, 1])]
    assert bench.minutes_to(tied, "fort_prep", 0.9, +1, 3, start=100.0) == pytest.approx(0.1)
    assert bench.last_fraction_mean(records, "fort_prep", 0.25) == 1.0
    assert bench.last_fraction_mean(records, "missing") is None


def test_phase_stretches_split_a_run_by_wall_clock_and_average_each_statistic():
    phases = _load(ROOT / "benchmarks" / "hide_and_seek_phases.py")
    log = MetricsLog(None)
    reports = [(1000.0, 5_000, [(1, 0.0), (2, 1.0)], 3.0), (1050.0, 9_000, [(1, 0.0)], 5.0),
               (1200.0, 20_000, [(2, 0.0), (1, 1.0), (1, 1.0)], None)]  # the third falls two stretches on
    for time, consumed, episodes, entropy in reports:
        log.add({"srl_worker": "trainer-0", "role": "trainer", "time": time, "env_steps_consumed": consumed,
                 "train": {} if entropy is None else {"entropy": entropy},
                 "episodes": [{"num_doors": doors, "fort_prep": fort, "hider_in_room": 1.0} for doors, fort in episodes]})
    rows = phases.stretches(log, minutes=1.0)
    assert [(r["from_minute"], r["episodes"], r["agent_steps_trained"], r["updates"]) for r in rows] == [
        (0.0, 3, 9_000, 2), (3.0, 3, 20_000, 1)]
    assert rows[0]["fort_prep"] == pytest.approx(1 / 3) and rows[0]["fort_prep_one_door"] == 0.0
    assert rows[1]["fort_prep"] == pytest.approx(2 / 3) and rows[1]["fort_prep_one_door"] == 1.0
    assert rows[0]["entropy"] == 4.0 and rows[1]["entropy"] is None  # an update without the figure
    assert rows[0]["hider_in_room"] == 1.0 and rows[0]["seeker_in_room"] is None  # never reported
    assert phases.stretches(MetricsLog(None), minutes=3.0) == []
    with pytest.raises(SystemExit):
        phases.main(["--run-dir", ".", "--stretch", "0"])
    with pytest.raises(SystemExit):
        phases.main(["--run-dir", ".", "--max-gap", "-1"])


def test_phase_stretches_count_minutes_of_training_not_the_pause_before_a_resume():
    """A run stopped after two minutes and resumed an hour later: its third minute is the resumed
    one's first, not a stretch an hour on."""
    phases = _load(ROOT / "benchmarks" / "hide_and_seek_phases.py")
    log = MetricsLog(None)
    for time, consumed in [(0.0, 1_000), (60.0, 2_000), (119.0, 3_000), (3719.0, 3_000), (3769.0, 4_000)]:
        log.add({"srl_worker": "trainer-0", "role": "trainer", "time": time, "env_steps_consumed": consumed,
                 "train": {"entropy": 1.0}, "episodes": [{"fort_prep": 0.0}]})
    rows = phases.stretches(log, minutes=1.0)
    assert [(r["from_minute"], r["episodes"], r["updates"]) for r in rows] == [(0.0, 1, 1), (1.0, 3, 3), (2.0, 1, 1)]
    assert [r["from_minute"] for r in phases.stretches(log, minutes=1.0, max_gap_s=7200.0)] == [0.0, 1.0, 61.0, 62.0]


@pytest.mark.slow
def test_learning_benchmark_without_evaluation_reports_null_gains(dask_client, tmp_path, capsys):
    """``--episodes 0`` skips the evaluation: the JSON line still comes, its gains null."""
    bench = _load(ROOT / "benchmarks" / "hide_and_seek_learning.py")
    bench.main(["--size", "short", "--minutes", "0.1", "--episodes", "0", "--run-dir", str(tmp_path / "run"),
                "--scheduler", dask_client.scheduler.address])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["seeker_gain_pts"] is None and report["hider_gain_pts"] is None and report["evaluation"] is None
    assert report["env_steps"] > 0


@pytest.mark.slow
def test_pure_self_play_benchmark_short_mode(dask_client, tmp_path, capsys):
    bench = _load(ROOT / "benchmarks" / "hide_and_seek_learning.py")
    bench.main(["--size", "short", "--minutes", "0.15", "--episodes", "8", "--window", "5", "--hidden", "24",
                "--trainer", "checkpoint_keep=3", "--run-dir", str(tmp_path / "run"),
                "--scheduler", dask_client.scheduler.address])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["updates"] >= 1 and report["env_steps"] > 0
    assert (report["hidden"], report["embed"], report["device"]) == (24, None, "cpu")
    assert 0.0 <= report["fort_rate"] <= 1.0
    assert set(report["fort_rate_by_doors"]) == {"1", "2"}
    assert all(rate is None or 0.0 <= rate <= 1.0 for rate in report["fort_rate_by_doors"].values())
    assert set(report["minutes_to"]) == set(bench.MILESTONES)
    for key in ("seeker_gain_pts", "hider_gain_pts"):
        assert -100.0 <= report[key] <= 100.0
    assert report["evaluation"]["episodes_per_arm"] == 8
    assert (tmp_path / "run" / "curve.png").exists()

    # The fort-payoff diagnostic reads that run's checkpoint. Whatever the policy learned, a hider that
    # stands still behind a door closed by its locked cube is never seen.
    fort_payoff = _load(ROOT / "benchmarks" / "hide_and_seek_fort_payoff.py")
    *_, config = fort_payoff.trained_policy(str(tmp_path / "run"), None)
    assert config.policy.factory.keywords["hidden"] == 24  # --hidden reached the trained model
    assert config.trainer.checkpoint_keep == 3 and report["trainer_overrides"] == ["checkpoint_keep=3"]
    fort_payoff.main(["--run-dir", str(tmp_path / "run"), "--envs", "32", "--fit-critic", "3"])
    payoff = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert payoff["hidden_fraction"]["fort/still_hider"] == 1.0, payoff
    assert len(payoff["hidden_fraction"]) == 6 and all(0 <= v <= 1 for v in payoff["hidden_fraction"].values())
    for arm in fort_payoff.ARMS:  # +1 per play step hidden, -1 seen: the return follows the hidden fraction
        hidden = payoff["hidden_fraction"][f"{arm}/policy_hider"]
        assert payoff["hider_return"][arm] == pytest.approx(48 * (2 * hidden - 1), abs=0.5), payoff
        assert np.isfinite(payoff["critic"][arm])
    fitted = payoff["critic_after_fit"]
    assert fitted["steps"] == 3 and np.isfinite(fitted["fort"]) and np.isfinite(fitted["open"])

    # Re-evaluating the run's newest checkpoint on the benchmark's seed gives the benchmark's figures
    # again: the evaluation seeds every team's sampling, and the final checkpoint holds the final weights.
    _load(ROOT / "benchmarks" / "hide_and_seek_gains.py").main(
        ["--run-dir", str(tmp_path / "run"), "--seeds", "12345,7", "--episodes", "8"])
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoints"]
    assert len(again) == 1 and len(again[0]["hider_gain_pts"]["by_seed"]) == 2
    assert again[0]["seeker_gain_pts"]["by_seed"][0] == pytest.approx(report["seeker_gain_pts"])
    assert again[0]["hider_gain_pts"]["by_seed"][0] == pytest.approx(report["hider_gain_pts"])

    # The box-use diagnostic plays the same checkpoint in self-play: with grabs forced off nothing is held.
    _load(ROOT / "benchmarks" / "hide_and_seek_box_use.py").main(["--run-dir", str(tmp_path / "run"), "--envs", "16"])
    use = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert use["no_grab_holds_play"] == 0.0 and 0.0 <= use["hider_holds_play"] <= 1.0, use
    assert all(0 <= v <= 1 for v in use["hidden_fraction"].values()) and use["episodes_per_arm"] == 16
    heads = use["hider_prep_heads"]
    assert all(0 <= heads[f"{head}_p1"] <= 1 and 0 <= heads[f"{head}_entropy"] <= math.log(2) + 1e-6
               for head in ("grab", "lock")), heads

    # The run's course by stretches of minutes holds every training episode it reported.
    _load(ROOT / "benchmarks" / "hide_and_seek_phases.py").main(["--run-dir", str(tmp_path / "run"), "--stretch", "0.05"])
    course = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["stretches"]
    assert sum(row["episodes"] for row in course) == len(MetricsLog.load(str(tmp_path / "run" / "metrics.jsonl")).episodes)
    assert 0 < course[-1]["agent_steps_trained"] <= 2 * report["env_steps"]  # of the rows actors produced (1 v 1)

    # The fort-reach benchmark: scripted hiders close the room's doors, and the run's seeker hardly ever
    # sees one behind them.
    _load(ROOT / "benchmarks" / "hide_and_seek_fort_reach.py").main(["--starts", "12", "--run-dir", str(tmp_path / "run")])
    reach = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert reach["starts"] == 12 and sum(row["starts"] for row in reach["by_doors"].values()) == 12
    assert reach["fort_share"] >= 0.75 and reach["fort_step_median"] <= reach["prep_steps"], reach
    vs = reach["vs_trained_seeker"]
    assert (vs["n_hiders"], vs["n_seekers"]) == (1, 1) and vs["scripted_hider_hidden_in_forts"] >= 0.8, vs
    assert 0.0 <= vs["trained_hider_hidden"] <= 1.0
    gaps = vs["door_gaps"]
    assert gaps["at_start"]["within_0.2m"] == 0.0  # cubes never spawn where they close a door
    assert all(0.0 <= g["within_0.2m"] <= g["within_0.5m"] <= 1.0 and g["median_m"] > 0 for g in gaps.values())
    forts = vs["forts_in_preparation"]
    assert sum(row["starts"] for row in forts.values()) == 12
    assert all(0.0 <= row["at_prep_end"] <= row["at_any_prep_step"] <= 1.0 for row in forts.values()), forts

    # The frozen-seeker diagnostic: a fresh policy trains on the hider rows against that run's final
    # seeker, whose rows never reach the trainer.
    frozen = _load(ROOT / "benchmarks" / "hide_and_seek_frozen_seeker.py")
    frozen.main(["--run-dir", str(tmp_path / "run"), "--size", "short", "--minutes", "0.15", "--report-every", "0.05"])
    diagnostic = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert diagnostic["updates"] >= 1 and diagnostic["episodes"] > 0 and diagnostic["reports"], diagnostic
    shares = {k: v for k, v in diagnostic["last_10pct"].items() if k != "max_box_move_prep"}
    assert all(0.0 <= v <= 1.0 for v in shares.values()), diagnostic
    *_, seeker, _ = fort_payoff.trained_policy(str(tmp_path / "run"), None)
    assert frozen.FrozenSeekers(3, seeker, n_hiders=1, n_seekers=1).trained_rows.tolist() == [0, 2, 4]


def test_forts_built_in_preparation_and_undone_before_its_end_are_told_apart():
    fort_summary = _load(ROOT / "benchmarks" / "hide_and_seek_fort_reach.py").fort_summary
    fort = np.array([[0, 1, 0, 0],   # [preparation step, start]: 1.0 while every door is closed
                     [1, 1, 0, 1],
                     [1, 0, 0, 0]], dtype=float)
    rows = fort_summary(fort, doors=np.array([1, 1, 2, 2]))
    assert rows["1"] == {"starts": 2, "at_prep_end": 0.5, "at_any_prep_step": 1.0, "undone_before_prep_end": 0.5}
    assert rows["2"] == {"starts": 2, "at_prep_end": 0.0, "at_any_prep_step": 0.5, "undone_before_prep_end": 0.5}


def test_the_step_cost_benchmark_times_the_showcase_network_per_mode(capsys):
    bench = _load(ROOT / "benchmarks" / "hide_and_seek_step_cost.py")
    bench.main(["--repeats", "1", "--modes", "eager", "bf16"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    config = showcase_config()
    assert report["minibatch_rows"] == config.trainer.batch_steps // config.ppo.minibatches
    assert set(report["modes"]) == {"eager", "bf16"} and report["ratio_to_eager"]["eager"] == {"train": 1.0, "act": 1.0}
    assert all(m["train_rows_per_s"] > 0 and m["act_ms"] > 0 for m in report["modes"].values())


def test_the_policy_lag_diagnostic_trains_the_given_versions_behind(capsys):
    """With the actors 3 versions behind, the trainer's samples are about 3 versions old; with 0, under 1."""
    _load(ROOT / "benchmarks" / "hide_and_seek_policy_lag.py").main(
        ["--size", "short", "--lags", "0", "3", "--updates", "12", "--ppo", "clip_coef=0.3"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    now, behind = report["by_lag"]
    assert now["updates"] == behind["updates"] == 12 and report["ppo_overrides"] == ["clip_coef=0.3"]
    assert now["policy_lag_mean"] < 1.0 and 2.0 <= behind["policy_lag_mean"] <= 4.0, report
    assert all(row["approx_kl_max"] >= 0.0 and 0.0 < row["entropy_last20"] and 0 <= row["seeker_in_room_last"] <= 1
               for row in report["by_lag"])


def test_gains_are_zero_when_the_trained_policy_plays_randomly():
    """A 'trained' policy that acts uniformly at random gains nothing beyond sampling noise."""
    import torch

    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
    from srl_lab.models.entity_attention import EntityAttentionPolicy

    torch.manual_seed(0)
    env = HideAndSeekLite(1, n_hiders=1, n_seekers=1)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=16, embed=8, heads=2)
    result = gains(policy, 64, seed=1, n_hiders=1, n_seekers=1)  # small-scale head init: ~uniform actions
    assert abs(result["seeker_gain_pts"]) < 10 and abs(result["hider_gain_pts"]) < 10, result


def test_the_same_policy_and_seed_give_the_same_figure_and_leave_the_callers_generator_alone():
    """The benchmark's gains are a function of the policy and the seed: rerunning an evaluation of a
    checkpoint gives its figure again (the policy's sampling was once unseeded: 1.6 points apart)."""
    import torch

    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
    from srl_lab.models.entity_attention import EntityAttentionPolicy

    torch.manual_seed(0)
    env = HideAndSeekLite(1, n_hiders=1, n_seekers=1)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=16, embed=8, heads=2)
    before = torch.get_rng_state()
    first = play(policy, policy, 16, seed=4, num_envs=8, n_hiders=1, n_seekers=1)
    assert torch.equal(torch.get_rng_state(), before)
    torch.rand(5)  # another generator state: the figure must not depend on it
    assert play(policy, policy, 16, seed=4, num_envs=8, n_hiders=1, n_seekers=1) == first


def test_a_recurrent_policy_plays_both_teams_once_per_step_with_its_state_reset_per_episode():
    """One act per step for a policy that plays both teams (two would advance its LSTM twice), the
    state carried from step to step and zero on every episode's first step."""
    import torch

    from srl_lab.envs.hide_and_seek.lite import HideAndSeekLite
    from srl_lab.models.entity_attention import EntityAttentionPolicy

    torch.manual_seed(0)
    env = HideAndSeekLite(1, n_hiders=1, n_seekers=1)
    policy = EntityAttentionPolicy(env.observation_space, env.action_space, hidden=16, embed=8, heads=2,
                                   recurrent=True)
    calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (first step?, state in, state out)
    act = policy.act

    def recording_act(obs, state=None):
        result = act(obs, state)
        calls.append((obs["observation_self"][:, 9] == 0, state.clone(), result.state))
        return result

    policy.act = recording_act
    fraction = play(policy, policy, 8, seed=2, num_envs=4, n_hiders=1, n_seekers=1)
    assert 0.0 <= fraction <= 1.0
    assert len(calls) == 2 * 80  # two rounds of 4 envs' 80-step episodes, one act each step
    for (first, state, _), (_, _, before) in zip(calls[1:], calls[:-1]):
        assert first.all() or not first.any()  # the envs' episodes end together
        assert torch.equal(state[~first], before[~first]) and not state[first].any()
    assert sum(bool(first.all()) for first, _, _ in calls) == 2

