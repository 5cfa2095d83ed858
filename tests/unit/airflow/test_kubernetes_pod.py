"""The pod override that carries a GPU type to the KubernetesExecutor (the object, not a cluster)."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from airflow_gpu_scheduler.declare import DECLARATION_KEY, gpu_task
from airflow_gpu_scheduler.kubernetes_pod import gpu_pod_override


def test_gpu_type_becomes_node_selector_and_gpu_request_on_the_base_container():
    pod = gpu_pod_override("h100", gpus=4)
    assert ApiClient().sanitize_for_serialization(pod) == {
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "h100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "base", "resources": {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}
            ],
        }
    }


def test_custom_node_labels_and_no_toleration():
    pod = gpu_pod_override(
        "h100", 1, node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, tolerate_gpu_taint=False
    )
    assert pod.spec.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert pod.spec.tolerations is None


def test_it_rides_in_executor_config_beside_the_declaration():
    kwargs = gpu_task(
        "training", gpus=2, gpu_types=["a100"], executor_config={"pod_override": gpu_pod_override("a100", gpus=2)}
    )
    assert set(kwargs["executor_config"]) == {"pod_override", DECLARATION_KEY}
    assert kwargs["executor_config"]["pod_override"].spec.containers[0].resources.limits == {"nvidia.com/gpu": "2"}


@pytest.mark.parametrize("gpus", [0, -1, 1.5, True])
def test_bad_gpu_count_is_named(gpus):
    with pytest.raises(ValueError, match="gpus"):
        gpu_pod_override("h100", gpus)
