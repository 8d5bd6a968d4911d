"""Imported by every embedded Dask worker process when it starts (``distributed`` preload).

A replacement SRL worker then finds torch and the runtime already imported and starts in seconds.
"""
from srl_lab.system import actor_worker, policy_worker, trainer_worker  # noqa: F401
