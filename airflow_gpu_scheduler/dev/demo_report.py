"""What the demo prints: the benchmark's metrics of both runs, the simulator's forecast, and why.

Pure: it takes what Airflow recorded (seconds from the first arrival) and the planner's stored
plans, scores both runs with the benchmark's own :func:`~airflow_gpu_scheduler.core.metrics.evaluate`
over the same window, forecasts the same workload with the core's simulator (the ``airflow`` and
``milp`` policies), and, on every line where Airflow alone comes out ahead, says why from the
same records. No Airflow import.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_gpu_scheduler.core.metrics import PolicyMetrics, evaluate, job_output, streaming_on_time
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.policies import make_policy
from airflow_gpu_scheduler.core.simulate import Outcome, SimResult, simulate
from airflow_gpu_scheduler.core.workload import Job, JobKind
from airflow_gpu_scheduler.dev import demo_workload as workload

#: Resolution of the idle-time accounting (seconds).
STEP_S = 0.25
#: The planning task's settings in ``dags/gpu_scheduler.py`` (a test keeps the two in step), for the forecast.
PLANNER_CONFIG = PlannerConfig(step_s=10.0, horizon_s=2 * 3600.0, time_limit_s=5.0)
CYCLE_S = 5.0
#: The demo's ``[gpu_scheduler] replan_interval_s``: its jobs last tens of seconds, not hours.
REPLAN_S = 10.0


@dataclass(frozen=True)
class Record:
    """One job of one run as Airflow recorded it, in seconds from the first arrival.

    :param submit_s: when its DAG run was triggered.
    :param start_s: when its task instance started (``None``: not yet).
    :param end_s: when it ended (``None``: still running).
    """

    name: str
    submit_s: float
    start_s: float | None
    end_s: float | None


@dataclass(frozen=True)
class PlanTrace:
    """What the planner stored during the planned run (seconds from the first arrival).

    :param created_s: when each plan was made, in order.
    :param streaming_slots: ``(created_s, GPUs)``: the streaming reservation each plan wrote.
    :param reasons: per job, ``(created_s, reason)`` of every plan that held it.
    :param released_s: per job, when a plan first released it.
    :param last_seen_s: when a planning cycle last confirmed a stored plan unchanged.
    """

    created_s: tuple[float, ...] = ()
    streaming_slots: tuple[tuple[float, int], ...] = ()
    reasons: Mapping[str, tuple[tuple[float, str], ...]] = field(default_factory=dict)
    released_s: Mapping[str, float] = field(default_factory=dict)
    #: when a planning cycle last confirmed the newest plan (its heartbeat), if one did.
    last_seen_s: float | None = None


@dataclass(frozen=True)
class RunScore:
    """One column of the table: a run's outcomes and the benchmark's metrics of them."""

    label: str
    result: SimResult
    metrics: PolicyMetrics

    def outcome(self, name: str) -> Outcome:
        return self.result.outcomes[name]

    def wait_s(self, name: str) -> float | None:
        o = self.outcome(name)
        return None if o.start_s is None else o.start_s - o.submit_s

    @property
    def finished(self) -> int:
        return self.metrics.jobs_completed


def score(label: str, records: Sequence[Record], window_s: float = workload.WINDOW_S) -> RunScore:
    """The benchmark's metrics of one measured run over ``[0, window_s]``."""
    by_name = {r.name: r for r in records}
    jobs = workload.jobs({r.name: r.submit_s for r in records})
    outcomes = {}
    for job in jobs:
        r = by_name.get(job.job_id)
        start = r.start_s if r is not None and r.start_s is not None and r.start_s <= window_s else None
        end = r.end_s if r is not None and start is not None and r.end_s is not None and r.end_s <= window_s else None
        outcomes[job.job_id] = Outcome(
            job.job_id, workload.GPU_TYPE if start is not None else None, job.submit_s, start, end
        )
    result = SimResult(label, workload.CLUSTER, tuple(jobs), window_s, outcomes)
    return RunScore(label, result, evaluate(result))


