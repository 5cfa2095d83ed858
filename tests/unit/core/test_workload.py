"""Validation of jobs, GPU types and clusters: every error names the subject and the field."""

import pytest

from airflow_gpu_scheduler.core.workload import (
    Cluster,
    GpuType,
    Job,
    JobKind,
    WorkloadError,
    split_valid,
    validate_job,
)

CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 8, "speed": 1.0}, "l4": {"count": 16, "speed": 0.4}}})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": -2}, "gpus"),
        ({"gpus": 1.5}, "gpus"),
        ({"gpus": True}, "gpus"),
        ({"kind": "finetune"}, "kind"),
        ({"duration_s": 0}, "duration_s"),
        ({"estimate_s": -1}, "estimate_s"),
        ({"estimate_s": float("nan")}, "estimate_s"),
        ({"priority": 0}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"deadline_s": 50.0}, "deadline_s"),
        ({"gpu_types": "h100"}, "gpu_types"),
        ({"submit_s": "soon"}, "submit_s"),
        ({"max_wait_s": -5}, "max_wait_s"),
        ({"job_id": ""}, "job_id"),
    ],
)
def test_bad_job_fields_are_named(kwargs, field):
    base = dict(job_id="j1", submit_s=100.0, kind="training", gpus=2, duration_s=60.0)
    with pytest.raises(WorkloadError) as info:
        Job(**{**base, **kwargs})
    assert info.value.field == field
    assert field in str(info.value)


def test_impossible_gang_is_rejected_with_job_and_field():
    job = Job("big", 0, JobKind.TRAINING, 12, duration_s=10, gpu_types=("h100",))
    with pytest.raises(WorkloadError, match="'big'.*gpus.*no allowed GPU type"):
        validate_job(job, CLUSTER)


def test_unknown_gpu_type_is_rejected():
    job = Job("j", 0, "quantization", 1, duration_s=10, gpu_types=("b200",))
    with pytest.raises(WorkloadError) as info:
        validate_job(job, CLUSTER)
    assert info.value.field == "gpu_types" and "b200" in str(info.value)


def test_split_valid_keeps_good_jobs_and_reports_bad_ones():
    good = Job("ok", 0, "quantization", 1, duration_s=10)
    too_big = Job("huge", 0, "training", 64, duration_s=10)
    duplicate = Job("ok", 5, "quantization", 1, duration_s=10)
    valid, errors = split_valid([good, too_big, duplicate], CLUSTER)
    assert valid == [good]
    assert [(e.subject, e.field) for e in errors] == [("job 'huge'", "gpus"), ("job 'ok'", "job_id")]


def test_streaming_jobs_get_a_default_wait_budget():
    job = Job("rt", 0, "realtime_inference", 1, duration_s=10)
    assert job.is_streaming and job.max_wait_s is not None and job.max_wait_s > 0


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "gpu_types"),
        ({"gpu_types": {}}, "gpu_types"),
        ({"gpu_types": {"h100": {"count": 0}}}, "count"),
        ({"gpu_types": {"h100": {"count": 4, "speed": -1}}}, "speed"),
        ({"gpu_types": {"h100": {"speed": 1}}}, "count"),
        ({"gpu_types": {"h100": {"count": 4, "colour": "green"}}}, "colour"),
        ({"gpu_types": {"h 100": {"count": 4}}}, "name"),
        ({"gpu_types": {"h100": {"count": 4, "queue": "gpu-h100,default"}}}, "queue"),
        ({"gpu_types": {"h100": {"count": 4, "queue": ""}}}, "queue"),
    ],
)
def test_bad_cluster_is_named(data, field):
    with pytest.raises(WorkloadError) as info:
        Cluster.from_dict(data)
    assert info.value.field == field


def test_duplicate_gpu_types_rejected():
    with pytest.raises(WorkloadError, match="duplicate"):
        Cluster((GpuType("a", 1), GpuType("a", 2)))


def test_cluster_queue_is_optional_and_round_trips():
    data = {"gpu_types": {"h100": {"count": 4, "speed": 1.0, "queue": "gpu-h100"}, "l4": {"count": 2, "speed": 0.4}}}
    cluster = Cluster.from_dict(data)
    assert [t.queue for t in cluster.gpu_types] == ["gpu-h100", None]
    assert cluster.to_dict() == data


def test_errors_about_one_job_carry_its_id():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})
    # Ids with quotes and spaces: parsing the id back out of the message would get these wrong.
    jobs = [
        Job("d/r 'x'/t/-1", 0, "training", 8, estimate_s=1),
        Job("ok", 0, "training", 1, estimate_s=1),
        Job("ok", 0, "training", 1, estimate_s=1),
        Job("typo", 0, "training", 1, estimate_s=1, gpu_types=("h10",)),
    ]
    _, errors = split_valid(jobs, cluster)
    assert [(e.job_id, e.field) for e in errors] == [("d/r 'x'/t/-1", "gpus"), ("ok", "job_id"), ("typo", "gpu_types")]
    with pytest.raises(WorkloadError) as raised:
        Job("neg", 0, "training", -1)
    assert raised.value.job_id == "neg" and raised.value.field == "gpus"


def test_expected_end_of_a_running_job_one_rule():
    from airflow_gpu_scheduler.core.workload import OVERDUE_FLOOR_S, GpuType, RunningJob, expected_end_s

    fast = GpuType("h100", 4, 2.0)
    batch = RunningJob(Job("b", 0.0, "training", 1, estimate_s=100.0), "h100", 10.0)
    stream = RunningJob(Job("s", 0.0, "realtime_inference", 1, estimate_s=100.0), "h100", 10.0)
    assert expected_end_s(batch, fast, 20.0) == 60.0  # work runs d / speed
    assert expected_end_s(stream, fast, 20.0) == 110.0  # a streaming job serves wall-clock time
    # Past its estimate: assumed to end soon (the floor), never in the past.
    assert expected_end_s(batch, fast, 500.0) == 500.0 + OVERDUE_FLOOR_S
    assert expected_end_s(batch, fast, 500.0, floor_s=30.0) == 530.0
    no_estimate = RunningJob(Job("n", 0.0, "training", 1), "h100", 10.0)
    assert expected_end_s(no_estimate, fast, 20.0) == 20.0 + OVERDUE_FLOOR_S
