"""Shared fixtures: one real multi-process Dask cluster for the runtime tests of a session."""
from __future__ import annotations

import pytest

from srl_lab import cluster as clusters


@pytest.fixture(scope="session")
def dask_client():
    from distributed import Client

    local = clusters.local(n_workers=4, dashboard_address=None)
    client = Client(local)
    yield client
    client.close()
    local.close()
