"""Run policies side by side on scenarios (or a replayed workload) and compare them.

Each (scenario, seed, policy) simulation and each scenario's upper bound is one
task; tasks run in a small process pool so the benchmark uses every core. Results
are plain data: metrics per policy, every job's outcome, and the bound; and, over
several seeds, the spread of every metric and how ``milp`` fared against the best
other policy run by run (one seed can be won by luck, several rarely are).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from airflow_gpu_scheduler.core.bound import upper_bound
from airflow_gpu_scheduler.core.metrics import PolicyMetrics, evaluate
from airflow_gpu_scheduler.core.planner.highs import use_threads
from airflow_gpu_scheduler.core.policies import YARDSTICKS, make_policy
from airflow_gpu_scheduler.core.scenarios import Scenario
from airflow_gpu_scheduler.core.simulate import Outcome, simulate

#: The metric the policies are ranked by: priority-weighted work done inside the window.
RANKING_METRIC = "weighted_goodput"


@dataclass
class ScenarioReport:
    """One scenario at one seed: every policy's metrics and outcomes, and the bound."""

    scenario: Scenario
    upper_bound: float | None = None
    bound_slot_s: float | None = None
    metrics: dict[str, PolicyMetrics] = field(default_factory=dict)
    outcomes: dict[str, dict[str, Outcome]] = field(default_factory=dict)

    def best_other(self, ours: str = "milp", metric: str = RANKING_METRIC) -> tuple[str, PolicyMetrics] | None:
        """The best policy other than ``ours`` (and the yardsticks) by ``metric``."""
        others = [(name, m) for name, m in self.metrics.items() if name != ours and name not in YARDSTICKS]
        return max(others, key=lambda item: getattr(item[1], metric), default=None)

    def as_dict(self) -> dict[str, object]:
        sc = self.scenario
        return {
            "seed": sc.seed,
            "horizon_s": sc.horizon_s,
            "gpus": sc.cluster.total_gpus,
            "jobs": len(sc.jobs),
            "offered_load": round(sc.offered_load, 4),
            "intent": sc.intent,
            "upper_bound": self.upper_bound,
            "bound_slot_s": self.bound_slot_s,
            "policies": {name: m.as_dict() for name, m in self.metrics.items()},
        }


def _key(scenario: Scenario) -> tuple[str, int | None]:
    return scenario.name, scenario.seed


def _simulate_task(scenario: Scenario, policy: str) -> tuple[tuple, str, PolicyMetrics, dict[str, Outcome]]:
    result = simulate(scenario.cluster, scenario.jobs, make_policy(policy, scenario=scenario), scenario.horizon_s)
    return _key(scenario), policy, evaluate(result), result.outcomes


def _bound_task(scenario: Scenario) -> tuple[tuple, float, float]:
    bound = upper_bound(scenario.cluster, scenario.jobs, scenario.horizon_s)
    return _key(scenario), bound.value, bound.slot_s


def run_benchmark(
    scenarios: Sequence[Scenario],
    policies: Sequence[str],
    *,
    with_bound: bool = True,
    workers: int | None = None,
    on_done: Callable[[str], None] | None = None,
) -> list[ScenarioReport]:
    """Simulate every policy on every scenario; ``on_done`` is called after each task (progress)."""
    reports = {_key(sc): ScenarioReport(sc) for sc in scenarios}
    if len(reports) != len(scenarios):
        raise ValueError("each (scenario, seed) may be run only once per benchmark")
    workers = workers or os.cpu_count() or 1
    # Longest first (LPT), so that no long task starts last and runs alone at the end: the planners
    # (milp, the yardstick) before the rules, each by its queue's size, the yardstick first on a tie.
    slow = {"clairvoyant": 0, "milp": 1}
    tasks = sorted(
        ((sc, p) for p in policies for sc in scenarios),
        key=lambda task: (task[1] not in slow, -len(task[0].jobs), slow.get(task[1], 2)),
    )
    # Fresh worker processes, not forks: HiGHS keeps a thread pool per process, and a child forked
    # from a parent that already solved something inherits a pool without threads and spins forever.
    # One HiGHS thread per worker, for the LP bounds too (the planners ask for one themselves): one
    # worker per core already uses the cores.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=use_threads, initargs=(1,)) as pool:
        futures: dict[Future[Any], str] = {}
        for sc, p in tasks:
            futures[pool.submit(_simulate_task, sc, p)] = f"{sc.name} / {p}"
        if with_bound:
            for sc in scenarios:
                futures[pool.submit(_bound_task, sc)] = f"{sc.name} / upper bound"
        for future in as_completed(futures):
            value = future.result()
            if len(value) == 4:
                key, policy, metrics, outcomes = value
                reports[key].metrics[policy] = metrics
                reports[key].outcomes[policy] = outcomes
            else:
                key, bound, slot = value
                reports[key].upper_bound, reports[key].bound_slot_s = bound, slot
            if on_done:
                on_done(futures[future])
    ordered = []
    for sc in scenarios:
        report = reports[_key(sc)]
        report.metrics = {p: report.metrics[p] for p in policies}
        ordered.append(report)
    return ordered


