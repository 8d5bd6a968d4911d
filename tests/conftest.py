"""Shared fixtures: one real multi-process Dask cluster for the runtime tests of a session.

Four SRL slots for the largest topology under test plus an idle spare, so a worker killed by a fault
test is replaced at once while the nanny restarts its process.
"""
from __future__ import annotations

import pytest
from runs import local_client


@pytest.fixture(scope="session")
def dask_client():
    yield from local_client()
