"""TensorBoard event files: what the controller writes from the run's records, read back with
TensorBoard's own reader. The end-to-end check on a real run is in test_runtime.py."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from PIL import Image

from srl_lab.system.metrics import MetricsLog
from srl_lab.system.tensorboard_log import TensorBoardLog
from runs import event_accumulator, event_scalars

NAN = float("nan")


def episode(hider_return: float, first_seen_step: float = NAN, **extra: float) -> dict[str, float]:
    """A hide-and-seek-like episode: ``first_seen_step`` is NaN when the seekers never saw a hider."""
    return {"hider_return": hider_return, "seeker_return": -hider_return, "hidden_fraction": 0.5,
            "first_seen_step": first_seen_step, "never_defined": NAN, "length": 240, **extra}


def trainer(consumed: int, time: float, episodes: list, version: int, rank: int = 0) -> dict:
    train = {"policy_loss": -0.01 * version, "entropy": 1.5,
             "policies": {"hider": {"value_loss": 0.1 * version}, "seeker": {"value_loss": 0.2}}}
    return {"role": "trainer", "srl_worker": f"trainer-{rank}", "time": time, "version": version,
            "env_steps_consumed": consumed, "episodes": episodes, "train": train if version else {}}


def actor(env_steps: int, time: float) -> dict:
    return {"role": "actor", "srl_worker": "actor-0", "inc": 1, "time": time, "env_steps": env_steps}


E = [episode(1.0), episode(3.0, 40.0), episode(-2.0, 10.0), episode(0.0, hidden_fraction_vs_random_seeker=0.25),
     episode(5.0), episode(7.0), episode(9.0)]
RECORDS = [
    trainer(0, 100.0, [], 0),
    actor(500, 100.5),
    trainer(1000, 101.0, [E[0], E[1]], 1),
    trainer(1000, 101.5, [E[2]], 1),  # the step has not advanced: held
    actor(1500, 102.0),
    trainer(2000, 102.5, [E[3]], 2),  # flushes E[2] with E[3]
    trainer(2000, 103.0, [E[4]], 2),  # held
    trainer(500, 103.5, [E[5]], 2, rank=1),  # a second rank: the step is the ranks' sum, 2500
    trainer(2000, 104.0, [E[6]], 2),  # held until close, then written one step past 2500
]


def feed(metrics: MetricsLog, run_dir: Path, records: list[dict]) -> None:
    """What the controller does with each record, then at the end of the run."""
    tensorboard = TensorBoardLog(str(run_dir))
    for record in records:
        metrics.add(record)
        tensorboard.add(record, metrics)
    metrics.close()
    tensorboard.close()
    assert tensorboard.error is None


@pytest.fixture(scope="module")
def scalars(tmp_path_factory) -> dict[str, list]:
    run_dir = tmp_path_factory.mktemp("run")
    feed(MetricsLog(None), run_dir, RECORDS)
    return event_scalars(run_dir)


def points(scalars: dict[str, list], tag: str) -> list[tuple[int, float]]:
    return [(e.step, pytest.approx(e.value)) for e in scalars[tag]]


def test_every_episode_statistic_is_a_mean_at_the_trained_steps(scalars):
    assert points(scalars, "episode/hider_return") == [(1000, 2.0), (2000, -1.0), (2500, 6.0), (2501, 9.0)]
    assert points(scalars, "episode/count") == [(1000, 2), (2000, 2), (2500, 2), (2501, 1)]
    assert sum(e.value for e in scalars["episode/count"]) == len(E)  # held episodes are not lost
    # NaN values are left out of a mean; a record where a key is only NaN writes nothing for it.
    assert points(scalars, "episode/first_seen_step") == [(1000, 40.0), (2000, 10.0)]
    assert points(scalars, "episode/hidden_fraction_vs_random_seeker") == [(2000, 0.25)]
    assert "episode/never_defined" not in scalars
    keys = {k for e in E for k in e if k != "never_defined"}
    assert {f"episode/{k}" for k in keys} <= set(scalars)


def test_train_statistics_are_flattened_and_skipped_on_repeated_steps(scalars):
    assert points(scalars, "train/policy_loss") == [(1000, -0.01), (2000, -0.02), (2500, -0.02)]
    assert points(scalars, "train/policies/hider/value_loss") == [(1000, 0.1), (2000, 0.2), (2500, 0.2)]
    assert "train/policies/seeker/value_loss" in scalars and "train/entropy" in scalars
    assert points(scalars, "policy/version") == [(0, 0), (1000, 1), (2000, 2), (2500, 2)]


def test_throughput_and_wall_times(scalars):
    assert points(scalars, "throughput/trained_rows_per_s") == [(1000, 1000.0), (2000, 1000 / 1.5),
                                                                (2500, 500 / 1.0)]
    assert points(scalars, "throughput/env_steps_per_s") == [(1000, 500.0), (2000, 1000 / 1.5), (2500, 0.0)]
    assert [e.wall_time for e in scalars["policy/version"]] == [100.0, 101.0, 102.5, 103.5]
    assert scalars["episode/count"][-1].wall_time == 104.0  # the held report's own time


def test_steps_strictly_increase_for_every_tag(scalars):
    for tag, events in scalars.items():
        steps = [e.step for e in events]
        assert all(a < b for a, b in zip(steps, steps[1:])), (tag, steps)


def test_a_resumed_run_appends_past_the_earlier_points_without_rewriting_them(tmp_path):
    path = str(tmp_path / "metrics.jsonl")
    feed(MetricsLog(path), tmp_path, RECORDS[:6])  # points up to step 2000, nothing held
    resumed = MetricsLog(path, resume=True)  # replays the records; they reach no event file again
    feed(resumed, tmp_path, [trainer(1000, 200.0, [E[4]], 1),  # restarted from an older checkpoint
                             trainer(2000, 201.0, [E[5]], 2),  # still not past the earlier points
                             trainer(3000, 202.0, [E[6]], 3)])
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    scalars = event_scalars(tmp_path)
    assert points(scalars, "episode/count") == [(1000, 2), (2000, 2), (3000, 3)]
    assert points(scalars, "policy/version") == [(0, 0), (1000, 1), (2000, 2), (3000, 3)]
    assert [e.step for e in scalars["throughput/trained_rows_per_s"]] == [1000, 2000]  # not across the gap


def test_a_resumed_log_keeps_the_history_but_reports_no_worker_until_one_reports_again(tmp_path):
    """The previous session's trainer may have got past the checkpoint the run resumes from: its last
    version must not stand for the resumed run's."""
    path = str(tmp_path / "metrics.jsonl")
    feed(MetricsLog(path), tmp_path, RECORDS[:6])
    resumed, reopened = MetricsLog(path, resume=True), MetricsLog.load(path)
    assert len(resumed.episodes) == len(reopened.episodes) > 0
    assert resumed.env_steps() == reopened.env_steps() > 0
    assert resumed.workers() == {}
    resumed.add(trainer(1000, 200.0, [], 1))  # back at the checkpoint's version
    assert resumed.workers()["trainer-0"]["version"] == 1
    resumed.close()


