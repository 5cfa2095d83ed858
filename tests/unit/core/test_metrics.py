"""Metrics computed by hand on a small trace."""

import pytest

from airflow_gpu_scheduler.core.metrics import evaluate, percentile
from airflow_gpu_scheduler.core.simulate import Outcome, SimResult
from airflow_gpu_scheduler.core.workload import Cluster, Job


def test_metrics_on_a_hand_computed_trace():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    jobs = (
        Job("b1", 0, "batch_inference", 2, duration_s=400, priority=3),
        Job("b2", 0, "quantization", 1, duration_s=600, priority=2, deadline_s=500),
        Job("b3", 0, "batch_inference", 2, duration_s=800, priority=5),
        Job("s1", 100, "realtime_inference", 1, duration_s=2000, priority=8, max_wait_s=120),
        Job("s2", 200, "realtime_inference", 1, duration_s=100, priority=8, max_wait_s=120),
    )
    outcomes = {
        "b1": Outcome("b1", "h100", 0, 100, 500),  # completed: 3 * 2 * 400 = 2400
        "b2": Outcome("b2", "h100", 0, 0, 600),  # missed its deadline: 0
        "b3": Outcome("b3", "h100", 0, 600, None),  # not finished by the horizon: 0
        "s1": Outcome("s1", "h100", 100, 150, None),  # on time, served 850 s: 8 * 1 * 850 = 6800
        "s2": Outcome("s2", None, 200, None, None),  # never started: waits 800 (censored)
    }
    m = evaluate(SimResult("hand", cluster, jobs, 1000.0, outcomes))
    assert m.utilization == pytest.approx((800 + 600 + 800 + 850) / 4000)
    assert m.weighted_output == pytest.approx(2400 + 6800)
    assert m.streaming_p95_wait_s == pytest.approx(50 + 0.95 * 750)
    assert m.streaming_on_time_rate == 0.5  # s1 started 50 s after submission, s2 never
    assert m.deadline_hit_rate == 0.0
    assert m.max_wait_s == 800
    assert m.mean_wait_s == {
        "training": None,
        "realtime_inference": 425.0,
        "batch_inference": 350.0,
        "quantization": 0.0,
    }
    assert (m.jobs_started, m.jobs_completed) == (4, 2)


def test_late_streaming_job_earns_nothing_and_slow_gpus_earn_no_more():
    cluster = Cluster.from_dict({"gpu_types": {"slow": {"count": 1, "speed": 0.5}}})
    jobs = (
        Job("s", 0, "realtime_inference", 1, duration_s=100, priority=8, max_wait_s=10),
        Job("b", 0, "training", 1, duration_s=100, priority=2),
    )
    outcomes = {"s": Outcome("s", "slow", 0, 11, 111), "b": Outcome("b", "slow", 0, 111, 311)}
    m = evaluate(SimResult("x", cluster, jobs, 1000.0, outcomes))
    assert m.weighted_output == 2 * 1 * 100  # work at speed 1.0, not the 200 s it ran


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([0, 10], 95) == pytest.approx(9.5)
    assert percentile([], 95) is None


def test_goodput_credits_work_inside_the_window_pro_rata_and_keeps_deadlines():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 2.0}}})
    jobs = (
        Job("b1", 0, "batch_inference", 2, duration_s=400, priority=3),  # ends at 300: whole
        Job("b2", 0, "quantization", 1, duration_s=600, priority=2, deadline_s=250),  # ends 300 > 250: 0
        Job("g", 0, "training", 4, duration_s=1600, priority=5),  # starts 600, runs 800 s, half inside
        Job("late", 0, "training", 1, duration_s=1000, priority=1, deadline_s=1400),  # ends 1500 > 1400: 0
        Job("s1", 100, "realtime_inference", 1, duration_s=2000, priority=8, max_wait_s=120),  # 850 s served
        Job("s2", 100, "realtime_inference", 1, duration_s=2000, priority=8, max_wait_s=120),  # late start: 0
    )
    outcomes = {
        "b1": Outcome("b1", "h100", 0, 100, 300),
        "b2": Outcome("b2", "h100", 0, 0, 300),
        "g": Outcome("g", "h100", 0, 600, None),
        "late": Outcome("late", "h100", 0, 1000, None),
        "s1": Outcome("s1", "h100", 100, 150, None),
        "s2": Outcome("s2", "h100", 100, 400, None),
    }
    m = evaluate(SimResult("hand", cluster, jobs, 1000.0, outcomes))
    assert m.weighted_goodput == pytest.approx(3 * 2 * 400 + 5 * 4 * 1600 * 0.5 + 8 * 850)
    # The completion-based measure has the cliff: the gang that is half done counts nothing.
    assert m.weighted_output == pytest.approx(3 * 2 * 400 + 8 * 850)


def test_streaming_on_time_rate_counts_only_endpoints_whose_budget_ends_inside_the_window():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 2, "speed": 1.0}}})
    jobs = (
        Job("late", 0, "realtime_inference", 1, duration_s=100, priority=8, max_wait_s=60),
        Job("edge", 60, "realtime_inference", 1, duration_s=100, priority=8, max_wait_s=60),
        Job("after", 950, "realtime_inference", 1, duration_s=100, priority=8, max_wait_s=60),
        Job("b", 0, "training", 1, duration_s=100, priority=2),
    )
    outcomes = {
        "late": Outcome("late", "h100", 0, 61, 161),  # a second past its budget
        "edge": Outcome("edge", "h100", 60, 120, 220),  # exactly at its budget: on time
        "after": Outcome("after", None, 950, None, None),  # its budget ends after the window: not judged
        "b": Outcome("b", "h100", 0, 0, 100),
    }
    m = evaluate(SimResult("x", cluster, jobs, 1000.0, outcomes))
    assert m.streaming_on_time_rate == 0.5
    batch_only = evaluate(SimResult("y", cluster, jobs[3:], 1000.0, {"b": outcomes["b"]}))
    assert batch_only.streaming_on_time_rate is None
