"""The notebook workbench: ``run.panel()``, ``attach(name)`` from another kernel, ``open_run(run_dir)``."""
from srl_lab.notebook.attached import AttachedRun, attach
from srl_lab.notebook.history import RunHistory, open_run
from srl_lab.notebook.panel import Panel

__all__ = ["AttachedRun", "Panel", "RunHistory", "attach", "open_run"]
