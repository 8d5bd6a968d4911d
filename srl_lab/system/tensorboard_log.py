"""The run's metrics as TensorBoard event files in the run directory, so ``tensorboard --logdir runs``
lists every run by its directory name, live and after it ends.

Only the controller writes them, from the records ``MetricsLog`` receives: nothing here runs on a
worker. A TensorBoard failure is logged once and turns this log off; the run and its metrics go on.
"""
from __future__ import annotations

import functools
import logging
import math
import numbers
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from srl_lab.system.metrics import MetricsLog, as_float

FLUSH_S = 10  # the most a live TensorBoard lags behind the run
GIF_COLORSPACE = 3  # RGB: what an ``image`` summary of a GIF declares

log = logging.getLogger(__name__)
Method = TypeVar("Method", bound=Callable[..., Any])


def _safely(method: Method) -> Method:
    """Run ``method`` under the log's lock unless the log is off; an exception turns the log off."""

    @functools.wraps(method)
    def guarded(self: "TensorBoardLog", *args: Any, **kwargs: Any) -> None:
        with self._lock:
            if self.error is not None or self._closed:
                return
            try:
                method(self, *args, **kwargs)
            except Exception as exc:  # TensorBoard must never break metrics collection
                self._fail(exc)

    return guarded  # type: ignore[return-value]


class TensorBoardLog:
    """Scalars at the trainer-consumed env steps: episode means, training statistics, throughput and
    the policy version, one point per trainer report; animated GIFs on request (``add_video``).

    A tag's steps strictly increase: a trainer report whose step has not advanced (the trainer
    reports between updates, or restarted from an older checkpoint) is held, its episodes merged into
    the next report of the same policy that advances. A resumed run's points start past those already
    on disk. With several policies a trainer's episode, training and version tags name its policy
    after their section (``episode/<policy>/return``, ``train/<policy>/policy_loss``).
    """

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.error: str | None = None  # the first failure, after which nothing more is written
        self._writer: Any = None  # a SummaryWriter, made on the first write
        self._closed = False
        self._lock = threading.RLock()  # metrics arrive on the client's event loop, videos and close elsewhere
        self._step: int | None = None  # points go strictly above this step: the last one written
        self._last: tuple[float, int, int] | None = None  # (time, step, actor env steps) of this log's last point
        # per policy (None: the only one), episodes of reports that did not advance the step, and their time
        self._held: dict[str | None, tuple[list[Mapping[str, Any]], float]] = {}

    @_safely
    def add(self, record: dict[str, Any], metrics: MetricsLog) -> None:
        """Write a trainer record just added to ``metrics``; other roles' records show as throughput."""
        if record.get("role") != "trainer":
            return
        if self._step is None:
            self._step = _earlier_top(metrics)
        step, walltime = metrics.trained_env_steps(), float(record.get("time") or time.time())
        policy = record.get("policy")
        held, _ = self._held.pop(policy, ([], walltime))
        episodes = [*held, *(e for e in record.get("episodes") or () if isinstance(e, Mapping))]
        if step <= self._step:
            if episodes:
                self._held[policy] = (episodes, walltime)
            return
        scalars = dict(_episode_scalars(episodes))
        scalars.update(_flatten("train", record.get("train") or {}))
        scalars["policy/version"] = as_float(record.get("version"))
        scalars = {_scoped(tag, policy): value for tag, value in scalars.items()}
        env_steps = metrics.env_steps()
        if self._last is not None and walltime > self._last[0]:
            elapsed = walltime - self._last[0]
            scalars["throughput/trained_rows_per_s"] = (step - self._last[1]) / elapsed
            scalars["throughput/env_steps_per_s"] = (env_steps - self._last[2]) / elapsed
        self._write(scalars, step, walltime)
        self._step, self._last = step, (walltime, step, env_steps)

    @_safely
    def add_video(self, tag: str, gif_bytes: bytes, step: int, height: int, width: int,
                  walltime: float | None = None) -> None:
        """An animated GIF as an image summary: TensorBoard's Images tab plays it."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        image = Summary.Image(height=height, width=width, colorspace=GIF_COLORSPACE,
                              encoded_image_string=gif_bytes)
        summary = Summary(value=[Summary.Value(tag=tag, image=image)])
        self._summary_writer()._get_file_writer().add_summary(summary, step, walltime)

    def close(self) -> None:
        """Write the held episodes (one env step past the last point), flush and close."""
        with self._lock:
            if self._held:
                self._flush_held()
            self._closed = True
            if self._writer is not None:
                try:
                    self._writer.close()
                except Exception as exc:
                    self._fail(exc)

    @_safely
    def _flush_held(self) -> None:
        step = (self._step or 0) + 1
        for policy, (episodes, walltime) in self._held.items():
            self._write({_scoped(tag, policy): v for tag, v in _episode_scalars(episodes)}, step, walltime)
        self._held, self._step = {}, step

    def _write(self, scalars: dict[str, float], step: int, walltime: float) -> None:
        writer = self._summary_writer()
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, global_step=step, walltime=walltime)

    def _summary_writer(self) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.run_dir, flush_secs=FLUSH_S)
        return self._writer

    def _fail(self, exc: Exception) -> None:
        if self.error is None:
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("TensorBoard event files for %s stopped: %s", self.run_dir, self.error, exc_info=exc)


def _earlier_top(metrics: MetricsLog) -> int:
    """Above which step a new log writes: past an earlier run's points when this one resumed it
    (its trainer reports are in ``metrics``, replayed, all but the newest), else from step 0."""
    earlier = [row["env_steps"] for row in metrics.train[:-1]]
    return max(earlier) + 1 if earlier else -1  # + 1: that run may have written its held episodes there


def _scoped(tag: str, policy: str | None) -> str:
    """``section/rest`` -> ``section/<policy>/rest`` for a policy of several (None: unchanged)."""
    if policy is None:
        return tag
    section, _, rest = tag.partition("/")
    return f"{section}/{policy}/{rest}"


def _episode_scalars(episodes: list[Mapping[str, Any]]) -> Iterator[tuple[str, float]]:
    """``episode/<key>``: the mean of each statistic, NaN values left out (a key that is only NaN
    is skipped); ``episode/count``: how many episodes ended."""
    if not episodes:
        return
    values: dict[str, list[float]] = {}
    for episode in episodes:
        for key, value in episode.items():
            values.setdefault(str(key), []).append(as_float(value))
    for key, column in values.items():
        present = [v for v in column if not math.isnan(v)]
        if present:
            yield f"episode/{key}", math.fsum(present) / len(present)
    yield "episode/count", float(len(episodes))


def _flatten(prefix: str, values: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``prefix/a/b`` for every number in nested mappings (e.g. one mapping per policy)."""
    for key, value in values.items():
        tag = f"{prefix}/{key}"
        if isinstance(value, Mapping):
            yield from _flatten(tag, value)
        elif isinstance(value, numbers.Real):
            yield tag, float(value)
