"""The workload: GPU types, the cluster, and the jobs that compete for it.

Everything here is plain, frozen data validated on construction, so that a bad
job is rejected with a message naming the job and the field before it can reach
a planner, a simulator or Airflow.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

#: Default wait budget of a real-time inference job when none is declared.
DEFAULT_STREAMING_MAX_WAIT_S = 120.0


class WorkloadError(ValueError):
    """A job, GPU type or cluster is invalid; names what and why.

    :param subject: what is invalid, in words (``job 'a'``, ``task d.t (run r, map_index -1)``).
    :param field_name: the offending field.
    :param reason: why it is invalid.
    :param job_id: the id of the job concerned, when the error is about one job (so callers
        never have to parse it back out of ``subject``).
    """

    def __init__(self, subject: str, field_name: str, reason: str, job_id: str | None = None) -> None:
        self.subject = subject
        self.field = field_name
        self.reason = reason
        self.job_id = job_id
        super().__init__(f"{subject}: field '{field_name}': {reason}")


class JobKind(str, Enum):
    """The four kinds of GPU work; the kind decides the allocation shape."""

    TRAINING = "training"
    REALTIME_INFERENCE = "realtime_inference"
    BATCH_INFERENCE = "batch_inference"
    QUANTIZATION = "quantization"

    @property
    def is_streaming(self) -> bool:
        """Streaming-shaped work needs capacity at once; batch-shaped work can queue."""
        return self is JobKind.REALTIME_INFERENCE

    @classmethod
    def parse(cls, value: Any, subject: str = "job") -> JobKind:
        if isinstance(value, JobKind):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(k.value for k in cls)
            raise WorkloadError(subject, "kind", f"unknown kind {value!r}; expected one of {allowed}") from None


def _number(value: Any, subject: str, field_name: str, *, positive: bool = True, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkloadError(subject, field_name, f"expected a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise WorkloadError(subject, field_name, f"must be finite, got {value!r}")
    if positive and (number < 0 or (number == 0 and not allow_zero)):
        raise WorkloadError(subject, field_name, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return number


@dataclass(frozen=True)
class GpuType:
    """One kind of GPU in the cluster: how many there are, how fast they run work, and the
    executor queue its workers listen on (``None``: the default ``gpu-<name>``)."""

    name: str
    count: int
    speed: float = 1.0
    queue: str | None = None

    def __post_init__(self) -> None:
        subject = f"GPU type {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise WorkloadError("GPU type", "name", f"must be a non-empty string, got {self.name!r}")
        if not all(c.isalnum() or c in "-_" for c in self.name):
            raise WorkloadError(
                subject, "name", "may only hold letters, digits, '-' and '_' (it names an Airflow pool)"
            )
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count <= 0:
            raise WorkloadError(subject, "count", f"must be a positive integer, got {self.count!r}")
        _number(self.speed, subject, "speed")
        if self.queue is not None and (
            not isinstance(self.queue, str)
            or not self.queue
            or not all(c.isalnum() or c in "-_.:@" for c in self.queue)
        ):
            # A comma or a blank would split the name in ``celery worker -q a,b``.
            raise WorkloadError(
                subject, "queue", f"must be a queue name of letters, digits and '-_.:@', got {self.queue!r}"
            )


@dataclass(frozen=True)
class Cluster:
    """The GPU fleet: GPU types in a fixed order (the order is the lane order everywhere)."""

    gpu_types: tuple[GpuType, ...]

    def __post_init__(self) -> None:
        if not self.gpu_types:
            raise WorkloadError("cluster", "gpu_types", "needs at least one GPU type")
        names = [t.name for t in self.gpu_types]
        if len(set(names)) != len(names):
            raise WorkloadError("cluster", "gpu_types", f"duplicate GPU type names in {names}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        """Build from ``{"gpu_types": {"h100": {"count": 32, "speed": 1.0, "queue": "gpu-h100"}, ...}}``.

        ``queue`` is optional.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("gpu_types"), Mapping):
            raise WorkloadError("cluster", "gpu_types", 'expected {"gpu_types": {NAME: {"count": N, "speed": S}}}')
        types = []
        for name, spec in data["gpu_types"].items():
            if not isinstance(spec, Mapping):
                raise WorkloadError(
                    f"GPU type {name!r}", "spec", f"expected an object with count and speed, got {spec!r}"
                )
            unknown = set(spec) - {"count", "speed", "queue"}
            if unknown:
                raise WorkloadError(f"GPU type {name!r}", sorted(unknown)[0], "unknown field")
            if "count" not in spec:
                raise WorkloadError(f"GPU type {name!r}", "count", "missing")
            types.append(GpuType(str(name), spec["count"], spec.get("speed", 1.0), spec.get("queue")))
        return cls(tuple(types))

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_types": {
                t.name: {"count": t.count, "speed": t.speed, **({"queue": t.queue} if t.queue else {})}
                for t in self.gpu_types
            }
        }

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.gpu_types)

    @property
    def total_gpus(self) -> int:
        return sum(t.count for t in self.gpu_types)

    def gpu_type(self, name: str) -> GpuType:
        for t in self.gpu_types:
            if t.name == name:
                return t
        raise KeyError(name)


