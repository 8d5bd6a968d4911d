"""A JupyterLab server and a chromium page on a notebook, for the UI test and the notebook benchmark.

``jupyterlab(workdir, env)`` serves a copy of ``notebooks/`` from ``workdir`` on localhost with a
token and isolated settings (no news or update pop-ups over the panel); ``run_all(page, url, token,
name)`` opens a notebook in it and runs every cell. ``chromium_path()`` finds Debian's chromium.
"""
from __future__ import annotations

import contextlib
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
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# The episode viewer, read from the page: the policy version of the episode on screen (-1 before
# the first), a count of the frames shown from now on (``window.srlFrames``, the time of the last in
# ``window.srlLastFrame``; ``FRAMES_SHOWN`` reads the count), and whether frames have come and then stopped for 3 s.
SHOWN_VERSION = """() => {
    const b = document.querySelector('.srl-viewer-version');
    return b === null ? -1 : Number(b.innerText);
}"""
COUNT_FRAMES = """() => {
    window.srlFrames = 0;
    new MutationObserver(() => { window.srlFrames++; window.srlLastFrame = performance.now(); })
        .observe(document.querySelector('img.srl-viewer-frame'), {attributeFilter: ['src']});
}"""
FRAMES_SHOWN = "() => window.srlFrames"
FRAMES_STOPPED = "() => window.srlFrames > 0 && performance.now() - window.srlLastFrame > 3000"
# Variables that would make the notebook end its own run or use another cluster than its own.
NOTEBOOK_OVERRIDES = ("SRL_LAB_HEADLESS", "SRL_LAB_SCHEDULER", "SRL_LAB_SHORT")


def chromium_path() -> str | None:
    """Debian's chromium, or None when it is not installed (``apt-get install -y chromium``)."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    return path if os.path.exists(path) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(workdir: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """``(url, token)`` of JupyterLab serving ``workdir`` (with a copy of ``notebooks/``); the
    kernels see ``env`` on top of this process's environment less ``NOTEBOOK_OVERRIDES``. The
    server's output goes to ``workdir/jupyterlab.log``; leaving the block shuts it down, which closes
    the kernels and their embedded clusters."""
    shutil.copytree(ROOT / "notebooks", workdir / "notebooks")
    settings = workdir / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                           "checkForUpdates": False}))
    port, token = free_port(), secrets.token_hex(16)
    environment = {k: v for k, v in os.environ.items() if k not in NOTEBOOK_OVERRIDES}
    environment.update(JUPYTER_RUNTIME_DIR=str(workdir / ".runtime"), JUPYTER_CONFIG_DIR=str(workdir / ".jupyter"),
                       **env)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.allow_root=True", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={workdir}", f"--LabApp.user_settings_dir={workdir / '.settings'}",
               f"--LabApp.workspaces_dir={workdir / '.ws'}"]
    url = f"http://127.0.0.1:{port}"
    with open(workdir / "jupyterlab.log", "w") as log:
        server = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                raise RuntimeError((workdir / "jupyterlab.log").read_text()[-3000:])
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("JupyterLab did not start within 90 s") from None
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def run_all(page, url: str, token: str, notebook: str) -> None:
    """Open ``notebooks/<notebook>`` in the page and run all its cells once its kernel is idle."""
    page.goto(f"{url}/lab/tree/notebooks/{notebook}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function("() => document.querySelector('.jp-StatusBar-Widget') !== null && "
                           "document.body.innerText.includes('| Idle')", timeout=90_000)
    kernel_dialog = page.locator(".jp-Dialog .jp-mod-accept")
    if kernel_dialog.count():  # JupyterLab asks for a kernel when the session is still starting
        kernel_dialog.click()
    page.locator("li.lm-MenuBar-item", has_text="Run").click()
    page.get_by_text("Run All Cells", exact=True).click()
