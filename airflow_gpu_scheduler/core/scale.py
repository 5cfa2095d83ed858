"""One planning cycle at growing queue sizes: how the planner's cost and quality scale.

``scale_instance(n)`` builds a queue of ``n`` waiting jobs on a cluster that grows with
it (about 0.5 GPU per queued job, three GPU types of different speeds, some jobs bound
to one type), with jobs already running, as a cycle of a busy shared cluster would see.
``measure_cycle`` plans it once and reports model size, time per phase, the plan's
objective against the greedy plan and against the LP bound of the same (undecomposed)
cycle model, and peak memory. ``gpu-scheduler scale`` prints these per size.
"""

from __future__ import annotations

import math
import random
import resource
import time
from dataclasses import asdict, dataclass

from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, JobKind, RunningJob

HOUR = 3600.0

#: (name, share of the fleet, speed): a slow, a middle and a fast generation.
SCALE_GPU_TYPES = (("l40s", 0.25, 0.6), ("a100", 0.45, 1.0), ("h100", 0.30, 1.6))


@dataclass(frozen=True)
class ScaleInstance:
    cluster: Cluster
    queued: tuple[Job, ...]
    running: tuple[RunningJob, ...]
    now_s: float


def scale_instance(n_jobs: int, seed: int = 0, gpus_per_job: float = 0.5) -> ScaleInstance:
    """``n_jobs`` queued jobs of all four kinds on ~``gpus_per_job`` x n GPUs, a third of them busy."""
    rng = random.Random(f"scale:{n_jobs}:{seed}")
    total = max(48, round(n_jobs * gpus_per_job))
    cluster = Cluster(
        tuple(GpuType(name, max(16, round(total * share)), speed) for name, share, speed in SCALE_GPU_TYPES)
    )
    now = 6 * HOUR
    queued: list[Job] = []
    for i in range(n_jobs):
        r = rng.random()
        if r < 0.15:
            kind, gpus = JobKind.TRAINING, rng.choice([4, 8, 8, 16])
            est, prio = math.exp(rng.uniform(math.log(1 * HOUR), math.log(10 * HOUR))), rng.choice([4, 5, 6, 8])
        elif r < 0.25:
            kind, gpus = JobKind.REALTIME_INFERENCE, rng.choice([1, 1, 2])
            est, prio = rng.uniform(2 * HOUR, 8 * HOUR), rng.choice([6, 8])
        elif r < 0.65:
            kind, gpus = JobKind.BATCH_INFERENCE, rng.choice([1, 2, 2, 4])
            est, prio = math.exp(rng.uniform(math.log(0.3 * HOUR), math.log(3 * HOUR))), rng.choice([2, 3, 4])
        else:
            kind, gpus = JobKind.QUANTIZATION, rng.choice([1, 1, 2])
            est, prio = math.exp(rng.uniform(math.log(0.2 * HOUR), math.log(1.5 * HOUR))), rng.choice([1, 2])
        types: tuple[str, ...] = ()
        u = rng.random()
        if u < 0.10:
            types = ("h100",)
        elif u < 0.35:
            types = ("a100", "h100")
        if kind is JobKind.TRAINING and gpus > 8:
            types = types or ("a100", "h100")
        submit = now - rng.uniform(0, 4 * HOUR)
        deadline = None
        if kind is JobKind.BATCH_INFERENCE and rng.random() < 0.3:
            deadline = now + rng.uniform(2 * HOUR, 12 * HOUR)
        queued.append(
            Job(
                f"q{i:05d}",
                round(submit, 1),
                kind,
                gpus,
                estimate_s=round(est, 1),
                priority=prio,
                gpu_types=types,
                deadline_s=deadline,
            )
        )
    running: list[RunningJob] = []
    for t in cluster.gpu_types:
        busy, k = 0, 0
        while busy < t.count // 3:
            gpus = min(rng.choice([1, 2, 4, 8]), t.count // 3 - busy)
            estimate_s = round(rng.uniform(0.5, 8) * HOUR, 1)
            job = Job(f"r-{t.name}-{k}", 0.0, JobKind.BATCH_INFERENCE, gpus, estimate_s=estimate_s, priority=2)
            running.append(RunningJob(job, t.name, round(now - rng.uniform(0, 0.5) * estimate_s, 1)))
            busy, k = busy + gpus, k + 1
    return ScaleInstance(cluster, tuple(queued), tuple(running), now)


@dataclass(frozen=True)
class ScaleRow:
    """One size's measurements (``peak_rss_mb`` is the whole process's, so measure each size in its own)."""

    jobs: int
    gpus: int
    method: str
    status: str
    variables: int
    constraints: int
    nonzeros: int
    subproblems: int
    build_s: float
    handoff_s: float
    solve_s: float
    wall_s: float
    objective: float
    greedy_objective: float
    vs_greedy_pct: float
    lp_bound: float | None
    lp_bound_s: float
    gap_to_lp_pct: float | None
    full_variables: int
    peak_rss_mb: float

    def to_dict(self) -> dict:
        return asdict(self)


def measure_cycle(n_jobs: int, seed: int = 0, config: PlannerConfig | None = None) -> ScaleRow:
    """Plan one cycle of ``scale_instance(n_jobs)``, then compute the full model's LP bound (not timed in)."""
    inst = scale_instance(n_jobs, seed)
    planner = MilpPlanner(config)
    plan = planner.plan(inst.cluster, inst.queued, inst.running, inst.now_s)
    rep = plan.report
    t0 = time.perf_counter()
    bound, full_vars = planner.lp_bound(inst.cluster, inst.queued, inst.running, inst.now_s)
    bound_s = time.perf_counter() - t0
    gap = None if bound is None else 100.0 * max(0.0, bound - rep.objective) / max(abs(bound), 1e-9)
    vs_greedy = 100.0 * (rep.objective - rep.greedy_objective) / max(abs(rep.greedy_objective), 1e-9)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return ScaleRow(
        n_jobs,
        inst.cluster.total_gpus,
        rep.method,
        rep.status,
        rep.variables,
        rep.constraints,
        rep.nonzeros,
        rep.subproblems,
        rep.build_s,
        rep.handoff_s,
        rep.solve_s,
        rep.wall_s,
        rep.objective,
        rep.greedy_objective,
        vs_greedy,
        bound,
        bound_s,
        gap,
        full_vars,
        peak,
    )


def measure_sizes(sizes: list[int], seed: int = 0, config: PlannerConfig | None = None, on_done=None) -> list[ScaleRow]:
    """``measure_cycle`` for each size, each in a fresh spawned process so ``peak_rss_mb`` is that size's own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    rows = []
    for n in sizes:
        # One worker per size, one size at a time: sizes must not share a process (peak memory)
        # nor compete for the two cores (timings). Spawned, not forked: HiGHS's threads do not survive fork.
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            row = pool.submit(measure_cycle, n, seed, config).result()
        rows.append(row)
        if on_done is not None:
            on_done(row)
    return rows


def write_scale_plot(rows: list[ScaleRow], directory) -> list:
    """Time per phase and gap to the LP bound against queue size."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    xs = [r.jobs for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    prep = [max(0.0, r.wall_s - r.build_s - r.handoff_s - r.solve_s) for r in rows]
    left.stackplot(
        xs,
        prep,
        [r.build_s for r in rows],
        [r.handoff_s for r in rows],
        [r.solve_s for r in rows],
        labels=["candidates + greedy plan", "Pyomo build", "hand-off to HiGHS", "HiGHS solve"],
        alpha=0.8,
    )
    left.plot(xs, [r.wall_s for r in rows], "k.-", label="cycle wall time")
    left.set_xlabel("queued jobs")
    left.set_ylabel("seconds")
    left.set_title("Planning cycle time")
    left.legend(loc="upper left", fontsize=8)
    right.plot(
        xs,
        [r.gap_to_lp_pct if r.gap_to_lp_pct is not None else float("nan") for r in rows],
        "o-",
        label="plan vs LP bound of the full model",
    )
    right.plot(
        xs,
        [
            100.0 * max(0.0, (r.lp_bound or 0) - r.greedy_objective) / max(r.lp_bound or 1, 1e-9)
            if r.lp_bound
            else float("nan")
            for r in rows
        ],
        "s--",
        label="greedy vs LP bound",
    )
    right.set_xlabel("queued jobs")
    right.set_ylabel("gap to LP bound, %")
    right.set_title("Plan quality")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = directory / "scale.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
