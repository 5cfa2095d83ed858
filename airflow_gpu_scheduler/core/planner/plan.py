"""What a planning cycle takes (its knobs) and gives (a plan and how it was found)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of one planning cycle.

    :param step_s: spacing of the start grid near now.
    :param fine_points: how many grid points use ``step_s`` before spacing doubles.
    :param horizon_s: how far ahead to plan (extended to fit the longest queued job).
    :param time_limit_s: wall-clock budget of one cycle, model building included; the
        best plan found by then is used (at worst the greedy plan).
    :param mip_rel_gap: stop once the plan is proven this close to the bound.
    :param max_milp_vars: the largest MILP solved at once; a bigger cycle is improved
        window by window (see :func:`~airflow_gpu_scheduler.core.planner.windows.improve`),
        so its cost grows gently.
    :param window_vars: the size of one window's sub-MILP: small enough that HiGHS proves
        it in a fraction of a second, so many windows fit in one budget.
    :param window_time_limit_s: solver time per window, so one hard window cannot eat
        the whole budget.
    :param window_mip_rel_gap: gap target of a window. Tighter than ``mip_rel_gap``: a
        window's bound includes work it cannot improve, so a loose target stops at once.
    :param max_nodes: branch-and-bound nodes per MILP. Work limits, unlike time limits,
        give the same plan on a busy and an idle machine (the time limits stay as a guard).
    :param max_window_passes: sweeps of the windowed search over the queue.
    :param commit_horizon_s: a batch job the previous plan started within this much of now,
        and for which GPUs already sit idle, keeps that start unless the new plan gains more
        than ``commit_bonus`` of its value by moving it (see
        :func:`~airflow_gpu_scheduler.core.planner.objective.commitment`).
    :param commit_bonus: what breaking such a commitment costs, as a fraction of the job's value.
    :param reserve_penalty: None: the streaming reservation is hard (batch work never uses it).
        A number: it is soft, and batch work may use a reserved GPU for this multiple of the
        streaming value it is expected to turn away (the recent endpoints' value per second,
        shared over the reserved GPUs no endpoint holds; see
        :class:`~airflow_gpu_scheduler.core.planner.grid.Capacity`).
    :param threads: HiGHS's threads. One, because its MIP search barely gains from more, the extra
        ones spin on CPU that other work shares, more do not survive a fork, and with one the same
        cycle gives the same plan on any machine (see
        :func:`~airflow_gpu_scheduler.core.planner.highs.use_threads`).
    """

    step_s: float = 300.0
    fine_points: int = 12
    horizon_s: float = 24 * 3600.0
    time_limit_s: float = 2.0
    mip_rel_gap: float = 0.02
    max_milp_vars: int = 3000
    window_vars: int = 1000
    window_time_limit_s: float = 1.0
    window_mip_rel_gap: float = 0.002
    max_nodes: int = 1000
    max_window_passes: int = 3
    commit_horizon_s: float = 3600.0
    commit_bonus: float = 0.5
    reserve_penalty: float | None = None
    use_solver: bool = True
    threads: int = 1


@dataclass(frozen=True)
class PlannedStart:
    """One job's place in the plan."""

    job_id: str
    gpu_type: str
    start_s: float
    end_s: float
    rank: int
    streaming: bool


@dataclass(frozen=True)
class SolveReport:
    """How one cycle was solved: enough to judge the plan's quality.

    ``chosen``: which candidate plan the cycle applies (``milp``, or a base heuristic's plan
    that the rollout found better; :mod:`~airflow_gpu_scheduler.core.planner.rollout`), and
    ``candidates`` the expected score of each candidate it compared.
    """

    method: str  # "milp" | "milp-windows" | "greedy" | "empty"
    status: str
    objective: float
    greedy_objective: float
    bound: float | None
    gap: float | None
    wall_s: float
    build_s: float = 0.0
    solve_s: float = 0.0
    handoff_s: float = 0.0
    subproblems: int = 0
    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    message: str = ""
    chosen: str = ""
    candidates: Mapping[str, float] = field(default_factory=dict)
    rollout_s: float = 0.0


@dataclass(frozen=True)
class Plan:
    """A plan made at ``now_s``: when and where each queued job should start.

    ``rule``: the name of a dispatch rule (see :mod:`~airflow_gpu_scheduler.core.planner.live`)
    that decides what starts until the next solve, at every change, as the baseline it names
    would; ``starts`` are then that rule's projection on the estimates, shown for review.
    Empty: the starts themselves are applied.
    """

    now_s: float
    starts: tuple[PlannedStart, ...]
    unplanned: tuple[str, ...]
    report: SolveReport
    streaming_reserve: Mapping[str, int] = field(default_factory=dict)
    rule: str = ""

    def by_job(self) -> dict[str, PlannedStart]:
        return {s.job_id: s for s in self.starts}
