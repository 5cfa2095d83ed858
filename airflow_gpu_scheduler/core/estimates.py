"""Runtime estimates for jobs that declare none, learned from completed jobs.

Planners never see actual durations: a job either declares ``estimate_s`` or gets
the median duration (at speed 1.0) of completed jobs of the same group (a
recurring ``dag_id.task_id``), else of the same kind, else a per-kind default.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence

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


#: Estimate errors assumed before enough jobs have completed: log-normal, this sigma.
DEFAULT_ERROR_SIGMA = 0.3
#: Completed jobs of a kind needed before its own errors are sampled (else all kinds').
MIN_ERRORS_PER_KIND = 8


class EstimateErrors:
    """How far actual runtimes strayed from the estimates the planner had: actual / estimate.

    The rollout samples futures from these ratios, so a plan is judged on the noise the
    cluster really shows (per kind once it has enough history; a log-normal guess before).
    """

    def __init__(self, ratios: Iterable[tuple[JobKind, float]] = ()) -> None:
        self._by_kind: dict[JobKind, deque[float]] = defaultdict(lambda: deque(maxlen=4 * HISTORY_PER_KEY))
        self._all: deque[float] = deque(maxlen=8 * HISTORY_PER_KEY)
        for kind, ratio in ratios:
            self.observe(kind, ratio)

    def observe(self, kind: JobKind, ratio: float) -> None:
        if math.isfinite(ratio) and ratio > 0:
            self._by_kind[JobKind(kind)].append(ratio)
            self._all.append(ratio)

    def _pool(self, kind: JobKind) -> Sequence[float]:
        own = self._by_kind.get(kind)
        if own is not None and len(own) >= MIN_ERRORS_PER_KIND:
            return own
        return self._all if len(self._all) >= MIN_ERRORS_PER_KIND else ()

    def sample(self, kind: JobKind, rng: random.Random, at_least: float = 0.0) -> float | None:
        """A ratio for one job; ``at_least``: the ratio the job has already run (a running job
        has outlived every smaller one). None if no ratio that large was ever seen."""
        pool = self._pool(kind)
        if pool:
            longer = [r for r in pool if r > at_least] if at_least > 0 else pool
            return rng.choice(longer) if longer else None
        for _ in range(20):
            ratio = math.exp(rng.gauss(0.0, DEFAULT_ERROR_SIGMA))
            if ratio > at_least:
                return ratio
        return None

    def quantile(self, kind: JobKind, q: float, at_least: float = 0.0) -> float:
        """The ``q`` quantile of the ratio, among ratios above ``at_least`` (what a running job has
        already run); a little above ``at_least`` if none was ever that large."""
        pool = sorted(r for r in self._pool(kind) if r > at_least)
        if pool:
            return pool[min(len(pool) - 1, int(q * len(pool)))]
        if not self._pool(kind):
            guess = math.exp(statistics.NormalDist().inv_cdf(q) * DEFAULT_ERROR_SIGMA)
            if guess > at_least:
                return guess
        return at_least * 1.1 + 1e-9
