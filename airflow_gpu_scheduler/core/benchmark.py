"""Run policies side by side on scenarios (or a replayed workload) and compare them.

Each (scenario, policy) simulation and each scenario's upper bound is one task;
tasks run in a small process pool so the benchmark uses both cores. Results are
plain data: metrics per policy, every job's outcome, and the bound.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from airflow_gpu_scheduler.core.bound import upper_bound
from airflow_gpu_scheduler.core.metrics import PolicyMetrics, evaluate
from airflow_gpu_scheduler.core.policies import make_policy
from airflow_gpu_scheduler.core.scenarios import Scenario
from airflow_gpu_scheduler.core.simulate import Outcome, simulate


@dataclass
class ScenarioReport:
    scenario: Scenario
    upper_bound: float | None = None
    bound_slot_s: float | None = None
    metrics: dict[str, PolicyMetrics] = field(default_factory=dict)
    outcomes: dict[str, dict[str, Outcome]] = field(default_factory=dict)

    def best_other(self, ours: str = "milp") -> tuple[str, PolicyMetrics] | None:
        others = [(name, m) for name, m in self.metrics.items() if name not in (ours, "fifo")]
        return max(others, key=lambda item: item[1].weighted_output, default=None)

    def as_dict(self) -> dict[str, object]:
        sc = self.scenario
        return {
            "horizon_s": sc.horizon_s,
            "gpus": sc.cluster.total_gpus,
            "jobs": len(sc.jobs),
            "offered_load": round(sc.offered_load, 4),
            "intent": sc.intent,
            "upper_bound": self.upper_bound,
            "bound_slot_s": self.bound_slot_s,
            "policies": {name: m.as_dict() for name, m in self.metrics.items()},
        }


def _simulate_task(scenario: Scenario, policy: str) -> tuple[str, str, PolicyMetrics, dict[str, Outcome]]:
    result = simulate(scenario.cluster, scenario.jobs, make_policy(policy), scenario.horizon_s)
    return scenario.name, policy, evaluate(result), result.outcomes


def _bound_task(scenario: Scenario) -> tuple[str, float, float]:
    bound = upper_bound(scenario.cluster, scenario.jobs, scenario.horizon_s)
    return scenario.name, bound.value, bound.slot_s


def run_benchmark(
    scenarios: Sequence[Scenario],
    policies: Sequence[str],
    *,
    with_bound: bool = True,
    workers: int | None = None,
    on_done: Callable[[str], None] | None = None,
) -> list[ScenarioReport]:
    """Simulate every policy on every scenario; ``on_done`` is called after each task (progress)."""
    reports = {sc.name: ScenarioReport(sc) for sc in scenarios}
    workers = workers or min(2, os.cpu_count() or 1)
    # The slow tasks (milp, bounds) first, so the pool stays busy to the end.
    tasks = [(sc, p) for p in sorted(policies, key=lambda p: p != "milp") for sc in scenarios]
    # Fresh worker processes, not forks: HiGHS keeps a thread pool per process, and a child forked
    # from a parent that already solved something inherits a pool without threads and spins forever.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {}
        for sc, p in tasks:
            futures[pool.submit(_simulate_task, sc, p)] = f"{sc.name} / {p}"
        if with_bound:
            for sc in scenarios:
                futures[pool.submit(_bound_task, sc)] = f"{sc.name} / upper bound"
        for future in as_completed(futures):
            value = future.result()
            if len(value) == 4:
                name, policy, metrics, outcomes = value
                reports[name].metrics[policy] = metrics
                reports[name].outcomes[policy] = outcomes
            else:
                name, bound, slot = value
                reports[name].upper_bound, reports[name].bound_slot_s = bound, slot
            if on_done:
                on_done(futures[future])
    ordered = []
    for sc in scenarios:
        report = reports[sc.name]
        report.metrics = {p: report.metrics[p] for p in policies}
        ordered.append(report)
    return ordered


def schedule_rows(reports: Sequence[ScenarioReport]):
    """(policy, job_id, gpu_type, submit, start, end, scenario) for every job under every policy."""
    for report in reports:
        for policy, outcomes in report.outcomes.items():
            for o in outcomes.values():
                yield policy, o.job_id, o.gpu_type, o.submit_s, o.start_s, o.end_s, report.scenario.name
