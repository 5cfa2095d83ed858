"""The declaration API: validation, and that the declaration reaches the serialized DAG as plain JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task
from airflow.serialization.serialized_objects import DagSerialization

from airflow_gpu_scheduler.core.workload import WorkloadError
from airflow_gpu_scheduler.declare import declarations_from_serialized_dag, gpu_task, parse_declaration


def test_gpu_task_holds_the_task_in_the_intake_pool_with_one_slot_per_gpu():
    kwargs = gpu_task(
        "training",
        gpus=8,
        gpu_types=["h100"],
        estimate=timedelta(hours=2),
        priority=5,
        deadline=timedelta(hours=6),
        executor_config={"pod_override": None},
    )
    assert kwargs["pool"] == "gpu_intake" and kwargs["pool_slots"] == 8
    assert kwargs["executor_config"]["pod_override"] is None
    assert kwargs["executor_config"]["gpu_scheduler"] == {
        "version": 1,
        "kind": "training",
        "gpus": 8,
        "gpu_types": ["h100"],
        "priority": 5.0,
        "estimate_s": 7200.0,
        "deadline_s": 21600.0,
    }


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"kind": "trainnig"}, "kind", "expected one of training"),
        ({"kind": "training", "gpus": 0}, "gpus", "positive integer"),
        ({"kind": "training", "gpus": 2.5}, "gpus", "positive integer"),
        ({"kind": "training", "gpu_types": "h100"}, "gpu_types", "list of GPU type names"),
        ({"kind": "training", "estimate": -5}, "estimate_s", "positive number"),
        ({"kind": "training", "priority": 0}, "priority", "> 0"),
        ({"kind": "quantization", "executor_config": {"gpu_scheduler": {}}}, "executor_config", "already holds"),
    ],
)
def test_bad_declarations_name_the_field(kwargs, field, words):
    with pytest.raises(WorkloadError) as raised:
        gpu_task(**kwargs)
    assert raised.value.field == field and words in str(raised.value)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("not an object", "gpu_scheduler"),
        ({"kind": "training", "gpu": 2}, "gpu"),
        ({"gpus": 1}, "kind"),
        ({"kind": "training", "gpu_types": [""]}, "gpu_types"),
    ],
)
def test_malformed_stored_declarations_are_rejected_with_the_field(raw, field):
    with pytest.raises(WorkloadError) as raised:
        parse_declaration(raw, "task d.t")
    assert raised.value.field == field and raised.value.subject == "task d.t"


def test_declarations_are_readable_from_the_serialized_dag_json_for_classic_taskflow_and_mapped_tasks():
    with DAG("declared", schedule=None, start_date=datetime(2025, 1, 1)) as dag:
        BashOperator(task_id="train", bash_command="true", **gpu_task("training", 4, estimate=60))

        @task(**gpu_task("quantization", 1, priority=2))
        def quantize():
            pass

        @task(**gpu_task("batch_inference", 2, gpu_types=["a100", "h100"]))
        def score(shard):
            return shard

        @task
        def cpu_only():
            pass

        quantize()
        score.expand(shard=[1, 2, 3])
        cpu_only()

    # What the dag-processor writes to serialized_dag.data, through a JSON round trip.
    stored = json.loads(json.dumps(DagSerialization.to_dict(dag)))
    found = declarations_from_serialized_dag(stored)
    assert set(found) == {"train", "quantize", "score"}
    assert parse_declaration(found["train"]).gpus == 4
    assert parse_declaration(found["train"]).estimate_s == 60.0
    assert parse_declaration(found["quantize"]).priority == 2.0
    assert parse_declaration(found["score"]).gpu_types == ("a100", "h100")
    tasks = {t["__var"]["task_id"]: t["__var"] for t in stored["dag"]["tasks"]}
    assert tasks["train"]["pool"] == "gpu_intake" and tasks["train"]["pool_slots"] == 4