def forecast(
    config: PlannerConfig = PLANNER_CONFIG, cycle_s: float = CYCLE_S, window_s: float = workload.WINDOW_S
) -> tuple[RunScore, RunScore]:
    """The core's simulator on the demo's workload: Airflow's dispatch, and the ``milp`` policy
    planning on the operator's cadence. Tasks start the moment a slot opens for them."""
    jobs = workload.jobs()
    out = []
    for label, policy in (
        ("airflow", make_policy("airflow")),
        ("milp", make_policy("milp", config=config, solve_every_s=cycle_s, min_interval_s=REPLAN_S, release_next=True)),
    ):
        result = simulate(workload.CLUSTER, jobs, policy, window_s)
        out.append(RunScore(label, result, evaluate(result)))
    return out[0], out[1]


# --------------------------------------------------------------------------- the table


def _gang() -> Job:
    return next(j for j in workload.jobs() if j.kind is JobKind.TRAINING)


def _endpoint() -> Job:
    return next(j for j in workload.jobs() if j.is_streaming)


@dataclass(frozen=True)
class Line:
    """One line of the table: the four cells as printed and the numbers they show.

    Which run a line favours is decided on the printed numbers, so the reader and the
    explanations always agree.
    """

    label: str
    cells: tuple[str, ...]
    values: tuple[float, ...]
    higher_is_better: bool

    @property
    def favours_alone(self) -> bool:
        alone, planned = self.values[0], self.values[1]
        return alone > planned if self.higher_is_better else planned > alone


def _wait(run: RunScore, job: Job, budget_s: float | None = None) -> tuple[str, float]:
    """A wait as printed, and its printed value. Against a budget it keeps a decimal: 20.4 s is late for 20 s."""
    digits = 0 if budget_s is None else 1
    wait = run.wait_s(job.job_id)
    if wait is None:  # never started: it waited at least until the window closed, as the benchmark counts it
        censored = round(run.result.horizon_s - run.outcome(job.job_id).submit_s, digits)
        return f"{censored:.{digits}f}+ s", censored
    mark = "" if budget_s is None else (" ok" if wait <= budget_s + 1e-6 else " late")
    return f"{wait:.{digits}f} s{mark}", round(wait, digits)


def lines(alone: RunScore, planned: RunScore, sim_airflow: RunScore, sim_milp: RunScore) -> list[Line]:
    """The table's lines: both measured runs, then the simulator's forecast of each."""
    gang, endpoint = _gang(), _endpoint()
    runs = (alone, planned, sim_airflow, sim_milp)
    budget = endpoint.max_wait_s or 0.0
    gang_waits = [_wait(r, gang) for r in runs]
    rt_waits = [_wait(r, endpoint, budget) for r in runs]
    return [
        Line(
            "GPU utilization",
            tuple(f"{round(r.metrics.utilization * 100)}%" for r in runs),
            tuple(round(r.metrics.utilization * 100) for r in runs),
            True,
        ),
        Line(
            "priority-weighted output",
            tuple(f"{round(r.metrics.weighted_output):,}" for r in runs),
            tuple(round(r.metrics.weighted_output) for r in runs),
            True,
        ),
        Line(
            f"training gang ({gang.gpus} GPUs) wait",
            tuple(c for c, _ in gang_waits),
            tuple(v for _, v in gang_waits),
            False,
        ),
        Line(
            f"real-time wait (budget {budget:.0f} s)",
            tuple(c for c, _ in rt_waits),
            tuple(v for _, v in rt_waits),
            False,
        ),
        Line(
            "jobs finished in the window",
            tuple(f"{r.finished} of {len(r.result.jobs)}" for r in runs),
            tuple(r.finished for r in runs),
            True,
        ),
    ]


def table(rows: Sequence[Line]) -> list[str]:
    """The summary table, one string per line."""
    width = 34
    out = [
        f"{'':{width}}{'measured':^28}{'simulator forecast':^28}",
        f"{'':{width}}{'Airflow alone':>14}{'planned':>14}{'airflow':>14}{'milp':>14}",
    ]
    for row in rows:
        out.append(f"{row.label:{width}}" + "".join(f"{c:>14}" for c in row.cells))
    return out


