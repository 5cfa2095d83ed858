"""Why is my job waiting: the binding reason for every job a plan holds back, in plain words.

A held job waits for one of a few things, checked in this order on the GPU type the plan
gives it (the first that applies is the one that binds):

1. ``too_big``: no GPU type it may run on has that many GPUs at all.
2. ``busy``: the GPUs of its type are held by running jobs; it fits when they end (``reserved``
   instead when the GPUs they free are promised to a job the plan starts first).
3. ``streaming``: enough GPUs are free, but batch work must leave the streaming reservation free.
4. ``reserved``: enough GPUs are free now, but starting now would collide with a job the
   plan starts earlier (a larger, more valuable gang the GPUs are being kept for).
5. ``later``: it would fit now and collide with nothing; the plan simply starts it later
   (the next cycle may release it sooner).
6. ``horizon``: the plan found no room for it within its horizon.

Computed from the plan and the cluster state alone (the same data the planner saw), so the
reason stored with a plan says why *that* plan held the job.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, allowed_types, expected_end_s, runtime_s


@dataclass(frozen=True)
class WaitReason:
    """Why one job is held: a code for machines, a sentence for people.

    :param code: ``too_big`` | ``busy`` | ``streaming`` | ``reserved`` | ``later`` | ``horizon``.
    :param text: the reason in plain words.
    :param until_s: when the binding obstacle goes away, if known (epoch seconds).
    :param blocking_job: the job the GPUs are kept for (``reserved`` only).
    """

    code: str
    text: str
    until_s: float | None = None
    blocking_job: str | None = None


def clock(t: float) -> str:
    """``14:20:05 UTC``: times in reasons are UTC, like Airflow's default UI timezone."""
    return time.strftime("%H:%M:%S", time.gmtime(t)) + " UTC"


def _kind_words(job: Job) -> str:
    return job.kind.value.replace("_", " ")


def waiting_reasons(
    plan: Plan,
    cluster: Cluster,
    queued: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    release_ahead_s: float = 0.0,
) -> dict[str, WaitReason]:
    """The binding reason for each queued job the plan does not release now.

    Jobs planned to start by ``now_s + release_ahead_s`` are released (they are not held)
    and get no reason.
    """
    planned = plan.by_job()
    jobs = {job.job_id: job for job in queued}
    reserve: Mapping[str, int] = plan.streaming_reserve

    # Running work per GPU type: (gpus, expected end, streaming).
    holding: dict[str, list[tuple[int, float, bool]]] = {name: [] for name in cluster.names}
    for r in running:
        if r.gpu_type not in holding:
            continue
        holding[r.gpu_type].append(
            (r.job.gpus, expected_end_s(r, cluster.gpu_type(r.gpu_type), now_s), r.job.is_streaming)
        )

    lanes = {
        name: _Lane([s for s in planned.values() if s.gpu_type == name and s.job_id in jobs]) for name in cluster.names
    }
    for runs in holding.values():
        runs.sort(key=lambda r: r[1])  # by expected end, for _enough_free_at
    used = {name: sum(g for g, _, _ in runs) for name, runs in holding.items()}
    streaming_used = {name: sum(g for g, _, s in runs if s) for name, runs in holding.items()}
    reasons: dict[str, WaitReason] = {}
    for job in queued:
        start = planned.get(job.job_id)
        if start is not None and start.start_s <= now_s + release_ahead_s + 1e-6:
            continue
        types = allowed_types(job, cluster)
        if not types or max(t.count for t in types) < job.gpus:
            names = "|".join(t.name for t in types) or "none"
            reasons[job.job_id] = WaitReason("too_big", f"no allowed GPU type has {job.gpus} GPUs (allowed: {names})")
            continue
        if start is None:
            names = ", ".join(t.name for t in types)
            reasons[job.job_id] = WaitReason(
                "horizon",
                f"no room for {job.gpus} GPUs on {names} within the planning horizon; it is planned again every cycle",
            )
            continue
        gpu_type = cluster.gpu_type(start.gpu_type)
        name, count = gpu_type.name, gpu_type.count
        runs = holding[name]
        free_now = count - used[name]

        if free_now < job.gpus:
            until = _enough_free_at(runs, count, job.gpus)
            if free_now <= 0:
                text = f"all {count} {name} GPUs are busy until {clock(until)}"
            else:
                text = f"needs {job.gpus} {name} GPUs; only {free_now} of {count} are free until {clock(until)}"
            # Freed GPUs may already be promised: then that job, not the running ones, decides the wait.
            blocker = None
            if start.start_s > until + 1e-6:
                blocker = _blocking_job(job, until, start.start_s, gpu_type, runs, lanes[name], jobs)
            if blocker is not None:
                other = jobs[blocker]
                text += f", and then {_kind_words(other)} job {blocker} (priority {other.priority:g}) goes first"
                reasons[job.job_id] = WaitReason("reserved", text, until_s=planned[blocker].end_s, blocking_job=blocker)
            else:
                reasons[job.job_id] = WaitReason("busy", text, until_s=until)
            continue

        kept = max(0, reserve.get(name, 0) - streaming_used[name])
        if not job.is_streaming and free_now - kept < job.gpus:
            reasons[job.job_id] = WaitReason(
                "streaming",
                f"held for the streaming reservation: {kept} of the {free_now} free {name} GPUs "
                "are kept for real-time inference",
            )
            continue

        blocker = _blocking_job(job, now_s, start.start_s, gpu_type, runs, lanes[name], jobs)
        if blocker is not None:
            other = jobs[blocker]
            other_start = planned[blocker].start_s
            when = "now" if other_start <= now_s + 1e-6 else f"at {clock(other_start)}"
            reasons[job.job_id] = WaitReason(
                "reserved",
                f"{name} GPUs reserved for {_kind_words(other)} job {blocker} "
                f"(priority {other.priority:g}), which starts {when}",
                until_s=planned[blocker].end_s,
                blocking_job=blocker,
            )
            continue
        reasons[job.job_id] = WaitReason(
            "later",
            f"could start now, but the plan starts it at {clock(start.start_s)}; "
            "the next planning cycle may release it sooner",
            until_s=start.start_s,
        )
    return reasons


