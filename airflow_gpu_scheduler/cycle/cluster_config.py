"""Where the cluster comes from: one Airflow Variable, or a JSON file named in the operator.

The Variable ``gpu_scheduler_cluster`` (or the file) holds::

    {"gpu_types": {"h100": {"count": 32, "speed": 1.0}, "a100": {"count": 16, "speed": 0.6}}}

``count`` is the number of GPUs of that type, ``speed`` how fast it runs work relative to
speed 1.0 (a job estimated at 1 h runs 1 h / speed), and the optional ``queue`` the executor
queue its workers serve (default ``gpu-<type>``; e.g. ``airflow celery worker -q gpu-h100``).
Each GPU type becomes the Airflow pools ``gpu_<type>`` and ``gpu_<type>_streaming``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_gpu_scheduler.core.workload import Cluster, WorkloadError

#: The Airflow Variable read when the operator is given no cluster file.
CLUSTER_VARIABLE = "gpu_scheduler_cluster"
EXAMPLE = '{"gpu_types": {"h100": {"count": 8, "speed": 1.0}}}'


class ClusterConfigError(ValueError):
    """The cluster configuration is missing or invalid; the message says where and what."""


def cluster_from_json(text: str, source: str) -> Cluster:
    """Parse and validate a cluster JSON document; ``source`` names it in errors."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise ClusterConfigError(
            f"{source}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
            f"expected e.g. {EXAMPLE}"
        ) from None
    try:
        return Cluster.from_dict(data)
    except WorkloadError as error:
        raise ClusterConfigError(f"{source}: {error}") from None


def cluster_from_file(path: str | Path) -> Cluster:
    """Read the cluster from a JSON file."""
    source = f"cluster file {str(path)!r}"
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ClusterConfigError(f"{source}: cannot be read ({error.strerror})") from None
    return cluster_from_json(text, source)


def cluster_from_variable(key: str = CLUSTER_VARIABLE) -> Cluster:
    """Read the cluster from an Airflow Variable (through the Task SDK, so it works inside tasks)."""
    from airflow.sdk import Variable

    source = f"Airflow Variable {key!r}"
    try:
        text = Variable.get(key)
    except KeyError:
        raise ClusterConfigError(f"{source} is not set; set it to the cluster JSON, e.g. {EXAMPLE}") from None
    except Exception as error:
        # The Task SDK raises its own error type for a missing variable.
        if "not found" in str(error).lower() or type(error).__name__ in (
            "AirflowNotFoundException",
            "AirflowRuntimeError",
        ):
            raise ClusterConfigError(f"{source} is not set; set it to the cluster JSON, e.g. {EXAMPLE}") from None
        raise
    return cluster_from_json(text, source)
