"""Where the shipped DAGs are: the platform DAG (``gpu_scheduler.py``) and the example GPU workloads.

They live in the repository's top-level ``dags/`` and are installed as the package
``airflow_gpu_scheduler.example_dags`` (a ``package-dir`` mapping in ``pyproject.toml``), so the
same files serve a source checkout, an editable install and a wheel.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def example_dags_folder() -> Path:
    """The folder holding ``gpu_scheduler.py`` and ``gpu_workloads.py`` (found without importing them)."""
    spec = importlib.util.find_spec("airflow_gpu_scheduler.example_dags")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("airflow_gpu_scheduler.example_dags is not installed; reinstall airflow-gpu-scheduler")
    return Path(next(iter(spec.submodule_search_locations)))
