"""The episode viewer: filmed episodes, the viewing process, and the viewer following a live run."""
from __future__ import annotations

import dataclasses
import io
import os
import time

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

import srl_lab
from srl_lab.envs.factory import make_env_group, make_policy
from srl_lab.envs.hide_and_seek.showcase import showcase_config
from srl_lab.notebook.viewer import EpisodeViewer
from srl_lab.viewer.episode import WeightsSource, play_episode
from srl_lab.viewer.frames import CAPTION_PX
from srl_lab.viewer.process import EpisodeProcess
from runs import event_accumulator, wait_for


def fresh_weights(config) -> dict:
    group = make_env_group(config, 1)
    try:
        return make_policy(config, group.observation_space, group.action_space).weights()
    finally:
        group.close()


def gif_frames(data: bytes) -> list[Image.Image]:
    image = Image.open(io.BytesIO(data))
    frames = []
    for k in range(image.n_frames):
        image.seek(k)
        frames.append(image.convert("RGB"))
    return frames


def test_a_filmed_hide_and_seek_episode_decodes_to_every_step():
    config = showcase_config("short")
    episode = play_episode(config, WeightsSource(weights=fresh_weights(config), version=7), seed=3, pixels=400)
    horizon = 80  # quadrant episodes are 80 steps: one frame per state the agents acted on
    assert len(episode.pngs) == horizon and episode.version == 7 and episode.seed == 3
    assert episode.size == (400 + CAPTION_PX, 400)
    frames = gif_frames(episode.gif)
    assert len(frames) == horizon and all(f.size == (400, 400 + CAPTION_PX) for f in frames)
    first, last = (np.asarray(Image.open(io.BytesIO(p))) for p in (episode.pngs[0], episode.pngs[-1]))
    assert first.shape == (400 + CAPTION_PX, 400, 3)
    assert not np.array_equal(first[CAPTION_PX:], last[CAPTION_PX:]), "nothing moved in 80 steps"
    assert not np.array_equal(first[:CAPTION_PX], last[:CAPTION_PX]), "the caption shows the step and phase"
    assert 0.0 <= episode.stats["hidden_fraction"] <= 1.0 and "fort_prep" in episode.stats


def test_the_mujoco_variant_is_filmed_the_same_way():
    pytest.importorskip("mujoco")
    config = showcase_config("short")
    config = dataclasses.replace(config, env=dataclasses.replace(config.env, id="hide_and_seek"))
    episode = play_episode(config, WeightsSource(weights=fresh_weights(config), version=3), pixels=240,
                           max_steps=12)
    assert len(episode.pngs) == 12 and len(gif_frames(episode.gif)) == 12
    assert episode.size[1] == 240


class Blinker(gym.Env):
    """A user's env written in the test: renders its own RGB frames, a bright square that moves."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, self.t / 10, np.float32), 1.0, self.t >= 10, False, {}

    def render(self):
        frame = np.zeros((50, 100, 3), np.uint8)
        frame[:, self.t * 9:self.t * 9 + 10] = 255
        return frame


def test_any_env_that_renders_rgb_arrays_can_be_filmed():
    config = srl_lab.ExperimentConfig(env=srl_lab.EnvConfig(factory=Blinker))
    episode = play_episode(config, WeightsSource(weights=fresh_weights(config), version=1), pixels=200)
    assert len(episode.pngs) == 10 and episode.stats["return"] == 10.0
    assert episode.size == (100 + CAPTION_PX, 200)  # scaled to 200 px on its longer side
    assert len(gif_frames(episode.gif)) == 10


def test_the_viewing_process_reports_errors_and_survives_being_killed():
    config = showcase_config("short")
    process = EpisodeProcess()
    try:
        with pytest.raises(RuntimeError, match="needs an endpoint and key, a checkpoint, or weights"):
            process.play(config, WeightsSource()).result(timeout=120)
        process._child.kill()
        time.sleep(0.5)
        episode = process.play(config, WeightsSource(weights=fresh_weights(config), version=2),
                               pixels=120).result(timeout=120)
        assert episode.version == 2 and len(episode.pngs) == 80
    finally:
        process.close()


@pytest.mark.slow
def test_the_viewer_follows_a_live_run_then_its_final_weights_and_checkpoints(dask_client, tmp_path):
    config = showcase_config("short")
    run = srl_lab.launch(config, client=dask_client, run_dir=str(tmp_path / "run"))
    viewer = EpisodeViewer(run, every_versions=5, pixels=160)
    try:
        wait_for(lambda: run.status()["version"] >= 1, 120, "the first policy version")
        viewer.on_version(run.status()["version"])
        wait_for(lambda: viewer.episode is not None, 120, "the first episode")
        first = viewer.episode.version
        assert viewer.frame.value == viewer.episode.pngs[0] and viewer.step.max == 79
        viewer.step.value = 40  # the scrubber moves the frame
        assert viewer.frame.value == viewer.episode.pngs[40]
        viewer.on_version(first + 4)  # fewer than every_versions since the last: nothing new to play
        assert viewer._pending is None
        wait_for(lambda: run.status()["version"] >= first + 5, 120, "five more versions")
        assert viewer.request()
        wait_for(lambda: viewer.episode.version > first, 120, "an episode of a newer version")
        assert "srl-viewer-version" in viewer.info.value
        run.checkpoint()
    finally:
        result = run.stop()
    wait_for(lambda: viewer._pending is None, 60, "the last live episode")
    assert viewer.request()
    wait_for(lambda: viewer.episode.version == result["version"], 120, "an episode of the final weights")
    choice = viewer.weights.options[1]  # the checkpoint written above
    viewer.weights.value = choice  # choosing weights plays them
    wait_for(lambda: viewer._pending is None and viewer.episode.version == int(choice[8:16]), 120,
             "an episode of the chosen checkpoint")
    viewer.close()
    reopened = EpisodeViewer(srl_lab.open_run(str(tmp_path / "run")), pixels=160)  # after a kernel restart
    try:
        assert reopened.request()  # "latest": the newest checkpoint, with the config saved in it
        newest = reopened.weights.options[1]
        wait_for(lambda: reopened.episode is not None, 120, "an episode of the reopened run")
        assert reopened.episode.version == int(newest[8:16])
    finally:
        reopened.close()
    videos = sorted(os.listdir(tmp_path / "run" / "videos"))
    assert len(videos) == 5 and all(v.endswith(".gif") for v in videos)
    assert len(gif_frames((tmp_path / "run" / "videos" / videos[0]).read_bytes())) == 80
    images = event_accumulator(tmp_path / "run").Images("episode")  # the live episodes, in TensorBoard
    assert len(images) == 2 and images[0].step <= images[1].step
    assert len(gif_frames(images[0].encoded_image_string)) == 80
