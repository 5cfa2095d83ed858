"""The streaming reservation: GPUs kept free for real-time inference that has not arrived yet.

Real-time inference must start within seconds of arriving, and Airflow cannot
preempt, so the only way to serve it while batch gangs hold the GPUs for hours is
to keep some GPUs out of batch work in advance. The reservation per GPU type is
the peak number of GPUs that streaming jobs held at once over a trailing window,
plus the largest streaming gang seen in it (so one more arrival fits at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_gpu_scheduler.core.workload import Cluster

DEFAULT_WINDOW_S = 3600.0


@dataclass(frozen=True)
class StreamingInterval:
    """A streaming job that held ``gpus`` GPUs of ``gpu_type`` from ``start_s`` until ``end_s`` (None: still running)."""

    gpu_type: str
    gpus: int
    start_s: float
    end_s: float | None


def streaming_reserve(
    cluster: Cluster,
    recent: Sequence[StreamingInterval],
    now_s: float,
    window_s: float = DEFAULT_WINDOW_S,
) -> dict[str, int]:
    """GPUs per type to keep for streaming work over the next planning cycles."""
    reserve: dict[str, int] = {}
    since = now_s - window_s
    for gpu_type in cluster.gpu_types:
        events: list[tuple[float, int]] = []
        largest = 0
        for interval in recent:
            if interval.gpu_type != gpu_type.name:
                continue
            end = now_s if interval.end_s is None else interval.end_s
            if end < since or interval.start_s > now_s:
                continue
            largest = max(largest, interval.gpus)
            events.append((max(interval.start_s, since), interval.gpus))
            events.append((end, -interval.gpus))
        peak = level = 0
        for _, delta in sorted(events, key=lambda e: (e[0], -e[1])):
            level += delta
            peak = max(peak, level)
        reserve[gpu_type.name] = min(gpu_type.count, peak + largest) if largest else 0
    return reserve
