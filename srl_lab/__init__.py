"""srl_lab: SRL's actor / policy / trainer dataflow on Dask, built for notebooks.

    import srl_lab
    run = srl_lab.launch(srl_lab.ExperimentConfig())   # embedded LocalCluster when no client is given
    run.wait(target_return=475); run.scale(actors=3); run.stop()
"""
from srl_lab.config import (ActorConfig, ConfigError, EnvConfig, ExperimentConfig, InferenceConfig, PolicyConfig,
                            PolicySpec, PoolConfig, PPOConfig, TrainerConfig)
from srl_lab.system.controller import Run, launch

__version__ = "0.1.0"


def open_run(run_dir: str):
    """Reopen a finished or interrupted run's directory to re-plot it (e.g. after a kernel restart)."""
    from srl_lab.notebook.history import open_run as _open_run

    return _open_run(run_dir)


def compare(runs, x: str = "env_steps", labels=None, window=None):
    """Overlay several runs' learning curves (directories, live runs) and list their config differences."""
    # The module is not called srl_lab/compare.py: importing it would replace this function with it.
    from srl_lab.comparison import compare as _compare

    return _compare(runs, x=x, labels=labels, window=window)


__all__ = ["ActorConfig", "ConfigError", "EnvConfig", "ExperimentConfig", "InferenceConfig", "PolicyConfig",
           "PolicySpec", "PoolConfig", "PPOConfig", "Run", "TrainerConfig", "compare", "launch", "open_run"]
