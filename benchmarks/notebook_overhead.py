"""What showing episodes in the browser costs a run: notebook 02 in JupyterLab and chromium, the
episode viewer looping an episode against the viewer at rest.

Runs ``notebooks/02_hide_and_seek.ipynb`` as it ships (the showcase configuration, 1 actor) in a
JupyterLab on this machine, opened in Debian's headless chromium as a user on a laptop would. Once
the viewer's first episode has played through, it watches the panel as it ships for ``--default``
seconds (automatic episodes every 100 policy versions, each played once), then turns the automatic
episodes off and alternates phases of ``--phase`` seconds, ``--pairs`` times, the order flipped
every pair: "rest"
(the viewer shows a still frame; the header, worker table and curves refresh as always) and "loop"
(the viewer's loop button on, the episode playing round and round at 10 frames/s). Every frame
shown is a widget message from the kernel through the notebook server and a repaint in the browser,
work that ``viewer_overhead.py`` (the viewing process alone, no browser) does not see.

Reported: env steps/s per phase from the actors' own reports, ``loop_slowdown_pct`` (100 x (1 -
median over pairs of loop/rest)), and, from the ``--default`` stretch, the share of its seconds
in which frames were streaming (``default_streaming_share``: frames shown / (10 frames/s x
seconds)) and the slowdown that share implies (``default_slowdown_pct``, share x loop slowdown).
Target: ``default_slowdown_pct`` <= 5. The first episode, played once per panel as the run starts,
is left out of that stretch and its frames reported apart (``first_episode_frames``).

What it has shown on 2 cores: looping cost 43 % of the env steps/s (a median of 7,181 at rest,
4,091 looping, 9.2 frames/s), so the viewer, which looped every episode until then, plays each once;
as it ships, frames then streamed 7.6 % of the time after the first episode (3.3 % implied).

How it could be fooled: headless chromium without a GPU paints in software, where a laptop's
browser may composite on its GPU (the notebook server's and the kernel's share stays); a browser on
another machine costs the run nothing; the default's share depends on how often automatic episodes
come (every 100 policy versions), so a slower or faster run plays a different share of the time.

    python benchmarks/notebook_overhead.py            # about 10 minutes on 2 cores
    python benchmarks/notebook_overhead.py --quick    # a smoke run

The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jupyterlab_session as lab  # noqa: E402
from viewer_overhead import actor_rate  # noqa: E402

from srl_lab.system.metrics import MetricsLog  # noqa: E402

FPS = 10.0  # the viewer's frames per second (EpisodeViewer's default)


def set_loop(page, on: bool) -> None:
    """The viewer's loop button to ``on``; when on, play (from the start once it reached the end)."""
    repeat = page.locator(".srl-viewer-play button:has(i.fa-retweet)")
    if ("mod-active" in (repeat.get_attribute("class") or "")) != on:
        repeat.click()
    playing = page.locator(".srl-viewer-play button:has(i.fa-pause)").count() > 0
    if on and not playing:
        page.locator(".srl-viewer-play button:has(i.fa-play)").first.click()
    if not on and playing:
        page.locator(".srl-viewer-play button:has(i.fa-pause)").first.click()


def phase(page, metrics_path: Path, loop: bool, seconds: float) -> dict[str, float]:
    """Env steps/s and frames shown per second over ``seconds`` with the viewer looping or at rest."""
    set_loop(page, loop)
    time.sleep(1.0)  # a frame on its way lands before the count starts
    frames, start = page.evaluate(lab.FRAMES_SHOWN), time.time()
    time.sleep(seconds)
    end = time.time()
    shown = page.evaluate(lab.FRAMES_SHOWN) - frames
    records = MetricsLog.load(str(metrics_path)).records
    return {"env_steps_per_s": actor_rate(records, start, end), "frames_per_s": shown / (end - start)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", type=float, default=40.0, help="seconds per phase")
    parser.add_argument("--pairs", type=int, default=3, help="rest/loop pairs (the median ratio is quoted)")
    parser.add_argument("--default", type=float, default=180.0,
                        help="seconds of the panel as it ships (automatic episodes on) before the phases")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 pair of 15 s, 20 s of the default")
    args = parser.parse_args()
    if args.quick:
        args.phase, args.pairs, args.default = 15.0, 1, 20.0
    chromium = lab.chromium_path()
    if chromium is None:
        sys.exit("Debian's chromium is needed: apt-get install -y chromium (make test installs it)")
    from playwright.sync_api import sync_playwright

    pairs: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="srl-notebook-bench-") as tmp:
        workdir = Path(tmp)
        metrics_path = workdir / "run" / "metrics.jsonl"
        with lab.jupyterlab(workdir, {"SRL_LAB_RUN_DIR": str(workdir / "run")}) as (url, token), \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=lab.CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            lab.run_all(page, url, token, "02_hide_and_seek.ipynb")
            page.wait_for_function(f"() => ({lab.SHOWN_VERSION})() >= 0", timeout=300_000)
            page.locator(".srl-viewer").scroll_into_view_if_needed()
            page.evaluate(lab.COUNT_FRAMES)
            page.wait_for_function(lab.FRAMES_STOPPED, timeout=120_000)  # the first episode has played through
            first_frames = page.evaluate(lab.FRAMES_SHOWN)
            start = time.time()
            time.sleep(args.default)
            default = {"seconds": time.time() - start, "frames": page.evaluate(lab.FRAMES_SHOWN) - first_frames}
            default["env_steps_per_s"] = actor_rate(MetricsLog.load(str(metrics_path)).records, start, time.time())
            page.locator(".srl-viewer-auto input").uncheck()  # no automatic episode during the phases
            for k in range(args.pairs):
                order = ("rest", "loop") if k % 2 == 0 else ("loop", "rest")
                pair = {name: phase(page, metrics_path, name == "loop", args.phase) for name in order}
                pairs.append(pair)
                print(f"pair {k + 1}: rest {pair['rest']['env_steps_per_s']:,.0f} env steps/s, loop "
                      f"{pair['loop']['env_steps_per_s']:,.0f} ({pair['loop']['frames_per_s']:.1f} frames/s)",
                      flush=True)
            set_loop(page, False)
            page.locator("button.srl-stop").click()
            page.wait_for_function("() => document.querySelector('.srl-panel').innerText.includes('stopped after')",
                                   timeout=180_000)
            browser.close()
    slowdown = 100.0 * (1.0 - statistics.median(p["loop"]["env_steps_per_s"] / p["rest"]["env_steps_per_s"]
                                                 for p in pairs))
    share = min(1.0, default["frames"] / (FPS * default["seconds"]))
    print(json.dumps({
        "loop_slowdown_pct": round(slowdown, 2),
        "env_steps_per_s": {name: round(statistics.median(p[name]["env_steps_per_s"] for p in pairs))
                            for name in ("rest", "loop")},
        "loop_frames_per_s": round(statistics.median(p["loop"]["frames_per_s"] for p in pairs), 2),
        "default_streaming_share": round(share, 4),
        "default_slowdown_pct": round(share * slowdown, 2),
        "default": {"seconds": round(default["seconds"], 1), "frames": default["frames"],
                    "env_steps_per_s": round(default["env_steps_per_s"])},
        "first_episode_frames": first_frames, "pairs": pairs, "phase_s": args.phase,
    }))


if __name__ == "__main__":
    main()
