"""The scheduling operator: collect queued GPU work, plan it, apply the plan, report.

The operator owns the run's loop (a cheap look every ``watch_every_s``, a full cycle when GPU
work changed); one cycle is :func:`~airflow_gpu_scheduler.operators.cycle.schedule_cycle`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.cycle.cluster_config import cluster_from_file, cluster_from_variable
from airflow_gpu_scheduler.cycle.loop import PlanningLoop
from airflow_gpu_scheduler.cycle.records import decisions_changed, levers_differ, plan_record, predict
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook
from airflow_gpu_scheduler.operators.cycle import (
    FIRST_LOCK_WAIT_S,
    KEEP_NEWEST_PLANS,
    LOCK_RETRY_S,
    configured_planner,
    locked_cycle,
    locked_out_summary,
    prune_plans,
    schedule_cycle,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

# The cycle's steps lived in this module before they got rooms of their own: still importable from here.
__all__ = [
    "FIRST_LOCK_WAIT_S",
    "KEEP_NEWEST_PLANS",
    "LOCK_RETRY_S",
    "GpuScheduleOperator",
    "PlanningLoop",
    "configured_planner",
    "decisions_changed",
    "levers_differ",
    "locked_cycle",
    "locked_out_summary",
    "plan_record",
    "predict",
    "prune_plans",
    "schedule_cycle",
]


class GpuScheduleOperator(BaseOperator):
    """
    Plans the order in which queued GPU work starts, and makes Airflow's scheduler follow it.

    Each cycle collects the waiting and running GPU task instances from the metadata database
    and asks the core's re-planning rule (:class:`~airflow_gpu_scheduler.core.replan.ReplanRule`,
    the same one the simulator's ``milp`` policy follows) whether to solve again with the MILP
    planner (Pyomo + HiGHS, greedy fallback) or to keep applying the current plan. It applies the
    plan through Airflow's own levers in one transaction: task instances whose planned start has come
    are released, moved from the intake pool to the pool and the executor queue of their planned GPU
    type with priority weights in plan order (so on the CeleryExecutor only that type's workers take
    them), and so is the
    next job of each GPU type, which waits in its pool until enough GPUs free up (the pool's slots
    are the gate, so a freed GPU is refilled by Airflow's next scheduler loop and nothing smaller
    overtakes it); the others stay held in the intake pool, and each GPU-type pool gets as many
    slots as the type has GPUs (minus the streaming reservation).

    Between cycles the task looks at the GPU task instances every ``watch_every_s`` with one
    cheap query; a GPU task that arrives, starts or ends starts a cycle at once. A plan is stored
    in the provider's tables (``gpu_sched_plan``, ``gpu_sched_plan_job``) only when its decisions
    change; a cycle that changes nothing confirms the stored plan instead (the planner's heartbeat),
    and plans older than ``[gpu_scheduler] plan_retention_days`` are deleted. The last cycle's
    summary is returned (XCom ``return_value``), and each waiting task instance gets its plan as its
    Airflow note (never over a person's; :mod:`~airflow_gpu_scheduler.plan_notes`). With nothing
    waiting, a cycle writes no plan, only the notes of tasks that started.

    Arguments left unset come from the ``[gpu_scheduler]`` settings (``airflow config list
    --section gpu_scheduler``), read when the task runs.

    :param gpu_scheduler_conn_id: connection to Airflow's metadata database
        (see :class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`;
        default ``[gpu_scheduler] metadata_conn_id``).
    :param cluster_file: path of a cluster JSON file (templated); if not set, the Airflow
        Variable named by ``cluster_variable`` is read.
    :param cluster_variable: Airflow Variable holding the cluster JSON (default ``[gpu_scheduler] cluster_variable``).
    :param planner_config: planner knobs (grid step, horizon, HiGHS time limit, gap target); default
        ``[gpu_scheduler] planning_step_s``, ``planning_horizon_s`` and ``planning_budget_s``.
    :param repeat_for_s: keep planning for this many seconds (0: one cycle), so a DAG
        scheduled every minute keeps the loop running for most of the minute (templated, e.g.
        ``"{{ dag_run.conf.get('repeat_for_s', 0) }}"``).
    :param repeat_every_s: seconds between full cycles when nothing happens
        (default ``[gpu_scheduler] cycle_interval_s``).
    :param watch_every_s: seconds between the cheap looks for GPU work that arrived, started or
        ended (default ``[gpu_scheduler] watch_interval_s``).
    :param replan_interval_s: solve again at least this often while the work keeps changing
        (default ``[gpu_scheduler] replan_interval_s``).
    """

    template_fields: Sequence[str] = ("cluster_file", "repeat_for_s")
    ui_color = "#d6f5e3"

    def __init__(
        self,
        *,
        gpu_scheduler_conn_id: str | None = None,
        cluster_file: str | None = None,
        cluster_variable: str | None = None,
        planner_config: PlannerConfig | None = None,
        repeat_for_s: float | str = 0.0,
        repeat_every_s: float | None = None,
        watch_every_s: float | None = None,
        replan_interval_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (
            ("repeat_every_s", repeat_every_s),
            ("watch_every_s", watch_every_s),
            ("replan_interval_s", replan_interval_s),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id
        self.cluster_file = cluster_file
        self.cluster_variable = cluster_variable
        self.planner_config = planner_config
        self.repeat_for_s = repeat_for_s
        self.repeat_every_s = repeat_every_s
        self.watch_every_s = watch_every_s
        self.replan_interval_s = replan_interval_s

    def load_cluster(self) -> Cluster:
        """The cluster from ``cluster_file`` if given, else from the Airflow Variable."""
        if self.cluster_file:
            return cluster_from_file(self.cluster_file)
        return cluster_from_variable(self.cluster_variable or config.get_str("cluster_variable"))

    def execute(self, context: Context) -> dict[str, Any]:
        cluster = self.load_cluster()
        hook = GpuSchedulerMetadataHook(self.gpu_scheduler_conn_id)
        repeat_every_s = self.repeat_every_s or config.get_float("cycle_interval_s")
        watch_every_s = min(self.watch_every_s or config.get_float("watch_interval_s"), repeat_every_s)
        loop = PlanningLoop(
            RolloutPlanner(self.planner_config or configured_planner()),
            early_s=repeat_every_s,
            replan_interval_s=self.replan_interval_s or config.get_float("replan_interval_s"),
        )
        origin = (context["dag_run"].dag_id, context["dag_run"].run_id) if context.get("dag_run") else (None, None)
        try:
            repeat_for_s = float(self.repeat_for_s)
        except (TypeError, ValueError):
            raise ValueError(f"repeat_for_s must be a number of seconds, got {self.repeat_for_s!r}") from None
        if not math.isfinite(repeat_for_s) or repeat_for_s < 0:
            raise ValueError(f"repeat_for_s must be >= 0, got {self.repeat_for_s!r}")
        stop_at = time.monotonic() + repeat_for_s
        cycles = 0
        summary: dict[str, Any] = {}
        seen: tuple | None = None
        next_cycle = time.monotonic()
        try:
            while True:
                # One cheap look; a full cycle only when GPU work changed, the plan has a job due,
                # or the heartbeat is due. Read before the cycle, so a change during it is seen next time.
                look = hook.gpu_work_fingerprint()
                if look != seen or time.monotonic() >= next_cycle or loop.due(time.time()):
                    # One planner at a time: a cycle that finds the lock taken is skipped, and a run
                    # that cannot take it at its first cycle (another run is planning) ends cleanly.
                    planned = locked_cycle(
                        hook,
                        loop,
                        cluster,
                        origin,
                        self.log,
                        wait_s=0.0 if cycles else FIRST_LOCK_WAIT_S,
                        prune=not cycles,
                    )
                    if planned is not None:
                        summary = planned
                        cycles += 1
                        seen, next_cycle = look, time.monotonic() + repeat_every_s
                    elif not cycles:
                        self.log.warning(
                            "Another planning run holds the planner lock; this run exits without "
                            "planning (that run keeps planning, nothing is wrong)."
                        )
                        return {**locked_out_summary(), "cycles": 0}
                    else:
                        self.log.info("Planner lock busy (the fail-open watchdog or another run); cycle skipped.")
                if time.monotonic() + watch_every_s > stop_at:
                    break
                time.sleep(watch_every_s)
        finally:
            hook.close()
        return {**summary, "cycles": cycles, "solves": loop.solves}
