"""The showcase notebook in a real JupyterLab, driven through Debian's chromium with Playwright.

Open 02_hide_and_seek, run all cells, wait until the curve image has changed twice, move the actor
control from 1 to 2 with the keyboard, and wait for the worker table to show 2 running actor workers
(the embedded LocalCluster grows by one process for it). Then, with the run paused from the panel
(as one would to watch: the viewing process plays at a low priority, and a busy 2-core machine
leaves it little), the episode viewer: its frame changes while it plays, stays put when paused, plays
on to the episode's last step and stops there, and follows the step scrubber; resumed, trained on
and paused again, a new episode shows a newer policy version; the comparison tab draws the run.
Screenshots of the panel, the viewer and the comparison are saved under ``runs/screenshots/``.
Skipped, saying why, only when no chromium can be found.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("jupyterlab_session", ROOT / "benchmarks" / "jupyterlab_session.py")
lab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lab)
SCREENSHOTS = ROOT / "runs" / "screenshots"
SCREENSHOT = SCREENSHOTS / "02_hide_and_seek_panel.png"
RUNNING_ACTORS = "table.srl-workers tr[data-role='actor'][data-state='running']"
STOPPED = "() => document.querySelector('.srl-panel').innerText.includes('stopped after')"
VERSION = """() => {
    const m = document.querySelector('.srl-panel').innerText.match(/policy version: (\\d+)/);
    return m === null ? -1 : Number(m[1]);
}"""
TRAINED = f"() => ({VERSION})() >= 3"  # a few updates in, so the screenshot has curves
FRAME_SRC = "() => document.querySelector('img.srl-viewer-frame').getAttribute('src')"


def pause_run(page, pause: bool) -> None:
    """The panel's pause (or resume) button; the run's actors idle (or act again)."""
    page.locator(f"button.srl-{'pause' if pause else 'resume'}").click()
    page.wait_for_selector(f"button.srl-{'resume' if pause else 'pause'}:not([disabled])", timeout=60_000)


def check_episode_viewer(page) -> None:
    """With the run paused: play, pause, scrub; then a new episode of a newer policy version after
    training on for a while; screenshot the viewer."""
    pause_run(page, True)
    page.wait_for_function(f"() => ({lab.SHOWN_VERSION})() >= 0", timeout=240_000)  # the first episode is in
    page.evaluate(lab.COUNT_FRAMES)
    page.wait_for_function("() => window.srlFrames >= 5", timeout=60_000)  # it plays by itself
    page.locator(".srl-viewer-play button:has(i.fa-pause)").click()
    time.sleep(1.0)  # a frame already on its way may still land
    paused = page.evaluate(FRAME_SRC)
    time.sleep(2.0)
    assert page.evaluate(FRAME_SRC) == paused, "the frame kept changing after pause"
    handle = page.locator(".srl-viewer-step .noUi-handle")
    # Play on: the episode plays to its last step and stops there by itself (a loop would keep the
    # browser and the notebook server busy with frames for as long as the tab is open).
    frames_before = page.evaluate(lab.FRAMES_SHOWN)
    page.locator(".srl-viewer-play button:has(i.fa-play)").first.click()
    page.wait_for_function(f"() => window.srlFrames > {frames_before}", timeout=30_000)
    page.wait_for_function(lab.FRAMES_STOPPED, timeout=120_000)
    assert handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax"), "stopped before its end"
    before = float(handle.get_attribute("aria-valuenow"))
    handle.focus()
    page.keyboard.press("PageUp" if before < 40 else "PageDown")  # the scrubber moves the frame
    page.wait_for_function(f"() => ({FRAME_SRC})() !== {json.dumps(paused)}", timeout=30_000)
    assert float(handle.get_attribute("aria-valuenow")) != before
    shown = page.evaluate(lab.SHOWN_VERSION)
    pause_run(page, False)
    page.wait_for_function(f"() => ({VERSION})() > {shown}", timeout=120_000)
    pause_run(page, True)
    page.locator("button.srl-viewer-new").click()
    page.wait_for_function(f"() => ({lab.SHOWN_VERSION})() > {shown}", timeout=240_000)
    page.locator(".srl-viewer").scroll_into_view_if_needed()
    page.locator(".srl-viewer").screenshot(path=str(SCREENSHOTS / "02_hide_and_seek_viewer.png"))
    pause_run(page, False)


def check_comparison(page) -> None:
    """The comparison tab lists the run and draws it."""
    page.locator(".srl-tabs .lm-TabBar-tab", has_text="compare runs").click()
    source = "() => document.querySelector('img.srl-compare-image').getAttribute('src') || ''"
    before = page.evaluate(source)
    page.locator("button.srl-compare-button").click()
    page.wait_for_function(f"() => !['', {json.dumps(before)}].includes(({source})())", timeout=60_000)
    page.locator(".srl-compare").screenshot(path=str(SCREENSHOTS / "02_compare_runs.png"))


@pytest.fixture
def chromium() -> str:
    """Debian's chromium; checked before JupyterLab starts, so a skip costs nothing."""
    path = lab.chromium_path()
    if path is None:
        reason = "Debian's chromium is not installed (make test installs it: apt-get install -y chromium)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab serving a copy of notebooks/ in short mode, the run written under ``tmp_path/run``."""
    with lab.jupyterlab(tmp_path, {"SRL_LAB_SHORT": "1", "SRL_LAB_RUN_DIR": str(tmp_path / "run")}) as (url, token):
        yield url, token, tmp_path


