"""The streaming reservation: what real-time inference holds, its expected arrivals, and a memory of hours."""

from airflow_gpu_scheduler.core.streaming import StreamingInterval, streaming_reserve
from airflow_gpu_scheduler.core.workload import Cluster

CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 8, "speed": 1.0}, "l4": {"count": 4, "speed": 0.4}}})
HOUR = 3600.0
NOW = 10 * HOUR


def test_no_streaming_history_reserves_nothing():
    assert streaming_reserve(CLUSTER, [], NOW) == {"h100": 0, "l4": 0}


def test_what_streaming_holds_now_plus_room_for_one_more_arrival():
    running = [StreamingInterval("h100", 2, NOW - 600, None), StreamingInterval("h100", 1, NOW - 300, None)]
    assert streaming_reserve(CLUSTER, running, NOW) == {"h100": 3 + 2, "l4": 0}


def test_an_endpoint_seen_hours_ago_still_keeps_room_for_the_next_one():
    # One 2-GPU endpoint ran this morning and ended: the next one of the day must find room.
    earlier = [StreamingInterval("l4", 2, NOW - 5 * HOUR, NOW - 4 * HOUR)]
    assert streaming_reserve(CLUSTER, earlier, NOW) == {"h100": 0, "l4": 2}
    # Beyond the memory it is forgotten: the GPUs go back to batch work.
    assert streaming_reserve(CLUSTER, earlier, NOW + 2 * HOUR) == {"h100": 0, "l4": 0}
    assert streaming_reserve(CLUSTER, earlier, NOW, memory_s=HOUR) == {"h100": 0, "l4": 0}


def test_a_burst_of_arrivals_reserves_their_expected_demand_but_never_more_than_exists():
    burst = [StreamingInterval("h100", 1, NOW - i * 60.0, NOW - i * 60.0 + 30.0) for i in range(1, 49)]
    # 48 GPUs asked for in the last hour: 4 expected in the next 5 minutes.
    assert streaming_reserve(CLUSTER, burst, NOW)["h100"] == 4
    big = [StreamingInterval("l4", 1, NOW - 10.0, None) for _ in range(6)]
    assert streaming_reserve(CLUSTER, big, NOW)["l4"] == 4