def _enough_free_at(runs: Sequence[tuple[int, float, bool]], count: int, gpus: int) -> float:
    """When running jobs (sorted by expected end) have released enough GPUs for ``gpus``."""
    used = sum(g for g, _, _ in runs)
    for g, end, _ in runs:
        used -= g
        if count - used >= gpus:
            return end
    return max((end for _, end, _ in runs), default=0.0)


class _Lane:
    """The planned starts on one GPU type, sorted by start, for range look-ups."""

    def __init__(self, starts: Sequence) -> None:
        self.starts = sorted(starts, key=lambda s: s.start_s)
        self.keys = [s.start_s for s in self.starts]

    def overlapping(self, at_s: float, until_s: float) -> list:
        """Starts at or before ``until_s`` that are still running after ``at_s``."""
        first_later = bisect.bisect_right(self.keys, at_s)
        # Started by at_s: only those planned near ``at_s`` are still running; walk back from it.
        earlier = [s for s in self.starts[:first_later] if s.end_s > at_s]
        return earlier + self.starts[first_later : bisect.bisect_right(self.keys, until_s)]


def _blocking_job(
    job: Job,
    at_s: float,
    planned_start_s: float,
    gpu_type,
    runs: Sequence[tuple[int, float, bool]],
    lane: _Lane,
    jobs: Mapping[str, Job],
) -> str | None:
    """The planned job that starting ``job`` at ``at_s`` on its GPU type would collide with.

    Sweeps the usage of the type over the job's run if it started at ``at_s`` (running jobs, and
    the jobs the plan starts no later than this one); at the first point where the GPUs would be
    oversubscribed, the job running there that the plan put first (earliest, then highest
    priority) is the one the GPUs are kept for.
    """
    end = at_s + runtime_s(job, job.planning_estimate_s, gpu_type)
    others = [
        (s.start_s, s.end_s, jobs[s.job_id])
        for s in lane.overlapping(at_s, min(planned_start_s, end - 1e-9))
        if s.job_id != job.job_id and s.job_id in jobs
    ]
    used = sum(g for g, run_end, _ in runs if run_end > at_s)
    used += sum(other.gpus for start, _, other in others if start <= at_s)
    events = [(run_end, -g) for g, run_end, _ in runs if at_s < run_end < end]
    for start, stop, other in others:
        if start > at_s:
            events.append((start, other.gpus))
        if stop < end:
            events.append((stop, -other.gpus))
    events.sort()  # at equal times ends (negative) come before starts
    point = at_s
    over = used + job.gpus > gpu_type.count
    for t, delta in events:
        if over:
            break
        used += delta
        if delta > 0 and used + job.gpus > gpu_type.count:
            point, over = t, True
    if not over:
        return None
    active = [
        (start, -other.priority, other.job_id) for start, stop, other in others if max(start, at_s) <= point < stop
    ]
    return min(active)[2] if active else None
