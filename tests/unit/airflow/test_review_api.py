"""The review API's row-to-JSON helpers, without a running Airflow: links, lanes, deadlines, redaction."""

from __future__ import annotations

from airflow_gpu_scheduler.plugins.review_api import HIDDEN, _job_view, _lanes, ti_url


def row(**over):
    base = {
        "id": 7,
        "job_id": "etl/run 1/train/3",
        "dag_id": "etl",
        "run_id": "run 1",
        "task_id": "train",
        "map_index": 3,
        "decision": "held",
        "kind": "training",
        "gpus": 4,
        "priority": 9.0,
        "estimate_s": 600.0,
        "estimate_source": "declared",
        "gpu_type": "h100",
        "pool": "gpu_intake",
        "weight": 0,
        "rank": 1,
        "planned_start_s": 100.0,
        "planned_end_s": 700.0,
        "deadline_s": 650.0,
        "reason": "all 4 h100 GPUs are busy",
        "reason_code": "busy",
    }
    return {**base, **over}


def test_links_point_at_the_task_instance_page_of_the_airflow_ui():
    assert ti_url("", "etl", "run 1", "train", -1) == "/dags/etl/runs/run%201/tasks/train"
    assert (
        ti_url("/airflow", "etl", "manual__2025-01-01T00:00:00+00:00", "t", 2)
        == "/airflow/dags/etl/runs/manual__2025-01-01T00%3A00%3A00%2B00%3A00/tasks/t/mapped/2"
    )


def test_job_view_lane_deadline_and_link():
    job = _job_view(row(), "", None)
    assert job["lane"] == "h100" and job["deadline_met"] is False and job["priority_weight"] == 0
    assert job["ti_url"] == "/dags/etl/runs/run%201/tasks/train/mapped/3" and job["hidden"] is False
    assert _job_view(row(kind="realtime_inference"), "", None)["lane"] == "h100:streaming"
    assert _job_view(row(deadline_s=None), "", None)["deadline_met"] is None
    assert _job_view(row(gpu_type=None, decision="rejected"), "", None)["lane"] is None


def test_jobs_of_dags_the_user_cannot_read_keep_their_bar_but_no_name():
    job = _job_view(row(), "", readable={"other_dag"})
    assert job["hidden"] is True and job["task_id"] == HIDDEN
    assert job["dag_id"] is None and job["run_id"] is None and job["ti_url"] is None and job["reason"] is None
    assert "etl" not in job["key"] and job["lane"] == "h100" and job["planned_start_s"] == 100.0


def test_lanes_per_gpu_type_and_streaming_reservation():
    cluster = {"gpu_types": {"h100": {"count": 8, "speed": 1.0}, "l4": {"count": 4, "speed": 0.4}}}
    lanes = _lanes(cluster, {"h100": 2}, [])
    assert [(lane["id"], lane["gpus"], lane["count"]) for lane in lanes] == [
        ("h100", 6, 8),
        ("h100:streaming", 2, 8),
        ("l4", 4, 4),
    ]
    streaming_job = _job_view(row(gpu_type="l4", kind="realtime_inference"), "", None)
    assert [lane["id"] for lane in _lanes(cluster, {}, [streaming_job])] == ["h100", "l4", "l4:streaming"]


def test_a_readable_jobs_reason_never_names_a_job_of_a_dag_the_user_cannot_read():
    reason = "h100 GPUs reserved for training job secret/r 9/train/-1 (priority 9), which starts now"
    others = ["secret/r 9/train/-1", "etl/run 1/train/3"]
    job = _job_view(row(reason=reason), "", readable={"etl"}, job_ids=others)
    assert "secret" not in job["reason"] and "training job of a DAG you cannot read (priority 9)" in job["reason"]
    assert _job_view(row(reason=reason), "", readable={"etl", "secret"}, job_ids=others)["reason"] == reason


def test_the_objective_line_says_it_compares_with_the_planners_own_greedy_start_not_with_airflow():
    # objective / greedy_objective - 1 is never negative (greedy is the solver's warm start);
    # labelled "vs greedy" it read as "better than Airflow". The forecast is the comparison with Airflow.
    from pathlib import Path

    from airflow_gpu_scheduler import plugins

    page = (Path(plugins.__file__).parent / "static" / "gpu_schedule.js").read_text()
    assert " vs greedy)" not in page
    assert "over the planner's own greedy start" in page and "Airflow's default dispatch of the same queue" in page
