"""Runtime estimates for jobs that declare none, learned from completed jobs.

Planners never see actual durations: a job either declares ``estimate_s`` or gets
the median duration (at speed 1.0) of completed jobs of the same group (a
recurring ``dag_id.task_id``), else of the same kind, else a per-kind default.
"""

from __future__ import annotations

import statistics
from collections import defaultdict, deque
from collections.abc import Iterable

from airflow_gpu_scheduler.core.workload import Job, JobKind

#: Used only until a kind has any history.
DEFAULT_ESTIMATE_S: dict[JobKind, float] = {
    JobKind.TRAINING: 4 * 3600.0,
    JobKind.REALTIME_INFERENCE: 3600.0,
    JobKind.BATCH_INFERENCE: 1800.0,
    JobKind.QUANTIZATION: 900.0,
}

#: Keep the most recent completions only: runtimes drift as code and data change.
HISTORY_PER_KEY = 50


class Estimator:
    """Median of recent completed durations, per group and per kind."""

    def __init__(self) -> None:
        self._by_group: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=HISTORY_PER_KEY))
        self._by_kind: dict[JobKind, deque[float]] = defaultdict(lambda: deque(maxlen=HISTORY_PER_KEY))

    def observe(self, kind: JobKind, group: str | None, duration_s: float) -> None:
        """Record a completed job's duration at speed 1.0 (runtime x speed of its GPU type)."""
        if duration_s <= 0:
            return
        self._by_kind[JobKind(kind)].append(duration_s)
        if group:
            self._by_group[group].append(duration_s)

    def estimate(self, job: Job) -> tuple[float, str]:
        """(estimate, source): source is 'declared', 'group history', 'kind history' or 'default'."""
        if job.estimate_s is not None:
            return job.estimate_s, "declared"
        if job.group and self._by_group.get(job.group):
            return statistics.median(self._by_group[job.group]), "group history"
        if self._by_kind.get(job.kind):
            return statistics.median(self._by_kind[job.kind]), "kind history"
        return DEFAULT_ESTIMATE_S[job.kind], "default"

    def fill(self, job: Job) -> Job:
        return job if job.estimate_s is not None else job.with_estimate(self.estimate(job)[0])


def fill_estimates(jobs: Iterable[Job], estimator: Estimator) -> list[Job]:
    return [estimator.fill(job) for job in jobs]
