"""The run's metrics: records from every worker, persisted as JSON lines, queried for curves.

Both a live ``Run`` (fed by the client's ``subscribe_topic`` handler) and a run reopened from disk
after a kernel restart use this class, so curves and tables look the same either way. A resumed run
appends to the same file after loading what is there, so its curves continue.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any, Iterable

import numpy as np

HEADLINE_SCAN = 2000  # newest episodes a headline looks at: plenty for 20 of each key, cheap at 4 Hz
RATE_WINDOW_S = 10.0  # actors report env steps/s over this trailing window


class TrailingRate:
    """A counter's growth per second since the newest reading at least ``window_s`` before the
    current one (since the first reading until there is one).

    An actor that waits on the trainer steps in bursts: over its one-second report interval its
    rate swung between near zero and twice its mean, and so did the panel's header and worker table.
    """

    def __init__(self, now: float, count: float = 0.0, window_s: float = RATE_WINDOW_S):
        self.window_s = window_s
        self._readings: deque[tuple[float, float]] = deque([(now, count)])

    def update(self, now: float, count: float) -> float:
        """Take a reading; the rate up to it (0.0 when no time has passed since the oldest kept)."""
        while len(self._readings) > 1 and now - self._readings[1][0] >= self.window_s:
            self._readings.popleft()
        then, earlier = self._readings[0]
        self._readings.append((now, count))
        return (count - earlier) / (now - then) if now > then else 0.0


class MetricsLog:
    def __init__(self, path: str | None = None, resume: bool = False):
        self.path = path
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.episodes: list[dict[str, Any]] = []  # each stamped with the trainer's env_steps and time
        self.train: list[dict[str, Any]] = []  # one row per trainer report
        self.latest: dict[str, dict[str, Any]] = {}  # worker id -> last record
        self._actor_steps: dict[tuple[str, Any], int] = {}  # (actor, incarnation) -> env steps it reported
        self._trainer_steps: dict[str, int] = {}  # trainer id -> env steps it consumed (ranks add up)
        self.pool_results: dict[str, list[dict[str, Any]]] = {}  # policy -> episodes against past versions
        self._pool_tally: dict[str, dict[tuple, list]] = {}  # policy -> (version, team) -> [episodes, return sum, wins]
        if resume and path:
            for record in _read(path):
                self.add(record, persist=False)
            # The previous session's workers are gone, and its trainers' last versions may be ahead of
            # the checkpoint the run resumes from: status starts from what the resumed workers report.
            self.latest.clear()
        self._file = open(path, "a", buffering=1) if path else None

    def add(self, record: dict[str, Any], persist: bool = True) -> None:
        with self._lock:
            self.records.append(record)
            self.latest[record.get("srl_worker", "?")] = record
            if record.get("role") == "actor" and "env_steps" in record:
                self._actor_steps[(record.get("srl_worker", "?"), record.get("inc"))] = record["env_steps"]
            for policy, results in (record.get("pool_results") or {}).items():
                self.pool_results.setdefault(policy, []).extend(results)
                for r in results:  # episodes, return sum, wins per past version and team: status() reads it often
                    key = (r["opponent"], r.get("team") or "")
                    tally = self._pool_tally.setdefault(policy, {}).setdefault(key, [0, 0.0, 0])
                    tally[0] += 1
                    tally[1] += r["return"]
                    tally[2] += bool(r["won"])
            if record.get("role") == "trainer":
                self._trainer_steps[record.get("srl_worker", "?")] = record.get("env_steps_consumed", 0)
                stamp = {"env_steps": sum(self._trainer_steps.values()), "time": record.get("time"),
                         "version": record.get("version")}
                if "policy" in record:  # several policies: whose episodes and losses these are
                    stamp["policy"] = record["policy"]
                self.episodes.extend({**e, **stamp} for e in record.get("episodes", ()))
                self.train.append({**record.get("train", {}), **stamp})
            if persist and self._file:
                self._file.write(json.dumps(record, default=_json_default) + "\n")

    @classmethod
    def load(cls, path: str) -> "MetricsLog":
        log = cls(None)
        for record in _read(path):
            log.add(record, persist=False)
        log.path = path
        return log

    def returns(self, key: str = "return") -> np.ndarray:
        with self._lock:
            return np.array([e[key] for e in self.episodes if key in e], dtype=np.float64)

    def mean_return(self, last: int = 20, key: str = "return") -> float:
        values = self.returns(key)[-last:]
        return float(values.mean()) if len(values) else float("nan")

    def recent_means(self, keys: Iterable[str], last: int = 20, scan: int = HEADLINE_SCAN) -> dict[str, float]:
        """Mean of each key over the newest ``last`` episodes carrying it, among the newest ``scan``.

        NaN values are left out of a mean (NaN if nothing else is left); keys carried by none of
        those episodes are absent from the result.
        """
        keys = list(keys)
        found: dict[str, list[float]] = {}
        with self._lock:
            recent = self.episodes[-scan:]
        for episode in reversed(recent):
            for key in keys:
                if key in episode and len(found.setdefault(key, [])) < last:
                    found[key].append(as_float(episode[key]))
            if len(found) == len(keys) and all(len(v) >= last for v in found.values()):
                break
        return {key: _nanmean(values) for key, values in found.items()}

    def recent_keys(self, keys: Iterable[str], scan: int = HEADLINE_SCAN) -> set[str]:
        """Which of ``keys`` the newest ``scan`` episodes carry."""
        keys = set(keys)
        with self._lock:
            recent = self.episodes[-scan:]
        return {key for key in keys if any(key in e for e in recent)}

    def pool_table(self, policy: str) -> list[dict[str, Any]]:
        """Per past version and team it played: episodes, that version's mean return, win rate.

        The win rate is the trained side's (episodes where the past version's return was negative);
        ``team`` is "" in logs written before the pool kept a record per team.
        """
        with self._lock:
            tally = sorted(self._pool_tally.get(policy, {}).items())
        return [{"opponent": version, "team": team, "episodes": n, "mean_return": total / n, "win_rate": wins / n}
                for (version, team), (n, total, wins) in tally]

    def workers(self, role: str | None = None) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {w: r for w, r in self.latest.items() if role is None or r.get("role") == role}

    def env_steps(self) -> int:
        """Env steps stepped by all actors: every incarnation, including replaced and scaled-away ones."""
        with self._lock:
            return int(sum(self._actor_steps.values()))

    def trained_env_steps(self) -> int:
        """Env steps the trainers consumed: every rank's latest count added up (the episodes' stamp)."""
        with self._lock:
            return int(sum(self._trainer_steps.values()))

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


def _read(path: str) -> Iterable[dict[str, Any]]:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:  # a run killed mid-write leaves a torn last line
                    continue


def as_float(value: Any) -> float:
    """A number from a metrics value; NaN for None or anything else that is not one."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def rolling_mean(values: Iterable[float], window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values at each point, NaN values left out.

    Same length as ``values``: the first points average what there is so far, so a curve starts
    where its data starts. A point whose window holds no finite value is NaN (e.g. a statistic
    that some scenarios do not define).
    """
    values = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
    window = max(1, int(window))
    finite = np.isfinite(values)
    sums = np.concatenate(([0.0], np.cumsum(np.where(finite, values, 0.0))))
    counts = np.concatenate(([0], np.cumsum(finite)))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    n = counts[ends] - counts[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (sums[ends] - sums[starts]) / n, np.nan)


# What the progress bar and the panel header headline, by the keys the episodes carry: team games
# (hide-and-seek) report each team's return, because their mean agent return is zero by design; runs
# of several policies report each policy's return, because one mean over all of them hides which learns.
TEAM_KEYS = ("hider_return", "seeker_return")
TEAM_HEADLINE = (  # (label, short label, episode key)
    ("hider return", "hider_ret", "hider_return"),
    ("seeker return", "seeker_ret", "seeker_return"),
    ("hidden fraction", "hidden", "hidden_fraction"),
    ("fort rate", "fort", "fort_prep"),
)
SINGLE_HEADLINE = (("return", "ret", "return"),)


def headline(log: MetricsLog, last: int = 20) -> list[tuple[str, str, float]]:
    """(label, short label, mean over the last ``last`` episodes carrying the key) to show first.

    Keys no recent episode carries (an older run, another env) are left out; a key whose recent
    values are all NaN reads NaN. Before any episode ends this is the return, NaN. With several
    policies (and no team statistics) it is each policy's return over its own last ``last`` episodes.
    """
    if log.recent_keys(TEAM_KEYS):
        spec = TEAM_HEADLINE
    else:
        by_policy = policy_returns(log, last)
        if len(by_policy) > 1:
            return [(f"{policy} return", f"{policy}_ret", mean) for policy, mean in by_policy.items()]
        spec = SINGLE_HEADLINE
    means = log.recent_means([key for _, _, key in spec], last)
    shown = [(label, short, means[key]) for label, short, key in spec if key in means]
    return shown or [(label, short, float("nan")) for label, short, _ in SINGLE_HEADLINE]


def format_figure(value: float) -> str:
    """A headline figure as the header and the stop message print it: "—" until an episode reports it."""
    return "—" if np.isnan(value) else f"{value:.2f}"


def progress_postfix(log: MetricsLog, last: int = 20) -> dict[str, str]:
    """The progress bar's postfix: e.g. ``hider_ret=3.1, seeker_ret=-3.1, hidden=0.42, fort=0.05``,
    or ``matcher_ret=7.5, pointer_ret=4.2`` with several policies."""
    return {short: _short_number(value, label) for label, short, value in headline(log, last)}


def policy_returns(log: MetricsLog, last: int = 20, scan: int = HEADLINE_SCAN) -> dict[str, float]:
    """Policy name -> mean ``return`` over its newest ``last`` episodes among the newest ``scan``,
    by name; empty for a single-policy run (its episodes carry no ``policy`` stamp).

    NaN values are left out of a mean, as in ``recent_means``.
    """
    recent = log.episodes[-scan:]  # a slice is one atomic copy; add() only appends
    found: dict[str, list[float]] = {}
    for episode in reversed(recent):
        policy = episode.get("policy")
        if policy is None or "return" not in episode:
            continue
        values = found.setdefault(str(policy), [])
        if len(values) < last:
            values.append(as_float(episode["return"]))
    return {policy: _nanmean(found[policy]) for policy in sorted(found)}


def _short_number(value: float, label: str) -> str:
    if not np.isfinite(value):
        return "-"
    return f"{value:.1f}" if "return" in label else f"{value:.2f}"
