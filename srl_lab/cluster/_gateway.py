"""Clusters from a dask-gateway server, their workers set up through the server's options."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from srl_lab.cluster._workers import _import, worker_env

if TYPE_CHECKING:
    from dask_gateway import GatewayCluster


def gateway_options(options: Any, gpus: int = 0, roles: tuple[str, ...] = ()) -> list[str]:
    """Write SRL's worker needs into a gateway's cluster ``options``; returns the ones it could not.

    What a dask-gateway cluster can be asked for is the server's choice (``c.Backend.cluster_options``).
    This sets ``environment`` (a mapping option) to ``worker_env`` merged over its current value,
    and ``worker_threads`` to 1 (or, where only ``worker_cores`` is exposed, that to 1, since the
    gateway starts ``worker_cores`` threads by default). It returns ``"environment"`` and/or
    ``"worker_threads"`` when the server exposes neither; the server must then set them itself:
    ``c.ClusterConfig.environment`` (``worker_env()``) and ``c.ClusterConfig.worker_threads = 1``.
    """
    missing = []
    if "environment" in options:
        options["environment"] = {**dict(options["environment"] or {}), **worker_env(gpus, roles)}
    else:
        missing.append("environment")
    if "worker_threads" in options:
        options["worker_threads"] = 1
    elif "worker_cores" in options:
        options["worker_cores"] = 1
    else:
        missing.append("worker_threads")
    return missing


def gateway(n_workers: int = 0, *, gpus: int = 0, roles: tuple[str, ...] = (), address: str | None = None,
            proxy_address: str | None = None, auth: Any = None, **options: Any) -> GatewayCluster:
    """A new cluster from a dask-gateway server, its workers set up through the server's options.

    ``gateway_options`` writes one thread, the resources and the preload into the options the
    server exposes; ``options`` (e.g. ``worker_memory=8``, ``image=...``) are applied after and win.
    Where the server exposes neither ``environment`` nor a thread/core option this warns: the
    server's ``ClusterConfig`` must then provide them (see ``gateway_options``). A GPU itself is
    requested however the server offers it (an option, a profile); ``gpus`` only declares it to Dask.
    ``address``/``proxy_address``/``auth`` default to the ``gateway.*`` Dask config, as in
    ``dask_gateway.Gateway``.
    """
    dask_gateway = _import("dask_gateway", "dask-gateway", "gateway")
    # Not closed explicitly: Gateway.close() is not idempotent and Gateway.__del__ closes it (once)
    # when this function lets go of it; the cluster holds a Gateway client of its own.
    cluster_options = dask_gateway.Gateway(address=address, proxy_address=proxy_address,
                                           auth=auth).cluster_options()
    missing = gateway_options(cluster_options, gpus, roles)
    for key, value in options.items():
        try:
            cluster_options[key] = value
        except KeyError:
            raise ValueError(f"gateway(): the server offers no cluster option {key!r}; "
                             f"it offers {sorted(cluster_options)}") from None
    if missing:
        warnings.warn(f"the dask-gateway server exposes no {' or '.join(missing)} option: its "
                      "workers offer an srl_slot with one thread only if the server's ClusterConfig "
                      "sets them (environment=srl_lab.cluster.worker_env(), worker_threads=1)",
                      stacklevel=2)
    cluster = dask_gateway.GatewayCluster(address=address, proxy_address=proxy_address, auth=auth,
                                          cluster_options=cluster_options)
    if n_workers:
        cluster.scale(n_workers)
    return cluster
