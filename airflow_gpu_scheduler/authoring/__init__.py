"""What DAG authors import: declare a task as GPU work, and (KubernetesExecutor) give its pod the GPUs.

    from airflow_gpu_scheduler.authoring import gpu_task, gpu_pod_override

``airflow_gpu_scheduler.declare`` and ``airflow_gpu_scheduler.kubernetes_pod`` still work (re-exports).
"""

from __future__ import annotations

from airflow_gpu_scheduler.authoring.declare import GpuDeclaration, gpu_task, parse_declaration
from airflow_gpu_scheduler.authoring.kubernetes_pod import gpu_pod_override

__all__ = ["GpuDeclaration", "gpu_pod_override", "gpu_task", "parse_declaration"]