# --------------------------------------------------------------------------- why Airflow alone is ahead


@dataclass(frozen=True)
class IdleTime:
    """GPU-seconds left idle while some job waited, by cause."""

    gang: float  # the training gang was waiting: GPUs drained (planned) or too few free (alone)
    reserved: float  # kept free by the plan's streaming reservation
    other: float  # between a GPU freeing up and the next start

    @property
    def total(self) -> float:
        return self.gang + self.reserved + self.other


def idle_time(run: RunScore, trace: PlanTrace | None = None) -> IdleTime:
    """Idle GPU-seconds while jobs waited, over the run's window, split by what held them."""
    jobs = run.result.jobs
    horizon = run.result.horizon_s
    gang_id = _gang().job_id
    slots = sorted(trace.streaming_slots) if trace else []
    gang = reserved = other = 0.0
    for i in range(int(horizon / STEP_S)):
        t = (i + 0.5) * STEP_S
        busy = streaming_busy = 0
        waiting: list[str] = []
        for job in jobs:
            o = run.outcome(job.job_id)
            if o.start_s is not None and o.start_s <= t and (o.end_s is None or t < o.end_s):
                busy += job.gpus
                streaming_busy += job.gpus if job.is_streaming else 0
            elif job.submit_s <= t and (o.start_s is None or t < o.start_s):
                waiting.append(job.job_id)
        idle = workload.GPUS - busy
        if not waiting or idle <= 0:
            continue
        if gang_id in waiting:
            gang += idle * STEP_S
            continue
        kept = max((s for at, s in slots if at <= t), default=0) if slots else 0
        held = min(idle, max(0, kept - streaming_busy))
        reserved += held * STEP_S
        other += (idle - held) * STEP_S
    return IdleTime(gang, reserved, other)


def _cadence(trace: PlanTrace, window_s: float = workload.WINDOW_S) -> str:
    times = sorted(trace.created_s)
    if len(times) < 2:
        return f"{len(times)} plan(s) in the window"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    text = (
        f"{len(times)} plans stored in the window (one each time the plan's decisions changed), "
        f"{sorted(gaps)[len(gaps) // 2]:.0f} s apart (at most {max(gaps):.0f} s)"
    )
    last = max(times[-1], trace.last_seen_s if trace.last_seen_s is not None else times[-1])
    if window_s - last > 3 * CYCLE_S:
        text += f", none after {last:.0f} s: no planning task ran (see the gpu_scheduler DAG's runs)"
    return text


def _last_reason(trace: PlanTrace, name: str) -> str | None:
    held = trace.reasons.get(name) or ()
    return held[-1][1] if held else None


def _lost(job: Job, run: RunScore) -> str:
    o = run.outcome(job.job_id)
    if o.start_s is None:
        return "did not start in the window"
    if job.is_streaming and not streaming_on_time(job, o.start_s):
        return f"started {o.start_s - o.submit_s:.0f} s after arriving, past its {job.max_wait_s:.0f} s budget"
    if o.end_s is None:
        return f"started at {o.start_s:.0f} s and finished after the window"
    return f"finished at {o.end_s:.0f} s, after its deadline ({job.deadline_s:.0f} s)"


