"""Realized GPU usage: how busy the GPU pools really were, from task instances' start and end times.

The review page charts it next to the plans, so a reviewer sees what the plans achieved,
not only what they predicted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInterval:
    """``gpus`` GPUs of ``gpu_type`` held from ``start_s`` until ``end_s`` (``None``: still running)."""

    gpu_type: str
    gpus: int
    start_s: float
    end_s: float | None


def realized_utilization(
    intervals: Sequence[GpuInterval],
    capacity: Mapping[str, int],
    since_s: float,
    until_s: float,
    bucket_s: float,
) -> list[dict[str, object]]:
    """Busy share of the GPUs per time bucket, overall and per GPU type.

    Each bucket is ``{"start_s", "end_s", "utilization", "by_type": {type: share}}``; a share is
    GPU-seconds held / GPU-seconds available, so a bucket can exceed 1 only if more work ran
    than the capacity given (e.g. a GPU type that shrank). Types missing from ``capacity``
    are ignored.
    """
    if bucket_s <= 0 or until_s <= since_s:
        return []
    n = max(1, math.ceil((until_s - since_s) / bucket_s - 1e-9))
    busy = {name: [0.0] * n for name in capacity}
    for interval in intervals:
        if interval.gpu_type not in busy:
            continue
        start = max(interval.start_s, since_s)
        end = min(until_s if interval.end_s is None else interval.end_s, until_s)
        if end <= start:
            continue
        first = int((start - since_s) // bucket_s)
        last = min(n - 1, int((end - since_s) // bucket_s))
        for b in range(first, last + 1):
            lo = since_s + b * bucket_s
            hi = min(lo + bucket_s, until_s)
            overlap = min(end, hi) - max(start, lo)
            if overlap > 0:
                busy[interval.gpu_type][b] += overlap * interval.gpus
    total = sum(capacity.values())
    out = []
    for b in range(n):
        lo = since_s + b * bucket_s
        width = min(lo + bucket_s, until_s) - lo
        by_type = {name: busy[name][b] / (capacity[name] * width) if capacity[name] else 0.0 for name in capacity}
        overall = sum(busy[name][b] for name in capacity) / (total * width) if total else 0.0
        out.append({"start_s": lo, "end_s": lo + width, "utilization": overall, "by_type": by_type})
    return out
