"""From collected task instances to the planner's jobs: declarations, rejections, learned estimates."""

from __future__ import annotations

import pytest

from airflow_gpu_scheduler.core.workload import Cluster, JobKind
from airflow_gpu_scheduler.gpu_work import build_workload
from airflow_gpu_scheduler.hooks.metadata import GpuTaskInstance, GpuWorkSnapshot, TaskInstanceKey

NOW = 1_800_000_000.0
CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}, "a100": {"count": 8, "speed": 0.5}}})


def ti(
    task_id,
    declaration,
    *,
    pool="gpu_intake",
    slots=None,
    state="scheduled",
    run="r1",
    start=None,
    end=None,
    duration=None,
):
    gpus = (declaration or {}).get("gpus", 1)
    return GpuTaskInstance(
        TaskInstanceKey("d", run, task_id, -1),
        state,
        pool,
        slots or gpus,
        1,
        NOW - 30,
        start,
        end,
        duration,
        declaration,
    )


def snapshot(waiting=(), running=(), finished=()):
    return GpuWorkSnapshot(NOW, tuple(waiting), tuple(running), tuple(finished))


def test_declared_waiting_task_becomes_a_job_keyed_on_the_task_instance():
    work = build_workload(
        snapshot([ti("train", {"kind": "training", "gpus": 4, "estimate_s": 600, "priority": 3, "deadline_s": 3600})]),
        CLUSTER,
    )
    (job,) = work.queued
    assert job.job_id == "d/r1/train/-1" and job.meta["key"] == ("d", "r1", "train", -1)
    assert (job.kind, job.gpus, job.estimate_s, job.priority) == (JobKind.TRAINING, 4, 600.0, 3.0)
    assert job.submit_s == NOW - 30 and job.deadline_s == NOW - 30 + 3600 and job.group == "d.train"
    assert work.estimate_sources[job.job_id] == "declared" and not work.rejected


@pytest.mark.parametrize(
    ("item", "words"),
    [
        (ti("plain", None, pool="gpu_h100"), "declares no GPU work"),
        (ti("big", {"kind": "training", "gpus": 16}), "needs 16 GPUs"),
        (ti("typo", {"kind": "training", "gpus": 1, "gpu_types": ["h200"]}), "unknown GPU type"),
        (ti("slots", {"kind": "quantization", "gpus": 2}, slots=1), "pool_slots"),
        (ti("junk", {"kind": "training", "gpus": "four"}), "gpus"),
    ],
)
def test_task_instances_that_can_never_run_are_rejected_with_a_reason(item, words):
    ok = ti("ok", {"kind": "quantization", "gpus": 1, "estimate_s": 60})
    work = build_workload(snapshot([item, ok]), CLUSTER)
    assert [j.job_id for j in work.queued] == ["d/r1/ok/-1"], "one bad task must not stop the others"
    assert words in work.rejected[item.key.job_id]


def test_estimates_are_learned_from_successful_runs_of_the_same_task_at_speed_one():
    decl = {"kind": "batch_inference", "gpus": 2}
    history = [
        ti(
            "score",
            decl,
            pool="gpu_a100",
            state="success",
            run=f"old{i}",
            start=NOW - 5000 + i,
            end=NOW - 4000 + i,
            duration=d,
        )
        for i, d in enumerate([100.0, 120.0, 140.0])
    ]
    work = build_workload(snapshot([ti("score", decl)], finished=history), CLUSTER)
    (job,) = work.queued
    # Median runtime 120 s on a speed-0.5 GPU is 60 s of work at speed 1.0.
    assert job.estimate_s == 60.0 and work.estimate_sources[job.job_id] == "group history"


def test_running_gpu_work_holds_capacity_and_streaming_history_reserves_gpus():
    running = [
        ti(
            "serve",
            {"kind": "realtime_inference", "gpus": 1, "estimate_s": 300},
            pool="gpu_h100_streaming",
            state="running",
            start=NOW - 60,
        ),
        ti("undeclared", None, pool="gpu_h100", slots=2, state="running", start=NOW - 10),
    ]
    work = build_workload(snapshot([ti("q", {"kind": "quantization", "gpus": 1})], running=running), CLUSTER)
    by_id = {r.job.job_id: r for r in work.running}
    assert by_id["d/r1/serve/-1"].gpu_type == "h100" and by_id["d/r1/undeclared/-1"].job.gpus == 2
    assert work.reserve["h100"] >= 1 and work.reserve["a100"] == 0


def test_each_rejection_names_task_field_and_reason_and_never_crashes_the_cycle():
    odd = ti("odd", {"kind": "training", "gpus": 1, "gpu_types": [["h100"]]})  # a list inside the list
    bad = [
        odd,
        ti("typo", {"kind": "training", "gpus": 1, "gpu_types": ["h200"]}),
        ti("big", {"kind": "training", "gpus": 16}),
    ]
    work = build_workload(snapshot(bad), CLUSTER)
    assert work.queued == []
    assert {j: (f["task"], f["field"]) for j, f in work.rejection_fields.items()} == {
        "d/r1/odd/-1": ("d.odd", "gpu_types"),
        "d/r1/typo/-1": ("d.typo", "gpu_types"),
        "d/r1/big/-1": ("d.big", "gpus"),
    }
    assert all(f["reason"] for f in work.rejection_fields.values())


def test_finished_tasks_teach_the_rollout_the_estimate_errors_and_the_endpoints_to_expect():
    from airflow_gpu_scheduler.core.policies.base import ClusterState

    done = [
        ti(
            "late",
            {"kind": "training", "gpus": 2, "estimate_s": 600},
            pool="gpu_a100",
            state="success",
            start=NOW - 3000,
            end=NOW - 600,
        ),  # 2,400 s on a 0.5-speed GPU: 2x its 1,200 s estimate there
        ti(
            "guess",
            {"kind": "quantization", "gpus": 1},
            pool="gpu_h100",
            state="success",
            start=NOW - 900,
            end=NOW - 300,
        ),  # no declared estimate: nothing to learn an error from
        ti(
            "failed",
            {"kind": "training", "gpus": 1, "estimate_s": 60},
            pool="gpu_h100",
            state="failed",
            start=NOW - 900,
            end=NOW - 800,
        ),
        ti(
            "endpoint",
            {"kind": "realtime_inference", "gpus": 1},
            pool="gpu_h100_streaming",
            state="success",
            start=NOW - 1800,
            end=NOW - 1200,
        ),
    ]
    work = build_workload(snapshot(finished=done), CLUSTER)
    assert [(c.job.job_id, c.gpu_type) for c in work.completed] == [
        ("d/r1/endpoint/-1", "h100"),
        ("d/r1/late/-1", "a100"),
    ]
    seen = ClusterState(NOW, CLUSTER, (), (), completed=tuple(work.completed))
    assert work.completed[1].error_ratio(CLUSTER) == 2.0
    demand = seen.recent_demand()
    assert [(j.kind, j.estimate_s) for j in demand.seen] == [(JobKind.REALTIME_INFERENCE, 600.0)]
