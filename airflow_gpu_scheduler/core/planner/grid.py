"""Where starts may happen, and what is free there.

Start times are allowed at grid points: every ``step_s`` near now, with spacing that
doubles further out, plus the expected end of a running job (that is when capacity
frees; at most one such point per grid interval). Capacity only rises at job ends and
only falls at starts, and starts happen at grid points, so checking capacity at the
grid points is exact.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_gpu_scheduler.core.planner.plan import PlannerConfig
from airflow_gpu_scheduler.core.workload import Cluster, Job, allowed_types

if TYPE_CHECKING:
    from airflow_gpu_scheduler.core.planner.candidates import Candidate


def start_grid(cfg: PlannerConfig, horizon_s: float, extra_points: Sequence[float] = ()) -> list[float]:
    """Offsets from now where starts are allowed: fine near now, doubling spacing further out."""
    points = [0.0]
    t, step, run = 0.0, cfg.step_s, 0
    while t + step < horizon_s:
        t += step
        points.append(t)
        run += 1
        if run >= cfg.fine_points:
            step *= 2
            run = cfg.fine_points // 2
    # Capacity frees when a running job ends: let a start happen right then, but add at
    # most one such point (the earliest) per grid interval, so a cluster with hundreds of
    # running jobs does not multiply the grid. Later ends in the interval wait for the
    # next grid point, as they would with one planning cycle per interval.
    grid = points
    earliest: dict[int, float] = {}
    for extra in extra_points:
        if 0 < extra < horizon_s:
            i = bisect_right(grid, extra) - 1
            if grid[i] != extra:
                earliest[i] = min(earliest.get(i, math.inf), round(extra, 3))
    return sorted(set(grid) | set(earliest.values()))


def room_for_gangs(cluster: Cluster, queued: Sequence[Job], reserve: Mapping[str, int]) -> dict[str, int]:
    """The streaming reservation, shrunk so that every queued batch job fits beside it somewhere.

    Batch work must leave the reservation free, so a gang larger than a type's GPUs minus
    its reservation could never be planned there: on a cluster that always has some
    streaming work, a whole-cluster gang would wait forever. While such a gang waits, the
    reservation of the type it fits best (fastest, then largest) shrinks just enough to let
    it start; the MILP then weighs it against the streaming work it delays, as for any job.
    """
    out = {t.name: int(reserve.get(t.name, 0)) for t in cluster.gpu_types}
    for job in queued:
        if job.is_streaming:
            continue
        types = [t for t in allowed_types(job, cluster) if t.count >= job.gpus]
        if not types or any(job.gpus <= t.count - out[t.name] for t in types):
            continue
        best = max(types, key=lambda t: (t.speed, t.count))
        out[best.name] = best.count - job.gpus
    return out


@dataclass
class Capacity:
    """GPUs free per type at each grid point, after running jobs (and reservation for batch).

    ``penalty`` None: the reservation is hard, batch work never uses it. Else it is soft:
    batch work may use a reserved GPU at point *i* of type *k* at a cost of
    ``penalty[k][i]`` (the streaming value it is expected to turn away), so the MILP
    weighs a gang that needs the reserved GPUs against the endpoints they are kept for.
    """

    points: list[float]
    free: dict[str, list[int]]
    free_batch: dict[str, list[int]]
    penalty: dict[str, list[float]] | None = None

    @classmethod
    def build(
        cls,
        cluster: Cluster,
        points: list[float],
        running: Sequence[tuple[str, int, float, bool]],
        reserve: Mapping[str, int],
    ) -> Capacity:
        """``running``: (GPU type, GPUs, expected end as an offset from now, streaming?) per running job."""
        free = {t.name: [t.count] * len(points) for t in cluster.gpu_types}
        streaming_running = {t.name: [0] * len(points) for t in cluster.gpu_types}
        for gpu_type, gpus, end, streaming in running:
            for i, p in enumerate(points):
                if p < end:
                    free[gpu_type][i] -= gpus
                    if streaming:
                        streaming_running[gpu_type][i] += gpus
        free_batch = {}
        for name, row in free.items():
            # Batch work must leave the reservation free, but running streaming jobs already
            # use part of it: reserve only what they do not cover.
            r = reserve.get(name, 0)
            # Never below zero: batch work already running beyond it just means no new batch starts.
            free_batch[name] = [max(0, f - max(0, r - s)) for f, s in zip(row, streaming_running[name], strict=True)]
        return cls(points, free, free_batch)

    def copy(self) -> Capacity:
        return Capacity(
            self.points,
            {k: list(v) for k, v in self.free.items()},
            {k: list(v) for k, v in self.free_batch.items()},
            self.penalty,
        )

    def fits(self, gpu_type: str, gpus: int, idx: range, streaming: bool, soft: bool = False) -> bool:
        """Do ``gpus`` fit over points ``idx``? ``soft``: batch work may use a soft reservation."""
        if min(self.free[gpu_type][idx.start : idx.stop]) < gpus:
            return False
        if streaming or (soft and self.penalty is not None):
            return True
        return min(self.free_batch[gpu_type][idx.start : idx.stop]) >= gpus

    def intrusion(self, jobs: Sequence[Job], chosen: Mapping[int, Candidate]) -> dict[str, list[int]]:
        """GPUs of the reservation that batch work in ``chosen`` (on top of this capacity) uses, per type and point."""
        used = {k: [0] * len(self.points) for k in self.free}
        for j, c in chosen.items():
            if not jobs[j].is_streaming:
                row = used[c.gpu_type]
                for i in c.covers:
                    row[i] += jobs[j].gpus
        return {k: [max(0, u - b) for u, b in zip(row, self.free_batch[k], strict=True)] for k, row in used.items()}

    def intrusion_cost(self, jobs: Sequence[Job], chosen: Mapping[int, Candidate]) -> float:
        """What using the soft reservation costs ``chosen`` (0 for a hard one, which it never uses)."""
        if self.penalty is None:
            return 0.0
        return sum(
            pen * gpus
            for k, row in self.intrusion(jobs, chosen).items()
            for pen, gpus in zip(self.penalty[k], row, strict=True)
            if gpus
        )

    def take(self, gpu_type: str, gpus: int, idx: range, streaming: bool) -> None:
        """Occupy GPUs. Streaming work may use the reservation, so it does not count against
        what batch work may use (as in the MILP's ``batch_capacity`` rows)."""
        for i in idx:
            self.free[gpu_type][i] -= gpus
            if not streaming:
                self.free_batch[gpu_type][i] -= gpus
