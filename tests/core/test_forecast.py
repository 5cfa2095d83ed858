"""The plan-vs-Airflow forecast the operator stores with every plan."""

from airflow_gpu_scheduler.core.forecast import predict_plan_vs_airflow
from airflow_gpu_scheduler.core.planner import MilpPlanner
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})


def test_plan_beats_airflow_when_a_gang_waits_behind_small_jobs():
    now = 1_000_000.0
    running = [RunningJob(Job("r", now - 100, "quantization", 1, estimate_s=600, group="q"), "h100", now - 100)]
    small = [Job(f"q{i}", now - 50 + i, "quantization", 1, estimate_s=600, priority=1, group="q") for i in range(12)]
    gang = Job("gang", now - 10, "training", 4, estimate_s=1800, priority=9)
    plan = MilpPlanner().plan(FOUR, [*small, gang], running, now)
    forecast = predict_plan_vs_airflow(FOUR, [*small, gang], running, now, plan)
    assert forecast["plan"]["weighted_output"] > forecast["airflow"]["weighted_output"]
    assert forecast["window_s"] == 3600
    # The gang (9 x 4 GPUs x 1800 s) finishes within the hour only under the plan.
    assert forecast["plan"]["weighted_output"] - forecast["airflow"]["weighted_output"] >= 9 * 4 * 1800 - 12 * 600


def test_empty_plan_forecasts_nothing_lost():
    plan = MilpPlanner().plan(FOUR, [], [], 0.0)
    forecast = predict_plan_vs_airflow(FOUR, [], [], 0.0, plan)
    assert forecast["plan"]["weighted_output"] == forecast["airflow"]["weighted_output"] == 0.0