def schedule_rows(reports: Sequence[ScenarioReport]):
    """(policy, job_id, gpu_type, submit, start, end, scenario, seed) for every job under every policy."""
    for report in reports:
        for policy, outcomes in report.outcomes.items():
            for o in outcomes.values():
                yield (
                    policy,
                    o.job_id,
                    o.gpu_type,
                    o.submit_s,
                    o.start_s,
                    o.end_s,
                    report.scenario.name,
                    report.scenario.seed,
                )


# --------------------------------------------------------------------------- over seeds


@dataclass(frozen=True)
class Spread:
    """A metric over runs: mean, sample standard deviation, lowest and highest."""

    mean: float
    sd: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        xs = [float(v) for v in values if v is not None and math.isfinite(v)]
        if not xs:
            return None
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        return cls(statistics.fmean(xs), sd, min(xs), max(xs), len(xs))

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "sd": self.sd, "low": self.low, "high": self.high, "n": self.n}


#: Metrics summarized over seeds (PolicyMetrics fields that are numbers).
SUMMARY_METRICS = (
    "utilization",
    "weighted_goodput",
    "weighted_output",
    "streaming_p95_wait_s",
    "streaming_on_time_rate",
    "deadline_hit_rate",
    "max_wait_s",
    "plan_p95_s",
)


@dataclass(frozen=True)
class Versus:
    """``ours`` against the best other policy over the runs (seeds) of one scenario.

    ``mean_delta_pct``: ours' mean against the mean of the policy whose mean is best;
    ``wins``: runs where ours scored at least the best other policy *of that run*;
    ``worst_delta_pct``: the run where ours fared worst against that run's best other.
    """

    best_by_mean: str
    mean_delta_pct: float
    wins: int
    runs: int
    worst_delta_pct: float
    worst_seed: int | None


def pct(ours: float, theirs: float) -> float:
    """Relative difference in percent (0 when both are 0; +inf when only ours scored)."""
    if theirs <= 0:
        return 0.0 if ours <= 0 else math.inf
    return (ours / theirs - 1.0) * 100.0


@dataclass
class ScenarioSummary:
    """One scenario over every seed run: spreads per policy and metric, and how ``ours`` compares."""

    name: str
    runs: list[ScenarioReport]
    spreads: dict[str, dict[str, Spread | None]]
    versus: Versus | None
    #: (ours - best other) / (clairvoyant - best other), on the means; None without the yardstick.
    closes_to_clairvoyant: float | None
    upper_bound: Spread | None

    def as_dict(self) -> dict[str, object]:
        return {
            "runs": len(self.runs),
            "seeds": [r.scenario.seed for r in self.runs],
            "policies": {p: {m: (s.as_dict() if s else None) for m, s in ms.items()} for p, ms in self.spreads.items()},
            "versus_best_other": None if self.versus is None else self.versus.__dict__,
            "closes_to_clairvoyant": self.closes_to_clairvoyant,
            "upper_bound": None if self.upper_bound is None else self.upper_bound.as_dict(),
        }


def summarize(
    reports: Sequence[ScenarioReport], ours: str = "milp", metric: str = RANKING_METRIC
) -> list[ScenarioSummary]:
    """Group runs by scenario (in first-seen order) and summarize each over its seeds."""
    groups: dict[str, list[ScenarioReport]] = {}
    for report in reports:
        groups.setdefault(report.scenario.name, []).append(report)
    out = []
    for name, runs in groups.items():
        policies = list(runs[0].metrics)
        spreads = {
            p: {m: Spread.of(getattr(r.metrics[p], m) for r in runs if p in r.metrics) for m in SUMMARY_METRICS}
            for p in policies
        }
        versus = closes = None
        others = [p for p in policies if p != ours and p not in YARDSTICKS]
        if ours in policies and others:
            mean = {p: s.mean if (s := spreads[p][metric]) else 0.0 for p in policies}
            best = max(others, key=lambda p: mean[p])
            deltas = []
            for r in runs:
                rival = r.best_other(ours, metric)
                if rival is not None and ours in r.metrics:
                    deltas.append((pct(getattr(r.metrics[ours], metric), getattr(rival[1], metric)), r.scenario.seed))
            worst = min(deltas, default=(0.0, None))
            versus = Versus(
                best, pct(mean[ours], mean[best]), sum(d >= -1e-9 for d, _ in deltas), len(deltas), worst[0], worst[1]
            )
            if "clairvoyant" in policies:
                room = mean["clairvoyant"] - mean[best]
                closes = (mean[ours] - mean[best]) / room if room > 0 else None
        bound = Spread.of(r.upper_bound for r in runs if r.upper_bound is not None)
        out.append(ScenarioSummary(name, runs, spreads, versus, closes, bound))
    return out
