"""Re-export of :mod:`airflow_gpu_scheduler.authoring.declare` (the path README and existing DAGs use)."""

from airflow_gpu_scheduler.authoring.declare import (
    DECLARATION_KEY,
    DECLARATION_VERSION,
    GpuDeclaration,
    gpu_task,
    parse_declaration,
)
from airflow_gpu_scheduler.cycle.serialized_dag import (
    declarations_from_serialized_dag,
    decode_serialized,
    default_weights_from_serialized_dag,
)

__all__ = [
    "DECLARATION_KEY",
    "DECLARATION_VERSION",
    "GpuDeclaration",
    "declarations_from_serialized_dag",
    "decode_serialized",
    "default_weights_from_serialized_dag",
    "gpu_task",
    "parse_declaration",
]
