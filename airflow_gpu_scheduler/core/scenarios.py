"""The seven benchmark scenarios: seeded workload generators, each stressing one failure of order.

Every scenario mixes all four kinds of work, on a fixed cluster and horizon. Jobs
carry an actual duration (seen only by the simulator) and, where the team would
declare one, a noisy estimate (log-normal error, ~20 %); recurring jobs without a
declared estimate are estimated from their group's history. ``quick=True`` makes
the same shapes on half the GPUs and half the horizon (for CI).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, JobKind

HOUR = 3600.0
MINUTE = 60.0


@dataclass(frozen=True)
class Scenario:
    name: str
    intent: str
    cluster: Cluster
    jobs: tuple[Job, ...]
    horizon_s: float
    #: The generator's seed (None: not generated, e.g. a replayed file).
    seed: int | None = None

    @property
    def offered_load(self) -> float:
        """GPU-seconds of work submitted in the window (at each job's mean allowed speed) / capacity."""
        work = 0.0
        for job in self.jobs:
            types = [t for t in self.cluster.gpu_types if not job.gpu_types or t.name in job.gpu_types]
            speed = 1.0 if job.is_streaming else sum(t.speed for t in types) / len(types)
            work += job.gpus * (job.duration_s or 0.0) / speed
        return work / (self.cluster.total_gpus * self.horizon_s)


class _Builder:
    """Draws jobs with shared conventions (ids, estimate noise, groups)."""

    def __init__(self, seed: int, name: str) -> None:
        self.rng = random.Random(f"{name}:{seed}")
        self.jobs: list[Job] = []

    def duration(self, low_s: float, high_s: float) -> float:
        """Log-uniform between low and high: many short, some long (as in the Philly and PAI traces)."""
        return round(math.exp(self.rng.uniform(math.log(low_s), math.log(high_s))), 1)

    def add(
        self,
        kind: JobKind,
        submit_s: float,
        gpus: int,
        duration_s: float,
        priority: float,
        *,
        gpu_types: tuple[str, ...] = (),
        deadline_s: float | None = None,
        group: str | None = None,
        declared: bool = True,
        max_wait_s: float | None = None,
    ) -> Job:
        estimate = None
        if declared:
            estimate = round(duration_s * math.exp(self.rng.gauss(0.0, ESTIMATE_ERROR_SIGMA)), 1)
        job = Job(
            job_id=f"{kind.value[:5]}-{len(self.jobs):04d}",
            submit_s=round(submit_s, 1),
            kind=kind,
            gpus=gpus,
            duration_s=duration_s,
            estimate_s=estimate,
            priority=priority,
            gpu_types=gpu_types,
            deadline_s=deadline_s,
            group=group,
            max_wait_s=max_wait_s,
        )
        self.jobs.append(job)
        return job

    # The four kinds with their usual shapes; callers override what their scenario stresses.
    def training(
        self,
        t: float,
        gpus: int | None = None,
        low_h: float = 2,
        high_h: float = 8,
        priority: float | None = None,
        **kw,
    ) -> Job:
        g = gpus or self.rng.choice([4, 8, 8, 16])
        p = priority if priority is not None else self.rng.choice([4, 5, 6])
        return self.add(JobKind.TRAINING, t, g, self.duration(low_h * HOUR, high_h * HOUR), p, **kw)

    def batch_inference(
        self,
        t: float,
        gpus: int | None = None,
        low_m: float = 20,
        high_m: float = 120,
        priority: float | None = None,
        **kw,
    ) -> Job:
        g = gpus or self.rng.choice([1, 2, 2, 4])
        p = priority if priority is not None else self.rng.choice([2, 3, 4])
        kw.setdefault("group", f"batch_inference.model_{self.rng.randrange(6)}")
        kw.setdefault("declared", self.rng.random() < 0.5)
        return self.add(JobKind.BATCH_INFERENCE, t, g, self.duration(low_m * MINUTE, high_m * MINUTE), p, **kw)

    def quantization(
        self,
        t: float,
        gpus: int | None = None,
        low_m: float = 10,
        high_m: float = 40,
        priority: float | None = None,
        **kw,
    ) -> Job:
        g = gpus or self.rng.choice([1, 1, 1, 2])
        p = priority if priority is not None else self.rng.choice([1, 1, 2])
        kw.setdefault("group", f"quantization.model_{self.rng.randrange(8)}")
        kw.setdefault("declared", self.rng.random() < 0.3)
        return self.add(JobKind.QUANTIZATION, t, g, self.duration(low_m * MINUTE, high_m * MINUTE), p, **kw)

    def realtime(
        self, t: float, gpus: int | None = None, low_m: float = 30, high_m: float = 180, priority: float = 8, **kw
    ) -> Job:
        g = gpus or self.rng.choice([1, 1, 2])
        kw.setdefault("group", f"realtime_inference.endpoint_{self.rng.randrange(4)}")
        return self.add(
            JobKind.REALTIME_INFERENCE, t, g, self.duration(low_m * MINUTE, high_m * MINUTE), priority, **kw
        )

    def fill_to_load(
        self,
        cluster: Cluster,
        horizon_s: float,
        load: float,
        draw: Callable[[float], Job],
        start_s: float = 0.0,
        end_s: float | None = None,
    ) -> None:
        """Poisson-like arrivals (uniform times) of ``draw``-n jobs until their work reaches ``load``."""
        end_s = horizon_s if end_s is None else end_s
        target = load * cluster.total_gpus * horizon_s
        work = 0.0
        misses = 0
        while work < target and misses < 50:
            job = draw(self.rng.uniform(start_s, end_s))
            size = job.gpus * (job.duration_s or 0.0)
            if work + size > target * 1.01:
                self.jobs.remove(job)  # would overshoot the intended load: draw again
                misses += 1
                continue
            work += size

    def mix(self, weights: dict[str, float]) -> Callable[[float], Job]:
        kinds = list(weights)
        shares = [weights[k] for k in kinds]

        def draw(t: float) -> Job:
            return getattr(self, self.rng.choices(kinds, shares)[0])(t)

        return draw


def _cluster(scale: float, **types: tuple[int, float]) -> Cluster:
    return Cluster(tuple(GpuType(name, max(1, int(count * scale)), speed) for name, (count, speed) in types.items()))


def steady_mix(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(32, 1.0))
    horizon = 24 * HOUR * s
    b = _Builder(seed, "steady_mix")
    b.fill_to_load(
        cluster, horizon, 0.95, b.mix({"training": 0.12, "batch_inference": 0.3, "quantization": 0.38, "realtime": 0.2})
    )
    return Scenario(
        "steady_mix", "All four kinds arriving steadily at about 95 % offered load.", cluster, tuple(b.jobs), horizon
    )


def gang_starvation(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(64, 1.0))
    horizon = 24 * HOUR * s
    b = _Builder(seed, "gang_starvation")
    big = [g for g in (16, 32, 64) if g <= cluster.total_gpus]
    for i in range(int(8 * s)):
        t = (i + b.rng.random()) * horizon / (8 * s)
        b.training(t, gpus=int(b.rng.choice(big) * s) or 1, low_h=1.5, high_h=4, priority=b.rng.choice([7, 8, 9]))
    small = {
        "quantization": lambda t: b.quantization(t, low_m=20, high_m=60),
        "batch_inference": lambda t: b.batch_inference(t, gpus=b.rng.choice([1, 2]), low_m=30, high_m=120),
        "realtime": lambda t: b.realtime(t, gpus=1),
    }

    def stream(t: float) -> Job:
        return small[b.rng.choices(list(small), [0.5, 0.35, 0.15])[0]](t)

    b.fill_to_load(cluster, horizon, 0.75, stream)
    return Scenario(
        "gang_starvation",
        "16-64 GPU training gangs among a steady stream of 1-2 GPU jobs (apache/airflow#29474).",
        cluster,
        tuple(b.jobs),
        horizon,
    )


def inference_diurnal(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, a100=(48, 1.0))
    horizon = 48 * HOUR * s
    b = _Builder(seed, "inference_diurnal")
    day = 24 * HOUR * s
    # Real-time demand follows a daily curve: peak in the afternoon, trough at night.
    t = 0.0
    peak_rate = 22.0 * s / HOUR  # arrivals per second at the peak
    while t < horizon:
        t += b.rng.expovariate(peak_rate)
        if b.rng.random() < 0.55 + 0.45 * math.sin(2 * math.pi * (t / day - 0.375)):
            b.realtime(t, low_m=20, high_m=90, max_wait_s=120)
    b.fill_to_load(cluster, horizon, 0.55, b.mix({"training": 0.2, "batch_inference": 0.4, "quantization": 0.4}))
    return Scenario(
        "inference_diurnal",
        "Real-time inference follows a daily curve; batch work must fill the troughs without hurting streaming waits.",
        cluster,
        tuple(b.jobs),
        horizon,
    )


def quantization_flood(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(32, 1.0))
    horizon = 12 * HOUR * s
    b = _Builder(seed, "quantization_flood")
    for _ in range(int(300 * s)):
        b.quantization(b.rng.uniform(0, 20 * MINUTE), low_m=10, high_m=40, priority=1)
    for _ in range(int(6 * s) or 1):
        t = b.rng.uniform(30 * MINUTE, 90 * MINUTE)
        b.training(t, gpus=8 if cluster.total_gpus >= 16 else 4, low_h=2 * s, high_h=4 * s, priority=8)
    for _ in range(int(10 * s)):
        t = b.rng.uniform(30 * MINUTE, 90 * MINUTE)
        b.batch_inference(t, gpus=4, low_m=30, high_m=90, priority=6, deadline_s=t + 4 * HOUR * s)
    for _ in range(int(20 * s)):
        b.realtime(b.rng.uniform(0, horizon), low_m=20, high_m=60)
    return Scenario(
        "quantization_flood",
        "Hundreds of short low-priority quantization jobs submitted just before "
        "high-priority training and batch inference.",
        cluster,
        tuple(b.jobs),
        horizon,
    )


def priority_inversion(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(32, 1.0))
    horizon = 24 * HOUR * s
    b = _Builder(seed, "priority_inversion")
    for _ in range(int(8 * s)):
        b.training(
            b.rng.uniform(0, HOUR), gpus=8 if cluster.total_gpus >= 16 else 4, low_h=6 * s, high_h=10 * s, priority=1
        )
    for _ in range(int(12 * s)):
        b.batch_inference(b.rng.uniform(0, HOUR), gpus=2, low_m=120 * s, high_m=300 * s, priority=1)
    later = b.mix({"training": 0.25, "batch_inference": 0.35, "quantization": 0.25, "realtime": 0.15})

    def important(t: float) -> Job:
        job = later(t)
        bump = {JobKind.TRAINING: 9, JobKind.BATCH_INFERENCE: 7, JobKind.QUANTIZATION: 5}.get(job.kind)
        if bump is not None:
            b.jobs[-1] = job = Job(**{**_fields(job), "priority": bump})
        return job

    b.fill_to_load(cluster, horizon, 0.6, important, start_s=HOUR, end_s=0.75 * horizon)
    return Scenario(
        "priority_inversion",
        "Long low-priority jobs arrive first, high-priority jobs later.",
        cluster,
        tuple(b.jobs),
        horizon,
    )


def heterogeneous_fleet(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(16, 2.0), a100=(32, 1.0), l4=(32, 0.4))
    horizon = 24 * HOUR * s
    b = _Builder(seed, "heterogeneous_fleet")
    base = b.mix({"training": 0.15, "batch_inference": 0.3, "quantization": 0.35, "realtime": 0.2})

    def draw(t: float) -> Job:
        job = base(t)
        types: tuple[str, ...]
        if job.kind is JobKind.TRAINING:
            types = ("h100",) if b.rng.random() < 0.4 else ("h100", "a100")
            gpus = min(job.gpus, cluster.gpu_type("h100").count)
        elif job.kind is JobKind.REALTIME_INFERENCE:
            types, gpus = ("l4", "a100"), job.gpus
        elif job.kind is JobKind.QUANTIZATION:
            types, gpus = (("a100", "l4") if b.rng.random() < 0.5 else ()), job.gpus
        else:
            types, gpus = (), job.gpus
        b.jobs[-1] = job = Job(**{**_fields(job), "gpu_types": types, "gpus": gpus})
        return job

    b.fill_to_load(cluster, horizon, 1.1, draw)
    return Scenario(
        "heterogeneous_fleet",
        "Three GPU types with different speeds and compatibility (some jobs can only use one type).",
        cluster,
        tuple(b.jobs),
        horizon,
    )


def deadline_crunch(seed: int = 0, quick: bool = False) -> Scenario:
    s = 0.5 if quick else 1.0
    cluster = _cluster(s, h100=(32, 1.0))
    horizon = 24 * HOUR * s
    b = _Builder(seed, "deadline_crunch")
    base = b.mix({"training": 0.12, "batch_inference": 0.45, "quantization": 0.3, "realtime": 0.13})

    def draw(t: float) -> Job:
        job = base(t)
        if job.kind is JobKind.BATCH_INFERENCE:
            slack = b.rng.uniform(1.5, 6.0) * HOUR * s
            b.jobs[-1] = job = Job(
                **{
                    **_fields(job),
                    "deadline_s": round(t + (job.duration_s or 0) + slack, 1),
                    "priority": b.rng.choice([3, 4, 5]),
                }
            )
        return job

    b.fill_to_load(cluster, horizon, 1.3, draw)
    return Scenario(
        "deadline_crunch", "About 130 % offered load; batch inference with deadlines.", cluster, tuple(b.jobs), horizon
    )


def _fields(job: Job) -> dict:
    return {
        f: getattr(job, f)
        for f in (
            "job_id",
            "submit_s",
            "kind",
            "gpus",
            "duration_s",
            "estimate_s",
            "priority",
            "gpu_types",
            "deadline_s",
            "group",
            "max_wait_s",
        )
    }


SCENARIOS: dict[str, Callable[..., Scenario]] = {
    "steady_mix": steady_mix,
    "gang_starvation": gang_starvation,
    "inference_diurnal": inference_diurnal,
    "quantization_flood": quantization_flood,
    "priority_inversion": priority_inversion,
    "heterogeneous_fleet": heterogeneous_fleet,
    "deadline_crunch": deadline_crunch,
}


def make_scenario(name: str, seed: int = 0, quick: bool = False) -> Scenario:
    try:
        make = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; expected one of {', '.join(SCENARIOS)}") from None
    return replace(make(seed=seed, quick=quick), seed=seed)


#: Log-normal sigma of the declared estimates' error (about 20 %), in the scenarios and in replays.
ESTIMATE_ERROR_SIGMA = 0.2


def with_sampled_estimates(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with an estimate drawn for every job that has none (duration x log-normal error).

    A replayed file usually carries actual durations only; drawing the estimates' error
    per seed lets one workload be judged over several draws of what teams would declare,
    so a result does not hinge on one lucky set of estimates. Estimates the file gives
    are kept.
    """
    rng = random.Random(f"{scenario.name}:estimates:{seed}")
    jobs = []
    for job in scenario.jobs:
        if job.estimate_s is None and job.duration_s is not None:
            job = job.with_estimate(round(max(1.0, job.duration_s * math.exp(rng.gauss(0.0, ESTIMATE_ERROR_SIGMA))), 1))
        jobs.append(job)
    return replace(scenario, jobs=tuple(jobs), seed=seed)
