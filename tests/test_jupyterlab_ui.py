"""The showcase notebook in a real JupyterLab, driven through Debian's chromium with Playwright.

Open 02_hide_and_seek, run all cells, wait until the curve image has changed twice, move the actor
control from 1 to 2 with the keyboard, and wait for the worker table to show 2 running actor workers
(the embedded LocalCluster grows by one process for it). Then the episode viewer: its frame changes
while it plays, stays put when paused, follows the step scrubber, and a new episode shows a newer
policy version; the comparison tab draws the run. Screenshots of the panel, the viewer and the
comparison are saved under ``runs/screenshots/``. Skipped, saying why, only when no chromium can be
found.
"""
from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "runs" / "screenshots"
SCREENSHOT = SCREENSHOTS / "02_hide_and_seek_panel.png"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUNNING_ACTORS = "table.srl-workers tr[data-role='actor'][data-state='running']"
TRAINED = """() => {
    const m = document.querySelector('.srl-panel').innerText.match(/policy version: (\\d+)/);
    return m !== null && Number(m[1]) >= 3;
}"""
STOPPED = "() => document.querySelector('.srl-panel').innerText.includes('stopped after')"
FRAME_SRC = "() => document.querySelector('img.srl-viewer-frame').getAttribute('src')"
SHOWN_VERSION = """() => {
    const b = document.querySelector('.srl-viewer-version');
    return b === null ? -1 : Number(b.innerText);
}"""


def check_episode_viewer(page) -> None:
    """Play, pause, scrub, then a new episode of a newer policy version; screenshot the viewer."""
    page.wait_for_function(f"() => ({SHOWN_VERSION})() >= 0", timeout=240_000)  # the first episode is in
    page.evaluate("""() => {
        window.srlFrames = 0;
        new MutationObserver(() => window.srlFrames++)
            .observe(document.querySelector('img.srl-viewer-frame'), {attributeFilter: ['src']});
    }""")
    page.wait_for_function("() => window.srlFrames >= 5", timeout=60_000)  # it plays by itself
    page.locator(".srl-viewer-play button:has(i.fa-pause)").click()
    time.sleep(1.0)  # a frame already on its way may still land
    paused = page.evaluate(FRAME_SRC)
    time.sleep(2.0)
    assert page.evaluate(FRAME_SRC) == paused, "the frame kept changing after pause"
    handle = page.locator(".srl-viewer-step .noUi-handle")
    before = float(handle.get_attribute("aria-valuenow"))
    handle.focus()
    page.keyboard.press("PageUp" if before < 40 else "PageDown")  # the scrubber moves the frame
    page.wait_for_function(f"() => ({FRAME_SRC})() !== {json.dumps(paused)}", timeout=30_000)
    assert float(handle.get_attribute("aria-valuenow")) != before
    shown = page.evaluate(SHOWN_VERSION)
    page.locator("button.srl-viewer-new").click()
    page.wait_for_function(f"() => ({SHOWN_VERSION})() > {shown}", timeout=240_000)
    page.locator(".srl-viewer").scroll_into_view_if_needed()
    page.locator(".srl-viewer").screenshot(path=str(SCREENSHOTS / "02_hide_and_seek_viewer.png"))


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
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        reason = "Debian's chromium is not installed (make test installs it: apt-get install -y chromium)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab on localhost with a token, serving a copy of notebooks/, with isolated settings."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    settings = tmp_path / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no news or update pop-ups over the panel
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                           "checkForUpdates": False}))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, SRL_LAB_SHORT="1", SRL_LAB_RUN_DIR=str(tmp_path / "run"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / ".runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"))
    for name in ("SRL_LAB_HEADLESS", "SRL_LAB_SCHEDULER"):  # the panel, not this cell, ends the run
        env.pop(name, None)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.allow_root=True", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={tmp_path}", f"--LabApp.user_settings_dir={tmp_path / '.settings'}",
               f"--LabApp.workspaces_dir={tmp_path / '.ws'}"]
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "jupyterlab.log", "w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, (tmp_path / "jupyterlab.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
        yield url, token, tmp_path
    finally:
        server.terminate()  # shuts the kernels down, which closes their embedded clusters
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.mark.slow
def test_showcase_notebook_in_jupyterlab(chromium, jupyterlab):
    from playwright.sync_api import sync_playwright

    url, token, workdir = jupyterlab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        try:
            page.goto(f"{url}/lab/tree/notebooks/02_hide_and_seek.ipynb?token={token}")
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
            page.wait_for_function("() => document.querySelector('.jp-StatusBar-Widget') !== null && "
                                   "document.body.innerText.includes('| Idle')", timeout=90_000)
            kernel_dialog = page.locator(".jp-Dialog .jp-mod-accept")
            if kernel_dialog.count():  # JupyterLab asks for a kernel when the session is still starting
                kernel_dialog.click()
            page.locator("li.lm-MenuBar-item", has_text="Run").click()
            page.get_by_text("Run All Cells", exact=True).click()

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
