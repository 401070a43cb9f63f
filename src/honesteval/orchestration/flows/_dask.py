"""Trials on Dask (optional extra ``honesteval[dask]``, prefect-dask)."""

from __future__ import annotations

from typing import Any

from honesteval.errors import ConfigError


def dask_task_runner(max_concurrency: int, address: str | None = None) -> Any:
    """A DaskTaskRunner on an existing cluster (``address``) or a LocalCluster.

    The LocalCluster has one single-threaded worker process per core (at most
    ``max_concurrency``): trials that are CPU-bound Python run in parallel, which threads
    cannot do. Workers rebuild the adapter from the project path, so the project folder must
    be at the same path on every worker (a shared file system), as must the Python packages.
    """
    try:
        from prefect_dask.task_runners import DaskTaskRunner
    except ImportError:
        raise ConfigError(
            "--task-runner dask needs the optional extra: pip install 'honesteval[dask]'"
        ) from None
    if address:
        return DaskTaskRunner(address=address)
    import os

    workers = max(1, min(max_concurrency, os.cpu_count() or 1))
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        }
    )
