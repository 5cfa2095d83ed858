"""Realized utilization from start/end times, on intervals whose busy share is known."""

import pytest

from airflow_gpu_scheduler.core.usage import GpuInterval, realized_utilization


def test_busy_share_per_bucket_and_per_type():
    intervals = [
        GpuInterval("h100", 4, 0.0, 60.0),  # all of h100 for the first bucket
        GpuInterval("h100", 2, 90.0, None),  # half of h100 from 90 s on, still running
        GpuInterval("a100", 2, 30.0, 90.0),  # a100 busy 30-90
        GpuInterval("gone", 8, 0.0, 120.0),  # a type no longer in the cluster: ignored
    ]
    buckets = realized_utilization(intervals, {"h100": 4, "a100": 2}, since_s=0.0, until_s=120.0, bucket_s=60.0)
    assert [b["start_s"] for b in buckets] == [0.0, 60.0]
    assert buckets[0]["by_type"] == {"h100": 1.0, "a100": pytest.approx(0.5)}
    assert buckets[1]["by_type"] == {"h100": pytest.approx(0.25), "a100": pytest.approx(0.5)}
    assert buckets[0]["utilization"] == pytest.approx((240 + 60) / 360)


def test_partial_last_bucket_and_empty_window():
    buckets = realized_utilization([GpuInterval("h100", 1, 0.0, 100.0)], {"h100": 1}, 0.0, 90.0, 60.0)
    assert [b["end_s"] for b in buckets] == [60.0, 90.0]
    assert buckets[1]["utilization"] == pytest.approx(1.0)
    assert realized_utilization([], {"h100": 1}, 10.0, 10.0, 60.0) == []
