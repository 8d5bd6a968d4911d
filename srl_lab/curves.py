"""Learning curves rendered with matplotlib's Agg backend to PNG bytes (files, widgets, reports)."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg", force=False)
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)

from srl_lab.system.metrics import MetricsLog, smooth  # noqa: E402

# (panel title, episode keys) — hide-and-seek runs report the team statistics, others a return.
EPISODE_PANELS = [
    ("return", ("return",)),
    ("team returns", ("hider_return", "seeker_return")),
    ("fraction of play steps hidden", ("hidden_fraction", "hidden_fraction_vs_random_seeker",
                                       "hidden_fraction_vs_random_hider")),
    ("box statistics", ("max_box_move_prep", "max_box_move", "num_box_lock_prep", "num_box_lock")),
    ("ramp statistics", ("max_ramp_move_prep", "max_ramp_move", "num_ramp_lock_prep", "num_ramp_lock")),
]
TRAIN_PANELS = [("losses", ("policy_loss", "value_loss", "entropy"))]


def render_png(log: MetricsLog, title: str = "", width: float = 11.0, dpi: int = 80) -> bytes:
    """All panels that have data, against samples trained, as PNG bytes."""
    episodes = log.episodes
    panels = [(name, [k for k in keys if any(k in e for e in episodes)]) for name, keys in EPISODE_PANELS]
    panels = [(n, ks) for n, ks in panels if ks]
    if len(panels) > 1 and panels[0][0] == "return":  # team games: the mean agent return is 0 by design
        panels = panels[1:]
    has_train = bool(log.train)
    n = max(1, len(panels) + int(has_train))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(width, 3.0 * rows), dpi=dpi)
    for i, (name, keys) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        for key in keys:
            xs = [e["env_steps"] for e in episodes if key in e]
            ys = [e[key] for e in episodes if key in e]
            window = max(1, min(200, len(ys) // 40))  # ~40 smoothed points across the run
            ax.plot(xs[window - 1:], smooth(ys, window), label=key)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("samples trained (agent steps)", fontsize=8)
        ax.legend(fontsize=7)
    if has_train:
        ax = fig.add_subplot(rows, cols, len(panels) + 1)
        for key in TRAIN_PANELS[0][1]:
            ax.plot([t["env_steps"] for t in log.train], [t.get(key, float("nan")) for t in log.train], label=key)
        ax.set_title("losses", fontsize=9)
        ax.legend(fontsize=7)
    if not panels and not has_train:
        fig.text(0.5, 0.5, "waiting for the first episodes...", ha="center")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def save_png(log: MetricsLog, path: str, title: str = "") -> str:
    with open(path, "wb") as f:
        f.write(render_png(log, title))
    return path