def why_alone_is_ahead(alone: RunScore, planned: RunScore, trace: PlanTrace, rows: Sequence[Line]) -> list[str]:
    """One explanation for each line of the table on which Airflow alone beats the planned run."""
    out: list[str] = []
    gang, endpoint = _gang(), _endpoint()
    utilization, output, gang_wait, rt_wait, finished = (row.favours_alone for row in rows)
    if utilization:
        mine, theirs = idle_time(planned, trace), idle_time(alone)
        parts = []
        if mine.gang >= 1:
            parts.append(
                f"{mine.gang:.0f} while GPUs drained for the {gang.gpus}-GPU training gang (the price of "
                "starting it while small jobs keep coming; Airflow alone lets them take every GPU that "
                "frees up, and the gang waits)"
            )
        if mine.reserved >= 1:
            parts.append(
                f"{mine.reserved:.0f} kept free for real-time inference (the streaming reservation: once "
                "an endpoint has run, GPUs stay reserved for the next one)"
            )
        if mine.other >= 1:
            parts.append(
                f"{mine.other:.0f} between a GPU freeing up and the next job starting (task start-up, "
                f"and the wait for the planner to look again: {_cadence(trace)})"
            )
        out.append(
            f"GPU utilization: while work waited, the planned run left {mine.total:.0f} GPU-seconds idle and "
            f"Airflow alone {theirs.total:.0f} (task start-up: a job's GPUs sit idle for the seconds its "
            "process takes to start, in both runs). Of the planned run's: " + "; ".join(parts) + "."
        )
    if output:
        lost = []
        for job in alone.result.jobs:
            a = job_output(
                job, alone.outcome(job.job_id).start_s, alone.outcome(job.job_id).end_s, alone.result.horizon_s
            )
            p = job_output(
                job, planned.outcome(job.job_id).start_s, planned.outcome(job.job_id).end_s, planned.result.horizon_s
            )
            if a > p + 1e-6:
                words = job.kind.value.replace("_", " ")
                lost.append((a - p, f"{job.job_id} ({words}, priority {job.priority:g}) {_lost(job, planned)}"))
        lost.sort(reverse=True)
        shown = "; ".join(text for _, text in lost[:4]) + (f"; and {len(lost) - 4} more" if len(lost) > 4 else "")
        out.append(f"priority-weighted output: planned, {shown}.")
    if gang_wait:
        reason = _last_reason(trace, gang.job_id)
        out.append("training gang wait: the plan held it" + (f" ({reason})" if reason else "") + ".")
    if rt_wait:
        rt_planned = planned.wait_s(endpoint.job_id)
        reason = _last_reason(trace, endpoint.job_id)
        released = trace.released_s.get(endpoint.job_id)
        detail = []
        if reason:
            detail.append(f"the plan held it: {reason}")
        kept = max((n for at, n in trace.streaming_slots if at <= endpoint_submit(planned)), default=0)
        if not kept:
            detail.append(
                "no GPU was reserved for real-time inference yet (the reservation is learned from "
                "endpoints that ran before, and none had)"
            )
        if released is not None and rt_planned is not None:
            start = planned.outcome(endpoint.job_id).start_s or 0.0
            after = start - released
            detail.append(
                f"a plan released it {released - endpoint_submit(planned):.0f} s after it arrived, and it "
                + (f"started {after:.0f} s later (task start-up)" if after >= 1 else "started at once")
            )
        elif released is None:
            detail.append("no plan released it in the window")
        out.append(
            f"real-time wait: {rows[3].values[1]:.1f} s planned against {rows[3].values[0]:.1f} s alone; "
            + "; ".join(detail)
            + "."
        )
    if finished:
        small = [
            j
            for j in alone.result.jobs
            if alone.outcome(j.job_id).end_s is not None and planned.outcome(j.job_id).end_s is None
        ]
        kinds = " and ".join(sorted({j.kind.value.replace("_", " ") for j in small}))
        top = max((j.priority for j in small), default=0.0)
        gang_done = planned.outcome(gang.job_id).end_s is not None and alone.outcome(gang.job_id).end_s is None
        out.append(
            f"jobs finished: Airflow alone finished {len(small)} {kinds} job(s) (priority {top:g} or less) "
            "that the planned run had not finished when the window closed: the planned run "
            + (
                f"ran the training gang ({gang.gpus} GPUs x {gang.duration_s:.0f} s, priority {gang.priority:g}) "
                "in their place"
                if gang_done
                else "gave their GPUs to higher-priority work"
            )
            + (", and left GPUs idle as the utilization line explains" if utilization else "")
            + "."
        )
    return out


def endpoint_submit(run: RunScore) -> float:
    return run.outcome(_endpoint().job_id).submit_s