@pytest.mark.slow
def test_showcase_notebook_in_jupyterlab(chromium, jupyterlab):
    from playwright.sync_api import sync_playwright

    url, token, workdir = jupyterlab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=lab.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        try:
            lab.run_all(page, url, token, "02_hide_and_seek.ipynb")

            page.wait_for_selector("img.srl-curves", timeout=120_000)
            page.evaluate("""() => {
                const img = document.querySelector('img.srl-curves');
                window.srlCurveTimes = [];
                new MutationObserver(() => window.srlCurveTimes.push(performance.now()))
                    .observe(img, {attributeFilter: ['src']});
            }""")
            page.wait_for_function("() => window.srlCurveTimes.length >= 2", timeout=180_000)

            handle = page.locator(".srl-actors .noUi-handle")
            assert handle.get_attribute("aria-valuenow") == "1.0"
            handle.focus()
            page.keyboard.press("ArrowRight")  # the actor control: 1 -> 2
            assert handle.get_attribute("aria-valuenow") == "2.0"
            page.wait_for_function(f"() => document.querySelectorAll(\"{RUNNING_ACTORS}\").length === 2",
                                   timeout=180_000)
            assert page.locator("table.srl-workers tr[data-role='actor']").count() == 2
            page.wait_for_function(TRAINED, timeout=180_000)  # a few updates in, so the screenshot has curves
            seen = page.evaluate("() => window.srlCurveTimes.length")
            page.wait_for_function(f"() => window.srlCurveTimes.length > {seen}", timeout=60_000)
            times = page.evaluate("() => window.srlCurveTimes")
            gaps = sorted(b - a for a, b in itertools.pairwise(times))
            print(f"curve image updates seen by the browser: {len(times)}, median interval "
                  f"{gaps[len(gaps) // 2] / 1000:.2f} s, max {gaps[-1] / 1000:.2f} s")

            page.locator(".srl-panel").scroll_into_view_if_needed()
            page.evaluate("() => document.querySelector('.srl-panel').scrollIntoView({block: 'start'})")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
            print(f"screenshot: {SCREENSHOT}")
            check_episode_viewer(page)
            check_comparison(page)

            page.locator("button.srl-stop").click()
            page.wait_for_function(STOPPED, timeout=120_000)
        except Exception:
            page.screenshot(path=str(workdir / "failure.png"))
            print(f"failure screenshot: {workdir / 'failure.png'}; server log: {workdir / 'jupyterlab.log'}")
            raise
        finally:
            browser.close()
    assert (workdir / "run" / "metrics.jsonl").stat().st_size > 0
    assert (workdir / "run" / "result.json").exists()
