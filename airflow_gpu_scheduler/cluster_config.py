"""Re-export of :mod:`airflow_gpu_scheduler.cycle.cluster_config`."""

from airflow_gpu_scheduler.cycle.cluster_config import (
    CLUSTER_VARIABLE,
    EXAMPLE,
    ClusterConfigError,
    cluster_from_file,
    cluster_from_json,
    cluster_from_variable,
)

__all__ = [
    "CLUSTER_VARIABLE",
    "ClusterConfigError",
    "EXAMPLE",
    "cluster_from_file",
    "cluster_from_json",
    "cluster_from_variable",
]
