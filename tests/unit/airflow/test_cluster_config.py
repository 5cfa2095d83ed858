"""Cluster configuration: one Variable or one file, validated with errors that say where and what."""

from __future__ import annotations

import json

import pytest

from airflow_gpu_scheduler.cluster_config import (
    ClusterConfigError,
    cluster_from_file,
    cluster_from_json,
    cluster_from_variable,
)


def test_file_is_read_and_validated(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"gpu_types": {"h100": {"count": 8}, "a100": {"count": 4, "speed": 0.6}}}))
    cluster = cluster_from_file(path)
    assert cluster.names == ("h100", "a100") and cluster.gpu_type("a100").speed == 0.6


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not valid JSON"),
        ('{"gpus": 4}', "gpu_types"),
        ('{"gpu_types": {"h100": {"count": 0}}}', "GPU type 'h100': field 'count'"),
        ('{"gpu_types": {"h100": {"count": 2, "sped": 1}}}', "field 'sped': unknown field"),
        ('{"gpu_types": {"h 100": {"count": 2}}}', "names an Airflow pool"),
    ],
)
def test_invalid_configs_name_the_source_and_the_problem(text, words):
    with pytest.raises(ClusterConfigError) as raised:
        cluster_from_json(text, "cluster file 'x.json'")
    assert str(raised.value).startswith("cluster file 'x.json'") and words in str(raised.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ClusterConfigError, match="missing.json.*cannot be read"):
        cluster_from_file(tmp_path / "missing.json")


def test_variable(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER", '{"gpu_types": {"l4": {"count": 2}}}')
    assert cluster_from_variable().names == ("l4",)
    with pytest.raises(ClusterConfigError, match="Variable 'no_such_cluster' is not set"):
        cluster_from_variable("no_such_cluster")