def test_several_policies_write_their_own_tags_and_keep_their_held_episodes(tmp_path):
    def of(policy: str, consumed: int, time: float, returns: list[float], version: int) -> dict:
        record = trainer(consumed, time, [{"return": r, "policy": policy} for r in returns], version)
        return {**record, "srl_worker": f"trainer-0@{policy}", "policy": policy}

    feed(MetricsLog(None), tmp_path, [
        of("scout", 1000, 100.0, [1.0, 3.0], 1),
        of("guard", 500, 100.5, [10.0], 1),  # the step is the policies' sum: 1500
        of("guard", 500, 101.0, [20.0], 1),  # held for the guard, not merged into the scout's next point
        of("scout", 2000, 101.5, [5.0], 2),  # 2500
        of("guard", 1000, 102.0, [30.0], 2),  # 3000, with the held 20
    ])
    scalars = event_scalars(tmp_path)
    assert points(scalars, "episode/scout/return") == [(1000, 2.0), (2500, 5.0)]
    assert points(scalars, "episode/guard/return") == [(1500, 10.0), (3000, 25.0)]
    assert points(scalars, "policy/guard/version") == [(1500, 1), (3000, 2)]
    assert points(scalars, "train/scout/policy_loss") == [(1000, -0.01), (2500, -0.02)]
    assert not {"episode/return", "train/policy_loss", "policy/version"} & set(scalars)
    assert [e.step for e in scalars["throughput/trained_rows_per_s"]] == [1500, 2500, 3000]


def test_video_round_trip(tmp_path):
    width, height = 24, 16
    frames = [Image.new("RGB", (width, height), color) for color in ("red", "green", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    tensorboard = TensorBoardLog(str(tmp_path))
    tensorboard.add_video("video/episode", buffer.getvalue(), step=4096, height=height, width=width,
                          walltime=123.0)
    tensorboard.close()
    (image,) = event_accumulator(tmp_path).Images("video/episode")
    assert (image.width, image.height, image.step, image.wall_time) == (width, height, 4096, 123.0)
    decoded = Image.open(io.BytesIO(image.encoded_image_string))
    assert decoded.format == "GIF" and decoded.n_frames == 3


def test_a_failing_writer_turns_itself_off_without_breaking_metrics(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    metrics, tensorboard = MetricsLog(None), TensorBoardLog(str(not_a_dir))
    for record in RECORDS:
        metrics.add(record)
        tensorboard.add(record, metrics)  # raises nothing
    tensorboard.add_video("video/episode", b"GIF89a", step=1, height=1, width=1)
    tensorboard.close()
    assert tensorboard.error and len(metrics.episodes) == len(E)
    assert not math.isnan(metrics.mean_return(key="hider_return"))
