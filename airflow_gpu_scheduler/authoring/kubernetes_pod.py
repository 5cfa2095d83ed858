"""GPU types on the KubernetesExecutor: the pod override that puts a task on its GPU type's nodes.

The KubernetesExecutor starts one pod per task instance and merges the task's
``executor_config={"pod_override": V1Pod(...)}`` into it (the container to change must be
called ``base``). For GPU work the override does two things:

* a **node selector** on the label that names the GPU model of a node (GPU Feature
  Discovery sets ``nvidia.com/gpu.product``; any label the platform team keeps works),
  so the pod only lands on that GPU type;
* a **resource request** of ``nvidia.com/gpu: <gpus>`` on the ``base`` container, so the
  kubelet hands the pod that many GPUs (extended resources: request = limit), plus a
  toleration of the usual ``nvidia.com/gpu`` taint on GPU nodes.

Usage, for a task pinned to one GPU type::

    BashOperator(task_id="train", bash_command="train.sh",
                 **gpu_task("training", gpus=4, gpu_types=["h100"],
                            executor_config={"pod_override": gpu_pod_override("h100", gpus=4)}))

Limit, said plainly: ``executor_config`` is fixed when the DAG is written, and on the task
instance it is a pickled column that the planner does not rewrite. So on Kubernetes the
GPU type reaches the pod for tasks declared for one GPU type; for a task that may run on
several types the pool and weight still follow the plan, but the pod is not re-targeted to
the planned type (CeleryExecutor queues are, see :func:`~airflow_gpu_scheduler.core.levers.executor_queue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes.client import models as k8s

#: Node label holding the GPU model, as set by NVIDIA GPU Feature Discovery.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: The extended resource the NVIDIA device plugin advertises.
GPU_RESOURCE = "nvidia.com/gpu"
#: The KubernetesExecutor runs the task in the container of this name.
BASE_CONTAINER = "base"


def gpu_pod_override(
    gpu_type: str,
    gpus: int,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerate_gpu_taint: bool = True,
) -> k8s.V1Pod:
    """A pod override that runs the task on ``gpus`` GPUs of ``gpu_type``.

    :param gpu_type: GPU type name from the cluster config; by default the node selector is
        ``{"nvidia.com/gpu.product": gpu_type}``.
    :param gpus: GPUs to request (the task's ``gpus`` declaration).
    :param node_selector: the node labels of this GPU type, if the cluster labels nodes
        differently (e.g. ``{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}``).
    :param tolerate_gpu_taint: tolerate the ``nvidia.com/gpu`` ``NoSchedule`` taint of GPU nodes.
    :return: a ``kubernetes.client.models.V1Pod`` for ``executor_config["pod_override"]``.
    """
    try:
        from kubernetes.client import models as k8s
    except ImportError:
        raise ImportError(
            "gpu_pod_override needs the kubernetes client: pip install "
            "'airflow-gpu-scheduler[kubernetes]' (or apache-airflow-providers-cncf-kubernetes)"
        ) from None
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise ValueError(f"gpus must be a positive integer, got {gpus!r}")
    if not isinstance(gpu_type, str) or not gpu_type:
        raise ValueError(f"gpu_type must be a non-empty string, got {gpu_type!r}")
    amount = {GPU_RESOURCE: str(gpus)}
    tolerations = (
        [k8s.V1Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")] if tolerate_gpu_taint else None
    )
    return k8s.V1Pod(
        spec=k8s.V1PodSpec(
            node_selector=dict(node_selector) if node_selector else {GPU_PRODUCT_LABEL: gpu_type},
            tolerations=tolerations,
            containers=[
                k8s.V1Container(
                    name=BASE_CONTAINER,
                    resources=k8s.V1ResourceRequirements(requests=amount, limits=dict(amount)),
                )
            ],
        )
    )
