"""Follow a plan forward through Airflow's dispatch on sampled durations, and score what it does.

This is how the rollout judges a candidate plan: the plan is applied as the operator
applies it between solves (:func:`~airflow_gpu_scheduler.core.levers.levers_for_plan`:
a job is released into its GPU type's pool at its planned start, weighted in plan order;
pools split into batch and streaming slots), and Airflow's rule decides what starts
(:func:`~airflow_gpu_scheduler.core.levers.airflow_dispatch`: by weight, a task that does
not fit is skipped and smaller later ones may pass). Jobs then run for a *sampled*
duration, not their estimate, so a plan that only works when every estimate is right
(a gang promised GPUs that a late job still holds, small jobs slipping in meanwhile)
scores what it would really get. Endpoints arrive at the rate seen recently (a plan
decides now whether GPUs are kept free for them); batch work arrives too when the rollout
asks for it, and is placed as the next solve would rank it: ahead of the work of lower
priority not yet released. Every candidate meets the same arrivals.

The score is the benchmark's weighted goodput (priority x GPUs x work done, pro rata, for
batch jobs that meet their deadline; served seconds for endpoints started within their
wait budget), averaged over a few checkpoints inside the look-ahead so that work done
sooner counts more, and credited pro rata at each checkpoint so the look-ahead's edge is
no cliff that punishes starting a long job.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from airflow_gpu_scheduler.core.estimates import EstimateErrors
from airflow_gpu_scheduler.core.levers import (
    Drain,
    WaitingTask,
    airflow_dispatch,
    endpoint_may_go,
    plan_weight,
    pool_name,
    split_pools,
)
from airflow_gpu_scheduler.core.planner.plan import Plan
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, allowed_types, runtime_s

#: Job id prefix of the endpoints a sampled future brings.
ARRIVAL_PREFIX = "~arrival:"
#: A running job already past every runtime its kind ever showed is assumed to end this
#: fraction of its expected runtime from now (it is overdue: soon, but not at once). This is a
#: sampled future's end, not the planner's expected end (``workload.expected_end_s``), which
#: floors an overdue job at a fixed short delay because it has no errors to sample from.
OVERDUE_FRACTION = 0.1


@dataclass(frozen=True)
class SampledFuture:
    """One draw of the future, shared by every candidate (common random numbers).

    ``running_end``: when each running job ends (absolute seconds); ``ratio``: actual over
    estimated runtime of each waiting job; ``arrivals``: work that arrives meanwhile, in
    submit order: real-time endpoints (their estimate is their runtime) and, if asked for,
    batch jobs; a plan decides now whether GPUs are kept free for them.
    """

    running_end: Mapping[str, float]
    ratio: Mapping[str, float]
    arrivals: tuple[Job, ...] = ()


@dataclass(frozen=True)
class RecentDemand:
    """Work seen arriving recently, and over how long: endpoints that started (``seen``, each with
    its actual runtime as its estimate) and batch jobs submitted (``batch``, as estimated)."""

    seen: tuple[Job, ...] = ()
    window_s: float = 0.0
    batch: tuple[Job, ...] = ()

    def value_rate(self) -> float:
        """Priority-weighted GPU-seconds the endpoints seen brought per second of the window."""
        if not self.seen or self.window_s <= 0:
            return 0.0
        return sum(job.priority * job.work for job in self.seen) / self.window_s

    def sample(self, now_s: float, lookahead_s: float, rng: random.Random, prefix: str) -> tuple[Job, ...]:
        """Poisson arrivals at the recent rate, each a copy of a recently seen endpoint."""
        return _copies(self.seen, self.window_s, now_s, lookahead_s, rng, prefix)

    def sample_batch(
        self, now_s: float, lookahead_s: float, rng: random.Random, prefix: str, above: float = -math.inf
    ) -> tuple[Job, ...]:
        """Poisson arrivals at the recent rate, each a copy of a recently submitted batch job
        (a deadline as far after its submission as the original's); ``above``: only the jobs
        of priority above it, at the rate they alone came."""
        like = tuple(job for job in self.batch if job.priority > above)
        return _copies(like, self.window_s, now_s, lookahead_s, rng, f"{prefix}b")


def _copies(
    like: Sequence[Job], window_s: float, now_s: float, lookahead_s: float, rng: random.Random, prefix: str
) -> tuple[Job, ...]:
    """Copies of ``like``'s jobs arriving as a Poisson process at the rate they came over ``window_s``."""
    if not like or window_s <= 0:
        return ()
    rate = len(like) / window_s
    out: list[Job] = []
    t = now_s
    while True:
        t += rng.expovariate(rate)
        if t >= now_s + lookahead_s:
            return tuple(out)
        job = rng.choice(like)
        deadline = None if job.deadline_s is None or job.is_streaming else t + (job.deadline_s - job.submit_s)
        out.append(_copy(job, job_id=f"{prefix}{len(out)}", submit_s=t, deadline_s=deadline))


def _copy(job: Job, **changes: object) -> Job:
    """``dataclasses.replace`` without re-validating: a sampled arrival is a valid job moved in time
    (its deadline moved with it), and futures make tens of thousands of them per cycle."""
    clone = object.__new__(Job)
    clone.__dict__.update(job.__dict__, **changes)
    return clone


def sample_futures(
    cluster: Cluster,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    errors: EstimateErrors,
    samples: int,
    seed: int = 0,
    demand: RecentDemand | None = None,
    lookahead_s: float = 0.0,
    batch_arrivals: bool = False,
) -> list[SampledFuture]:
    """``samples`` futures; job ``x``'s draw in sample ``k`` depends only on (seed, x, k), so the
    same job keeps its draw from cycle to cycle and decisions do not flicker with the noise.
    ``batch_arrivals``: the futures also bring batch work like that submitted recently (its own
    random stream, so the endpoints drawn are the same either way)."""
    # Batch work no more important than every job already waiting queues behind all of them
    # under every candidate, so it rarely decides between them; leaving it out keeps the
    # futures short on the long queues where it is most of what arrives.
    floor = min((j.priority for j in waiting if not j.is_streaming), default=-math.inf)
    futures = []
    for k in range(samples):
        arrivals = (
            ()
            if demand is None
            else demand.sample(
                now_s, lookahead_s, random.Random(f"{seed}:arrivals:{k}:{now_s:.0f}"), f"{ARRIVAL_PREFIX}{k}:"
            )
        )
        if demand is not None and batch_arrivals:
            batch = demand.sample_batch(
                now_s,
                lookahead_s,
                random.Random(f"{seed}:batch:{k}:{now_s:.0f}"),
                f"{ARRIVAL_PREFIX}{k}:",
                above=floor,
            )
            arrivals = tuple(sorted(arrivals + batch, key=lambda j: j.submit_s))
        ends: dict[str, float] = {}
        for r in running:
            rng = random.Random(f"{seed}:{r.job.job_id}:{k}")
            expected = runtime_s(r.job, r.job.planning_estimate_s, cluster.gpu_type(r.gpu_type))
            elapsed = max(0.0, now_s - r.start_s)
            ratio = errors.sample(r.job.kind, rng, at_least=elapsed / expected if expected > 0 else 0.0)
            ends[r.job.job_id] = (
                now_s + OVERDUE_FRACTION * expected if ratio is None else max(now_s, r.start_s + ratio * expected)
            )
        ratios = {}
        for job in waiting:
            ratio = errors.sample(job.kind, random.Random(f"{seed}:{job.job_id}:{k}"))
            ratios[job.job_id] = 1.0 if ratio is None else ratio
        futures.append(SampledFuture(ends, ratios, arrivals))
    return futures


@dataclass(frozen=True)
class Started:
    """A waiting job the followed plan started: where, when, and for how long (sampled)."""

    job: Job
    gpu_type: str
    start_s: float
    runtime_s: float
    speed: float


def follow_plan(
    plan: Plan,
    cluster: Cluster,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    until_s: float,
    future: SampledFuture,
) -> list[Started]:
    """The waiting jobs that start before ``until_s`` when ``plan`` is applied and jobs take ``future``'s times.

    Releases and pool slots follow :func:`~airflow_gpu_scheduler.core.levers.levers_for_plan`,
    recomputed at every event (the operator re-applies the plan whenever GPUs free up): a
    job is released at its planned start, or earlier when every job before it on its GPU
    type has been released and it fits in GPUs free and unclaimed; the streaming pool keeps
    the plan's reservation, never more than batch work leaves.
    """
    planned = plan.by_job()
    counts = {t.name: t.count for t in cluster.gpu_types}
    speeds = {t.name: t.speed for t in cluster.gpu_types}
    reserve = plan.streaming_reserve
    batch_pool = {name: pool_name(name) for name in counts}
    streaming_pool = {name: pool_name(name, True) for name in counts}
    used = {pool: 0 for name in counts for pool in (batch_pool[name], streaming_pool[name])}
    ends: list[tuple[float, int, str, int]] = []
    for seq, r in enumerate(running):
        pool = pool_name(r.gpu_type, r.job.is_streaming)
        used[pool] += r.job.gpus
        heapq.heappush(ends, (future.running_end[r.job.job_id], seq, pool, r.job.gpus))
    seq = len(running)
    # Per GPU type, the jobs not yet released, in plan order (planned starts are in rank order).
    queue: dict[str, list[Job]] = {name: [] for name in counts}
    for job in sorted((j for j in waiting if j.job_id in planned), key=lambda j: planned[j.job_id].rank):
        queue[planned[job.job_id].gpu_type].append(job)
    head = dict.fromkeys(counts, 0)
    claimed = dict.fromkeys(counts, 0)
    due: dict[str, tuple[Job, str]] = {}
    # What Airflow's dispatch sees of each due job; it does not change while the job waits.
    tasks: dict[str, WaitingTask] = {}
    weight = {job_id: plan_weight(start.rank) for job_id, start in planned.items()}
    start_of = {job_id: start.start_s for job_id, start in planned.items()}
    started: list[Started] = []
    # Endpoints the plan has not placed are released at once, as the levers do; then the future's.
    arrivals = [j for j in waiting if j.is_streaming and j.job_id not in planned] + list(future.arrivals)
    next_arrival = 0
    # Endpoints that arrived where every allowed type is draining for a job: they wait for it.
    deferred: list[Job] = []
    t = now_s

    def free_now(name: str) -> int:
        return counts[name] - used[batch_pool[name]] - used[streaming_pool[name]]

    def unmet(name: str) -> int:
        return max(0, reserve.get(name, 0) - used[streaming_pool[name]])

    def release_in_order(due_only: bool) -> None:
        """Release each type's jobs in plan order: those due, then (``due_only`` False) the next
        ones while they fit in GPUs free and unclaimed, as the levers do between solves."""
        for name, jobs in queue.items():
            while head[name] < len(jobs):
                job = jobs[head[name]]
                room = free_now(name) - claimed[name] - (0 if job.is_streaming else unmet(name))
                if start_of[job.job_id] > t + 1e-6 and (due_only or job.gpus > room):
                    break
                due[job.job_id] = (job, name)
                claimed[name] += job.gpus
                head[name] += 1

    def endpoint_room(name: str, gpus: int) -> tuple[int, Drain | None]:
        """(reserved GPUs free for an endpoint of ``gpus``, the drain it must not delay) on type ``name``."""
        drain = None
        held = next((j for j in islice(queue[name], head[name], None) if not j.is_streaming), None)
        if held is not None and held.gpus > free_now(name) - claimed[name] - unmet(name):
            drain = Drain(max(t, start_of[held.job_id]), held.priority * held.gpus)
        due_rate = max((j.priority * j.gpus for j, g in due.values() if g == name and not j.is_streaming), default=0)
        if due_rate and claimed[name] + gpus > free_now(name):
            drain = Drain.stronger(drain, Drain(t, due_rate))
        return unmet(name) - streaming_claimed(due, name), drain

    def admit(job: Job) -> None:
        """A batch job that arrives: the next solve places it ahead of the not yet released work of
        lower priority on the allowed type with the most room, as the MILP ranks by value."""
        fits = [g for g in allowed_types(job, cluster) if g.count >= job.gpus]
        if not fits:
            return
        name = max(fits, key=lambda g: (free_now(g.name) - claimed[g.name], g.speed)).name
        jobs = queue[name]
        at = next((i for i in range(head[name], len(jobs)) if jobs[i].priority < job.priority), len(jobs))
        jobs.insert(at, job)
        start_of[job.job_id] = t
        # Just above the job it goes before (weights are WEIGHT_STEP apart), so it starts first.
        weight[job.job_id] = weight[jobs[at + 1].job_id] + 1 if at + 1 < len(jobs) else plan_weight(len(planned))

    while True:
        while ends and ends[0][0] <= t + 1e-9:
            _, _, pool, gpus = heapq.heappop(ends)
            used[pool] -= gpus
        while next_arrival < len(arrivals) and arrivals[next_arrival].submit_s <= t + 1e-6:
            if arrivals[next_arrival].is_streaming:
                deferred.append(arrivals[next_arrival])
            else:
                admit(arrivals[next_arrival])
            next_arrival += 1
        release_in_order(due_only=True)
        if deferred:
            # An endpoint that arrives goes first, as the levers release it (see ``endpoint_may_go``),
            # on the allowed type with the most room for it; else it waits for the drain it would delay.
            still = []
            for job in deferred:
                options = [
                    g
                    for g in allowed_types(job, cluster)
                    if endpoint_may_go(job, g, t, *endpoint_room(g.name, job.gpus))
                ]
                if not options:
                    still.append(job)
                    continue
                name = max(options, key=lambda g: (free_now(g.name) - claimed[g.name], g.speed)).name
                due[job.job_id] = (job, name)
                claimed[name] += job.gpus
                weight[job.job_id] = plan_weight(-1)
            deferred = still
        release_in_order(due_only=False)
        if due:
            slots = _pool_slots(counts, reserve, used, due)
            for job_id, (job, gpu_type) in due.items():
                if job_id not in tasks:
                    tasks[job_id] = WaitingTask(
                        job_id,
                        pool_name(gpu_type, job.is_streaming),
                        job.gpus,
                        weight[job_id],
                        job.submit_s,
                        job.group or job_id,
                    )
            for job_id in airflow_dispatch([tasks[job_id] for job_id in due], slots, used):
                job, gpu_type = due.pop(job_id)
                del tasks[job_id]
                pool = pool_name(gpu_type, job.is_streaming)
                used[pool] += job.gpus
                claimed[gpu_type] -= job.gpus
                runtime = runtime_s(
                    job, job.planning_estimate_s * future.ratio.get(job_id, 1.0), cluster.gpu_type(gpu_type)
                )
                started.append(Started(job, gpu_type, t, runtime, speeds[gpu_type]))
                seq += 1
                heapq.heappush(ends, (t + runtime, seq, pool, job.gpus))
        pending = [start_of[jobs[head[name]].job_id] for name, jobs in queue.items() if head[name] < len(jobs)]
        if next_arrival < len(arrivals):
            pending.append(arrivals[next_arrival].submit_s)
        upcoming = [min(pending)] if pending else []
        if ends and (due or pending or deferred):  # an end lets a due job start, or the next in order be released
            upcoming.append(ends[0][0])
        if not upcoming:
            break
        t = max(t, min(upcoming))
        if t > until_s:
            break
    return started


def streaming_claimed(due: Mapping[str, tuple[Job, str]], gpu_type: str) -> int:
    """GPUs of ``gpu_type`` that released endpoints wait for."""
    return sum(job.gpus for job, name in due.values() if job.is_streaming and name == gpu_type)


def _pool_slots(
    counts: Mapping[str, int], reserve: Mapping[str, int], used: Mapping[str, int], due: Mapping[str, tuple[Job, str]]
) -> dict[str, int]:
    """Slots per pool as :func:`~airflow_gpu_scheduler.core.levers.levers_for_plan` sets them."""
    streaming_due = dict.fromkeys(counts, 0)
    for job, gpu_type in due.values():
        if job.is_streaming:
            streaming_due[gpu_type] += job.gpus
    slots = {}
    for name, count in counts.items():
        slots[pool_name(name)], slots[pool_name(name, True)] = split_pools(
            count, reserve.get(name, 0), used[pool_name(name)], used[pool_name(name, True)], streaming_due[name]
        )
    return slots


@dataclass(frozen=True)
class Score:
    """What following a plan earned inside the look-ahead: weighted goodput (averaged over
    checkpoints), then busy GPU-seconds (utilization) as the tie-break."""

    goodput: float
    busy_gpu_s: float


def score(started: Sequence[Started], checkpoints: Sequence[float]) -> Score:
    """Weighted goodput and busy GPU-seconds of ``started``, each averaged over ``checkpoints``."""
    goodput = busy = 0.0
    for s in started:
        job, end = s.job, s.start_s + s.runtime_s
        if job.is_streaming:
            on_time = s.start_s - job.submit_s <= (job.max_wait_s or 0.0) + 1e-6
            rate = job.priority * job.gpus if on_time else 0.0
        else:
            met = job.deadline_s is None or end <= job.deadline_s + 1e-6
            # Work done per second held: GPUs x speed (a slow GPU earns less per second).
            rate = job.priority * job.gpus * s.speed if met else 0.0
        for c in checkpoints:
            held = min(c, end) - s.start_s
            if held > 0:
                goodput += rate * held
                busy += job.gpus * held
    n = max(1, len(checkpoints))
    return Score(goodput / n, busy / n)
