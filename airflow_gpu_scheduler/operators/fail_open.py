"""The fail-open watchdog: releases held GPU work to Airflow's own order when the planner is down."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.cycle.cluster_config import cluster_from_file, cluster_from_variable
from airflow_gpu_scheduler.cycle.fail_open import fail_open_reason, fail_open_record, fail_open_release
from airflow_gpu_scheduler.db.records import from_json
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook
from airflow_gpu_scheduler.schema_check import FAIL_OPEN, check_metadata_schema

if TYPE_CHECKING:
    from airflow.sdk import Context

#: StatsD-style metric names (Airflow's own StatsLogger, so they go wherever Airflow's metrics go).
METRIC_FAIL_OPEN = "gpu_scheduler.fail_open"
METRIC_RELEASED = "gpu_scheduler.fail_open.released"
METRIC_PLAN_AGE = "gpu_scheduler.plan_age_s"


def _stats():
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - older task SDKs
        from airflow.stats import Stats
    return Stats


class GpuFailOpenOperator(BaseOperator):
    """
    Watchdog: if the planner has applied no plan for ``fail_open_after_s`` while GPU work waited
    that long, move every held GPU task instance to a pool of a GPU type it may run on with
    the priority weight Airflow itself would give it, and open those pools, so GPU work keeps
    flowing in Airflow's default order. The next plan the planner applies takes over again.

    It needs only the metadata connection and the cluster (when the cluster cannot be read, the
    cluster of the last stored plan is used), never the solver, so it keeps working when the
    planning task crashes, hangs or is paused. Run it in a DAG of its own. It takes the
    planners' lock, so it never interleaves with a planning cycle; if a cycle is running, the
    planner is alive and the watchdog does nothing.

    Each release logs a warning, increments the metric ``gpu_scheduler.fail_open`` (and
    ``gpu_scheduler.fail_open.released`` by the number released), and records a plan row with
    method ``fail_open`` that the UI shows as a banner.

    :param gpu_scheduler_conn_id: connection to Airflow's metadata database
        (default ``[gpu_scheduler] metadata_conn_id``).
    :param fail_open_after_s: how long without a plan (and with work waiting) before releasing
        (default ``[gpu_scheduler] fail_open_after_s``).
    :param cluster_file: path of a cluster JSON file (templated); else the Variable is read.
    :param cluster_variable: Airflow Variable holding the cluster JSON (default ``[gpu_scheduler] cluster_variable``).
    """

    template_fields: Sequence[str] = ("cluster_file",)
    ui_color = "#fde2c8"

    def __init__(
        self,
        *,
        gpu_scheduler_conn_id: str | None = None,
        fail_open_after_s: float | None = None,
        cluster_file: str | None = None,
        cluster_variable: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if fail_open_after_s is not None and not fail_open_after_s > 0:
            raise ValueError(f"fail_open_after_s must be > 0, got {fail_open_after_s!r}")
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id
        self.fail_open_after_s = None if fail_open_after_s is None else float(fail_open_after_s)
        self.cluster_file = cluster_file
        self.cluster_variable = cluster_variable

    def load_cluster(self, hook: GpuSchedulerMetadataHook) -> Cluster:
        try:
            return (
                cluster_from_file(self.cluster_file)
                if self.cluster_file
                else cluster_from_variable(self.cluster_variable or config.get_str("cluster_variable"))
            )
        except Exception as error:  # a broken config must not keep GPU work held
            plans = hook.get_plans(limit=1)
            if not plans:
                raise
            self.log.warning("Cluster config unreadable (%s); using the cluster of plan %s.", error, plans[0]["id"])
            return Cluster.from_dict(from_json(plans[0]["cluster"]))

    def execute(self, context: Context) -> dict[str, Any]:
        hook = GpuSchedulerMetadataHook(self.gpu_scheduler_conn_id)
        origin = (context["dag_run"].dag_id, context["dag_run"].run_id) if context.get("dag_run") else (None, None)
        try:
            after_s = self.fail_open_after_s or config.get_float("fail_open_after_s")
            return release_if_planner_down(hook, after_s, lambda: self.load_cluster(hook), origin, log=self.log)
        finally:
            hook.close()


def release_if_planner_down(
    hook: GpuSchedulerMetadataHook,
    after_s: float,
    load_cluster,
    origin: tuple[str | None, str | None] = (None, None),
    log: Any = None,
    now_s: float | None = None,
) -> dict[str, Any]:
    """One watchdog check; returns a JSON-serializable summary, its ``action`` one of:

    - ``locked``: a planning cycle holds the planner lock, so the planner is alive;
    - ``alive``: a plan is recent enough, or nothing has waited long enough;
    - ``failing_open``: still failed open, and nothing new to release (nothing recorded);
    - ``released``: held work was handed to Airflow's own order and a ``fail_open`` plan recorded.
    """
    with hook.planning_lock() as mine:
        if not mine:
            if log:
                log.info("A planning cycle holds the planner lock: the planner is alive; nothing to do.")
            return {"action": "locked", "released": 0}
        check_metadata_schema(hook, FAIL_OPEN)
        state = hook.collect_fail_open_state(now_s)
        if state.last_plan_s is not None:
            _stats().gauge(METRIC_PLAN_AGE, state.now_s - state.last_plan_s)
        reason = fail_open_reason(state, after_s)
        if reason is None:
            if log:
                log.info("Planner alive or nothing waiting (%d held); nothing to do.", len(state.held))
            return {"action": "alive", "released": 0, "held": len(state.held)}
        cluster = load_cluster()
        release = fail_open_release(state, cluster)
        by_job = {t.key.job_id: t for t in state.waiting}
        todo = {
            j: a
            for j, a in release.moves.items()
            if (t := by_job.get(j)) is not None and (t.pool, t.priority_weight) != (a.pool, a.weight)
        }
        first = state.last_release_s is None or (
            state.last_plan_s is not None and state.last_release_s < state.last_plan_s
        )
        if not todo and not first:
            return {"action": "failing_open", "released": 0, "reason": reason}
        record = fail_open_record(state, cluster, release, reason, origin)
        result = hook.release_held(release.moves, state.waiting, release.pool_slots, record=record)
        released = [j for j in result.moved if release.moves[j].pool != INTAKE_POOL]
        if log:
            log.warning(
                "FAIL-OPEN: %s. Released %d GPU task instance(s) to Airflow's default order "
                "(pools %s); %d with invalid declarations stay held. Plan record %s.",
                reason,
                len(released),
                release.pool_slots,
                len(release.kept),
                result.plan_id,
            )
            for job_id, why in release.kept.items():
                log.error("Still held (invalid declaration): %s: %s", job_id, why)
        stats = _stats()
        stats.incr(METRIC_FAIL_OPEN)
        stats.incr(METRIC_RELEASED, len(released))
        return {
            "action": "released",
            "released": len(released),
            "skipped": list(result.skipped),
            "kept": dict(release.kept),
            "pool_slots": dict(release.pool_slots),
            "plan_id": result.plan_id,
            "reason": reason,
        }