@dataclass(frozen=True)
class Job:
    """One unit of GPU work.

    ``duration_s`` is the true runtime at speed 1.0: only the simulator may read
    it. Planners see ``estimate_s`` (filled in by :mod:`estimates` when the job
    did not declare one). ``gpu_types`` empty means any type.
    """

    job_id: str
    submit_s: float
    kind: JobKind
    gpus: int
    duration_s: float | None = None
    estimate_s: float | None = None
    priority: float = 1.0
    gpu_types: tuple[str, ...] = ()
    deadline_s: float | None = None
    group: str | None = None
    max_wait_s: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not self.job_id:
            raise WorkloadError("job", "job_id", f"must be a non-empty string, got {self.job_id!r}")
        try:
            self._validate()
        except WorkloadError as error:
            error.job_id = error.job_id or self.job_id
            raise

    def _validate(self) -> None:
        subject = f"job {self.job_id!r}"
        object.__setattr__(self, "kind", JobKind.parse(self.kind, subject))
        _number(self.submit_s, subject, "submit_s", allow_zero=True, positive=False)
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus <= 0:
            raise WorkloadError(subject, "gpus", f"must be a positive integer, got {self.gpus!r}")
        if self.duration_s is not None:
            _number(self.duration_s, subject, "duration_s")
        if self.estimate_s is not None:
            _number(self.estimate_s, subject, "estimate_s")
        _number(self.priority, subject, "priority")
        if isinstance(self.gpu_types, str):
            raise WorkloadError(subject, "gpu_types", "must be a list of GPU type names, not a string")
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        for name in self.gpu_types:
            if not isinstance(name, str) or not name:
                raise WorkloadError(subject, "gpu_types", f"names must be non-empty strings, got {name!r}")
        if self.deadline_s is not None:
            deadline = _number(self.deadline_s, subject, "deadline_s", positive=False)
            if deadline <= self.submit_s:
                raise WorkloadError(subject, "deadline_s", f"must be after submit_s ({self.submit_s}), got {deadline}")
        if self.max_wait_s is not None:
            _number(self.max_wait_s, subject, "max_wait_s", allow_zero=True)
        if self.max_wait_s is None and self.kind.is_streaming:
            object.__setattr__(self, "max_wait_s", DEFAULT_STREAMING_MAX_WAIT_S)

    @functools.cached_property
    def is_streaming(self) -> bool:
        # Cached: the rollout's look-ahead asks this millions of times per benchmark run.
        return self.kind.is_streaming

    @property
    def planning_estimate_s(self) -> float:
        """What a planner may assume: the estimate (never the hidden duration)."""
        if self.estimate_s is None:
            raise WorkloadError(f"job {self.job_id!r}", "estimate_s", "no estimate; run estimates.fill_estimates first")
        return self.estimate_s

    @property
    def work(self) -> float:
        """GPU-seconds of work at speed 1.0 by the estimate: what one job is worth per unit priority."""
        return self.gpus * self.planning_estimate_s

    def with_estimate(self, estimate_s: float) -> Job:
        return replace(self, estimate_s=estimate_s)


def allowed_types(job: Job, cluster: Cluster) -> tuple[GpuType, ...]:
    """GPU types this job may run on, in cluster order."""
    if not job.gpu_types:
        return cluster.gpu_types
    wanted = set(job.gpu_types)
    return tuple(t for t in cluster.gpu_types if t.name in wanted)


def validate_job(job: Job, cluster: Cluster) -> None:
    """Reject what no schedule could ever run: unknown types, gangs larger than any allowed type."""
    subject = f"job {job.job_id!r}"
    unknown = [name for name in job.gpu_types if name not in cluster.names]
    if unknown:
        raise WorkloadError(
            subject, "gpu_types", f"unknown GPU type(s) {unknown}; cluster has {list(cluster.names)}", job.job_id
        )
    types = allowed_types(job, cluster)
    largest = max(t.count for t in types)
    if job.gpus > largest:
        names = "|".join(t.name for t in types)
        raise WorkloadError(
            subject,
            "gpus",
            f"needs {job.gpus} GPUs but no allowed GPU type ({names}) has more than {largest}",
            job.job_id,
        )


def split_valid(jobs: Iterable[Job], cluster: Cluster) -> tuple[list[Job], list[WorkloadError]]:
    """Valid jobs, and one error per job that can never run: a bad job never crashes a run."""
    valid: list[Job] = []
    errors: list[WorkloadError] = []
    seen: set[str] = set()
    for job in jobs:
        try:
            if job.job_id in seen:
                raise WorkloadError(f"job {job.job_id!r}", "job_id", "duplicate job id", job.job_id)
            validate_job(job, cluster)
        except WorkloadError as error:
            errors.append(error)
        else:
            seen.add(job.job_id)
            valid.append(job)
    return valid, errors


def runtime_s(job: Job, duration_s: float, gpu_type: GpuType) -> float:
    """How long ``job`` holds its GPUs on ``gpu_type`` if its work takes ``duration_s`` at speed 1.0.

    Batch work runs d / speed. A streaming job serves for a period of wall-clock time:
    a faster GPU does not shorten it.
    """
    return duration_s if job.is_streaming else duration_s / gpu_type.speed


@dataclass(frozen=True)
class RunningJob:
    """A job that has started and holds its GPUs until it ends."""

    job: Job
    gpu_type: str
    start_s: float


#: A running job past its estimate (or without one) is assumed to end this soon, not to run forever.
OVERDUE_FLOOR_S = 1.0


def expected_end_s(running: RunningJob, gpu_type: GpuType, now_s: float, floor_s: float = OVERDUE_FLOOR_S) -> float:
    """When a running job is expected to give its GPUs back: the one rule every planner, policy and page uses.

    Its start plus its runtime by the estimate on its GPU type (:func:`runtime_s`: batch work
    d / speed, streaming wall-clock), but never earlier than ``floor_s`` from now: an overdue
    job still holds its GPUs, so it ends "soon". ``floor_s`` is the caller's resolution (the
    planner's half grid step); 0 keeps an overdue job's end at now.
    """
    estimate = running.job.estimate_s
    end = running.start_s + runtime_s(running.job, estimate, gpu_type) if estimate is not None else now_s
    return max(end, now_s + floor_s)
