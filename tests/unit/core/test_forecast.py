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


def test_forecast_with_a_real_time_endpoint_running_on_the_gpu_type():
    # A streaming job holds a GPU of the streaming pool: Airflow alone must count it, not
    # stop with "over-subscribed" (the forecast failed whenever an endpoint ran).
    now = 1_000_000.0
    endpoint = Job("rt", now - 5, "realtime_inference", 1, estimate_s=900, priority=5, max_wait_s=20)
    running = [RunningJob(endpoint, "h100", now - 5)]
    queued = [Job(f"q{i}", now - 3, "quantization", 1, estimate_s=600, group="q") for i in range(5)]
    plan = MilpPlanner().plan(FOUR, queued, running, now, {"h100": 1})
    forecast = predict_plan_vs_airflow(FOUR, queued, running, now, plan)
    assert forecast["plan"]["utilization"] > 0 and forecast["airflow"]["utilization"] > 0
    # Three GPUs are left for batch work on either side: the endpoint keeps its own.
    assert forecast["airflow"]["utilization"] <= 1.0
