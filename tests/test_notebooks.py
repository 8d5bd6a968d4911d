"""Notebooks and their recipes: every pair in sync, every notebook executed headless in short mode.

Short mode (``SRL_LAB_SHORT=1``) shrinks sizes and budgets; ``SRL_LAB_HEADLESS=1`` tells the showcase
to wait for its budget instead of leaving the run to its panel. The notebooks join the session's
multi-process Dask cluster through ``SRL_LAB_SCHEDULER`` (the path of any remote scheduler), so each
pays for a kernel and a run, not for a new cluster.
"""
from __future__ import annotations

import ast
import base64
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import matplotlib.image
import nbformat
import pytest
from nbclient import NotebookClient

from srl_lab.cli import load_recipe

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def recipe_of(notebook: Path) -> Path:
    return ROOT / "recipes" / f"{notebook.stem}.py"


def cells(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


def test_the_six_notebooks_exist():
    assert [n.stem for n in NOTEBOOKS] == ["01_quickstart", "02_hide_and_seek", "03_scaling",
                                           "04_custom_env_and_algorithm", "05_cluster", "06_multi_agent"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_and_recipe_are_in_sync(notebook):
    recipe = recipe_of(notebook)
    assert recipe.exists(), f"{notebook.name} has no recipe; create it with: jupytext --sync {notebook}"
    from_recipe = jupytext.read(recipe, fmt="py:percent")
    from_notebook = nbformat.read(notebook, as_version=4)
    assert cells(from_notebook) == cells(from_recipe), \
        f"{notebook.name} and {recipe.name} differ; the recipe is the source: jupytext --sync {recipe}"
    assert from_notebook.metadata["jupytext"]["formats"] == "notebooks///ipynb,recipes///py:percent"
    assert all(not c.get("outputs") for c in from_notebook.cells if c.cell_type == "code"), \
        f"{notebook.name} is committed with outputs"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_recipe_runs_main_behind_a_main_guard(notebook):
    source = recipe_of(notebook).read_text()
    tree = ast.parse(source)
    guards = [node for node in tree.body
              if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"]
    assert guards and ast.unparse(guards[-1].body[0]) == "main()", "main() must sit behind the __main__ guard"
    assert not any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) for node in tree.body), \
        "a recipe calls nothing at top level: Dask's spawned workers re-import it"
    assert "recipe_args(argv" in source, "main() parses --scheduler --actors --minutes --run-dir"
    namespace = load_recipe(str(recipe_of(notebook)))  # definitions only: nothing launches
    assert callable(namespace["main"])


def test_binder_installs_the_package_and_its_dependencies():
    requirements = (ROOT / "binder" / "requirements.txt").read_text()
    listed = {re.split(r"[<>=\[ ]", line)[0].lower() for line in requirements.splitlines()
              if line and not line.startswith(("#", "-"))}
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {re.split(r"[<>=\[ ]", d)[0].lower()
              for d in project["dependencies"] + project["optional-dependencies"]["lab"]}
    assert needed <= listed, f"binder/requirements.txt lacks {sorted(needed - listed)}"
    post_build = ROOT / "binder" / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "pip install" in post_build.read_text() and " -e ." in post_build.read_text()


# ---------------------------------------------------------------------------- headless execution
def execute(notebook: Path, tmp_path: Path, monkeypatch, scheduler: str, timeout: int = 300
            ) -> tuple[nbformat.NotebookNode, Path]:
    """Run ``notebook`` in a fresh kernel (cwd ``tmp_path``), short and headless; return it, its run dir."""
    run_dir = tmp_path / "run"
    monkeypatch.setenv("SRL_LAB_SHORT", "1")
    monkeypatch.setenv("SRL_LAB_HEADLESS", "1")
    monkeypatch.setenv("SRL_LAB_SCHEDULER", scheduler)
    monkeypatch.setenv("SRL_LAB_RUN_DIR", str(run_dir))
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb, run_dir


def image_widget_pngs(nb: nbformat.NotebookNode) -> dict[str, bytes]:
    """The PNG each ``ipywidgets.Image`` held when the notebook finished, by its CSS class."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    out = {}
    for model_id, model in state.items():
        if model["model_name"] != "ImageModel":
            continue
        for buffer in model.get("buffers", []):
            if buffer["path"] == ["value"]:
                classes = model["state"].get("_dom_classes", [])
                out[classes[0] if classes else model_id] = base64.b64decode(buffer["data"])
    return out


def assert_png(data: bytes, min_size: int = 5_000) -> None:
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > min_size
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
    assert pixels.shape[0] > 100 and pixels.shape[1] > 300


def assert_run_dir_has_metrics(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    assert {r["role"] for r in records} >= {"trainer", "actor"}
    assert (run_dir / "result.json").exists()
    assert (run_dir / "curve.png").read_bytes().startswith(PNG_SIGNATURE)
    return records


def outputs(nb: nbformat.NotebookNode, mime: str) -> list[str]:
    return [o["data"][mime] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if mime in o.get("data", {})]


@pytest.fixture
def scheduler(dask_client) -> str:
    return dask_client.scheduler.address


@pytest.mark.slow
def test_01_quickstart(scheduler, tmp_path, monkeypatch):
    nb, run_dir = execute(NOTEBOOKS[0], tmp_path, monkeypatch, scheduler)
    records = assert_run_dir_has_metrics(run_dir)
    assert any(r["role"] == "trainer" and r["version"] > 0 for r in records)
    images = image_widget_pngs(nb)
    assert_png(images["srl-curves"])
    assert_png(images["srl-throughput"])
    reopened = outputs(nb, "image/png")  # open_run(...) displayed as its curves
    assert reopened and base64.b64decode(reopened[-1]).startswith(PNG_SIGNATURE)


@pytest.mark.slow
def test_02_hide_and_seek(scheduler, tmp_path, monkeypatch):
    nb, run_dir = execute(NOTEBOOKS[1], tmp_path, monkeypatch, scheduler)
    records = assert_run_dir_has_metrics(run_dir)
    episodes = [e for r in records if r["role"] == "trainer" for e in r.get("episodes", [])]
    assert episodes
    assert {"hider_return", "seeker_return", "hidden_fraction", "max_box_move_prep"} <= set(episodes[0])
    images = image_widget_pngs(nb)
    assert_png(images["srl-curves"], min_size=20_000)  # team returns, hidden fraction, box/ramp, losses
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    timing = ast.literal_eval(printed.split("panel refresh intervals (s):", 1)[1].strip())
    print("02_hide_and_seek panel refresh intervals (s):", timing)
    assert 0.2 <= timing["ticks"]["median"] <= 0.5, timing  # the pump ticks at 2-5 Hz


@pytest.mark.slow
def test_03_scaling(scheduler, tmp_path, monkeypatch):
    nb, run_dir = execute(NOTEBOOKS[2], tmp_path, monkeypatch, scheduler)
    assert_run_dir_has_metrics(run_dir)
    scaling = json.loads((run_dir / "scaling.json").read_text())
    assert [p["actors"] for p in scaling["points"]] == [1, 2]
    assert all(p["env_steps_per_s"] > 0 for p in scaling["points"])
    assert_png((run_dir / "scaling.png").read_bytes())
    assert outputs(nb, "image/png"), "the scaling plot is displayed"


@pytest.mark.slow
def test_04_custom_env_and_algorithm(scheduler, tmp_path, monkeypatch):
    nb, run_dir = execute(NOTEBOOKS[3], tmp_path, monkeypatch, scheduler)
    records = assert_run_dir_has_metrics(run_dir)
    trained = [r["train"] for r in records if r["role"] == "trainer" and r.get("train")]
    assert trained and "mean_rho" in trained[-1], "the algorithm defined in the notebook trained"
    assert_png(image_widget_pngs(nb)["srl-curves"])


@pytest.mark.slow
def test_05_cluster_against_a_scheduler_address(scheduler, tmp_path, monkeypatch):
    nb, run_dir = execute(NOTEBOOKS[4], tmp_path, monkeypatch, scheduler)
    assert_run_dir_has_metrics(run_dir)
    address = re.escape(scheduler)
    assert any(re.search(address, text) for text in outputs(nb, "text/plain")) or \
        any(re.search(address, o.get("text", "")) for c in nb.cells for o in c.get("outputs", [])), \
        "the notebook joined the given scheduler"
    assert_png(image_widget_pngs(nb)["srl-curves"])
    assert os.path.exists(run_dir / "config.json")


@pytest.mark.slow
def test_06_multi_agent(scheduler, tmp_path, monkeypatch):
    """The PettingZoo env and the two policies defined in the notebook train, each closing its own books."""
    nb, run_dir = execute(ROOT / "notebooks" / "06_multi_agent.ipynb", tmp_path, monkeypatch, scheduler)
    records = assert_run_dir_has_metrics(run_dir)
    published = {r["policy"] for r in records if r["role"] == "trainer" and r["version"] > 0}
    assert published == {"scout", "guard"}, "each policy's own trainer published weights"
    result = json.loads((run_dir / "result.json").read_text())
    assert set(result["policies"]) == {"scout", "guard"}
    for policy, books in result["policies"].items():
        assert books["fragments_produced"] > 0 and books["version"] > 0, (policy, books)
        closed = books["fragments_consumed"] + books["dropped_stale"]
        assert books["fragments_produced"] == closed, (policy, books)
    assert result["rejected"] == 0, "every fragment fitted the trainer of the policy it was sent to"
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    for policy in ("scout", "guard"):  # report(): each policy's books and returns
        assert re.search(rf"{policy}: version \d+, fragments \d+ produced", printed), printed[-2000:]
    assert_png(image_widget_pngs(nb)["srl-curves"])


@pytest.mark.slow
def test_srl_lab_run_passes_the_flags_to_the_recipe(dask_client, tmp_path):
    """``srl-lab run recipes/X.py --flags``: the recipe's main() trains with them, with a progress bar."""
    recipe = ROOT / "recipes" / "01_quickstart.py"
    command = [str(Path(sys.executable).parent / "srl-lab"), "run", str(recipe),
               "--scheduler", dask_client.scheduler.address, "--actors", "1", "--minutes", "0.1",
               "--run-dir", str(tmp_path / "run")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRL_LAB_")}
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cartpole:" in result.stderr and "step/s" in result.stderr  # the tqdm bar
    assert str(tmp_path / "run") in result.stdout
    records = assert_run_dir_has_metrics(tmp_path / "run")
    assert {r["srl_worker"] for r in records if r["role"] == "actor"} == {"actor-0"}  # --actors 1
