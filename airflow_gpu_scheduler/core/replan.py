"""When to solve again, and when to keep applying the plan already made: one rule for the simulator and the operator.

A solve costs seconds of CPU and may move promises; applying a plan costs nothing. So
between solves the current plan keeps being applied (jobs become due at their planned
start, and with ``release_next`` the next job of each GPU type waits in its pool for the
GPUs to free), and the plan is solved again only when the jobs seen changed (an arrival,
an end) and either

- a streaming job has no place in the plan (it cannot wait for the next round), or
- GPUs turned idle that the plan did not expect to be (a job ended well before its
  estimate, or new work arrived that fits now) and a waiting job could use them,

or else once ``min_interval_s`` has passed since the last solve. Idle GPUs the plan
expected (draining for a gang) do not trigger a solve: the plan already decided them.

:class:`ReplanRule` holds what the rule must remember between calls (the plan, the jobs
it was made for, the last solve, the expected ends of running jobs). The simulator's
``milp`` policy and the scheduling operator each ask it, call their planner where it
says so, and apply :meth:`ReplanRule.levers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Levers, gpu_type_of_pool, levers_for_plan
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, RunningJob, allowed_types, expected_end_s


@dataclass(frozen=True)
class ReplanDecision:
    """Solve now (``reason`` says why: first, interval, streaming, surprise), or keep applying the plan."""

    solve: bool
    reason: str = ""


class ReplanRule:
    """Answers "solve, or keep applying the current plan?" for a stream of cluster states.

    :param early_s: a running job that ends more than this before its expected end is a
        surprise (its GPUs are idle sooner than the plan assumed); the caller's cadence.
    :param min_interval_s: solve at least this often while the jobs seen keep changing.
    :param release_ahead_s: release jobs planned to start that soon (see ``levers_for_plan``).
    :param release_next: release the next job of each GPU type ahead, behind its pool's slots,
        so a GPU that frees is refilled at once (see ``levers_for_plan``); never while waiting
        work the plan has not seen has a higher priority than a job that would be released ahead.
    :param min_gap_s: solve at most this often: a caller asked at every event (the simulator)
        solves at the operator's cadence, and what made it want to is remembered until then.
    """

    def __init__(
        self,
        early_s: float = 60.0,
        min_interval_s: float = 300.0,
        release_ahead_s: float = 0.0,
        release_next: bool = False,
        min_gap_s: float = 0.0,
    ) -> None:
        self.early_s = early_s
        self.min_interval_s = min_interval_s
        self.release_ahead_s = release_ahead_s
        self.release_next = release_next
        self.min_gap_s = min_gap_s
        self.plan: Plan | None = None
        self._planned_for: frozenset[str] = frozenset()
        self._last_solve_s = float("-inf")
        self._expected_end: dict[str, float] = {}
        self._surprise_pending = False
        self._deferred_to: float | None = None

    # ------------------------------------------------------------------ the rule

    def decide(
        self, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float
    ) -> ReplanDecision:
        """Solve now, or keep applying the plan? Call once per look at the cluster; it remembers what it saw."""
        surprise = self._surprised(cluster, waiting, running, now_s) or self._surprise_pending
        decision = self._decide(cluster, waiting, running, now_s, surprise)
        if decision.solve and decision.reason != "first" and now_s - self._last_solve_s < self.min_gap_s:
            # Not before the next cycle: remember why, and come back then.
            self._surprise_pending, self._deferred_to = surprise, self._last_solve_s + self.min_gap_s
            return ReplanDecision(False)
        return decision

    def _decide(
        self, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float, surprise: bool
    ) -> ReplanDecision:
        changed = _seen(waiting, running) != self._planned_for
        if self.plan is None:
            return ReplanDecision(True, "first")
        if not changed:
            return ReplanDecision(False)
        if now_s - self._last_solve_s >= self.min_interval_s:
            return ReplanDecision(True, "interval")
        planned = self.plan.by_job()
        if any(j.is_streaming and j.job_id not in planned for j in waiting):
            return ReplanDecision(True, "streaming")
        if surprise and self._idle_gpus_fit_held_work(cluster, waiting, running, now_s):
            return ReplanDecision(True, "surprise")
        return ReplanDecision(False)

    def solved(self, plan: Plan, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float) -> None:
        """The caller solved: this plan is applied from now on."""
        self.plan, self._planned_for, self._last_solve_s = plan, _seen(waiting, running), now_s
        self._surprise_pending, self._deferred_to = False, None

    def previous_starts(self) -> dict[str, float] | None:
        """The current plan's starts: the promises the next solve prices in."""
        return {s.job_id: s.start_s for s in self.plan.starts} if self.plan else None

    # ------------------------------------------------------------------ keep applying

    def levers(self, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float) -> Levers:
        """The current plan through Airflow's levers at ``now_s`` (call :meth:`decide` first)."""
        assert self.plan is not None, "no plan yet: decide() says solve first"
        if self.plan.rule:
            # The rollout chose a dispatch rule: it decides again at every look, as its baseline does.
            from airflow_gpu_scheduler.core.planner.live import rule_levers

            return rule_levers(self.plan.rule, cluster, waiting, running, now_s)
        due = levers_for_plan(
            self.plan, cluster, waiting, running, now_s, release_ahead_s=self.release_ahead_s, release_next=False
        )
        if not self.release_next:
            return due
        ahead = levers_for_plan(
            self.plan, cluster, waiting, running, now_s, release_ahead_s=self.release_ahead_s, release_next=True
        )
        # Work the plan has not seen yet may outrank what would be released ahead of its planned
        # start: then only what is due goes, until the next solve places the newcomer.
        released_ahead = [
            j.priority for j in waiting if ahead.assignments[j.job_id].pool != due.assignments[j.job_id].pool
        ]
        known = set(self.plan.by_job()) | set(self.plan.unplanned)
        if released_ahead and any(j.priority > min(released_ahead) for j in waiting if j.job_id not in known):
            return due
        return ahead

    def wake_at_s(self, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float) -> float | None:
        """When to look again even if nothing happens: the next planned start, or the next allowed solve."""
        assert self.plan is not None
        waiting_ids = {j.job_id for j in waiting}
        # A rule followed live acts on changes only; its projected starts are no appointments.
        starts = () if self.plan.rule else self.plan.starts
        wake = min((s.start_s for s in starts if s.start_s > now_s and s.job_id in waiting_ids), default=None)
        if _seen(waiting, running) != self._planned_for:
            retry = self._last_solve_s + self.min_interval_s
            if self._deferred_to is not None and self._deferred_to > now_s:
                retry = min(retry, self._deferred_to)
            wake = retry if wake is None else min(wake, retry)
        return wake

    # ------------------------------------------------------------------ internals

    def _unseen(self, waiting: Sequence[Job]) -> bool:
        known = set(self.plan.by_job()) | set(self.plan.unplanned) if self.plan else set()
        return any(j.job_id not in known for j in waiting)

    def _surprised(self, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float) -> bool:
        """Did GPUs free up earlier than expected, or did new work arrive, since the last call?"""
        by_id = {r.job.job_id: r for r in running}
        early = any(
            job_id not in by_id and end - now_s > (self.early_s or 0.0) for job_id, end in self._expected_end.items()
        )
        arrived = self._unseen(waiting)
        self._expected_end = {
            job_id: expected_end_s(r, cluster.gpu_type(r.gpu_type), now_s) for job_id, r in by_id.items()
        }
        return early or arrived

    def _idle_gpus_fit_held_work(
        self, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float
    ) -> bool:
        """Could a job the plan holds start on GPUs that are idle now, after what the plan releases
        (with ``release_next``, the next job in line takes a GPU that freed early: no surprise)?"""
        assert self.plan is not None
        if self.plan.rule:
            return False  # the rule in force decides about idle GPUs itself, at once
        levers = self.levers(cluster, waiting, running, now_s)
        free = {t.name: t.count for t in cluster.gpu_types}
        for r in running:
            free[r.gpu_type] -= r.job.gpus
        held = []
        for job in waiting:
            pool = levers.assignments[job.job_id].pool
            gpu_type = gpu_type_of_pool(pool)
            if pool == INTAKE_POOL or gpu_type is None:
                held.append(job)
            else:
                free[gpu_type] -= job.gpus
        return any(fastest_fitting_type(job, cluster, free) is not None for job in held)


def _seen(waiting: Sequence[Job], running: Sequence[RunningJob]) -> frozenset[str]:
    return frozenset(j.job_id for j in waiting) | frozenset(r.job.job_id for r in running)


def fastest_fitting_type(job: Job, cluster: Cluster, free: dict[str, int]) -> GpuType | None:
    """Where a reasonable dispatcher would put a job now: the fastest allowed type with room."""
    fitting = [t for t in allowed_types(job, cluster) if free[t.name] >= job.gpus]
    return max(fitting, key=lambda t: (t.speed, free[t.name]), default=None)
