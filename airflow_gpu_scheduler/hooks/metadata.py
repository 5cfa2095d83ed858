"""Hook owning every SQL statement the GPU scheduler runs against Airflow's metadata database.

Task code cannot use Airflow's ORM session in Airflow 3, so the hook opens its own
SQLAlchemy engine from an Airflow connection (default conn id ``gpu_scheduler_metadata``)
and speaks SQLAlchemy Core to the few tables it needs. Everything is keyed on
``(dag_id, run_id, task_id, map_index)`` (:class:`~airflow_gpu_scheduler.cycle.snapshot.JobKey`):
a task instance's id changes on every retry or clear. The SQL lives beside this module, one
concern each:

- :mod:`.connection`: the engine, the connection test, the planners' lock.
- :mod:`.collect`: reads of GPU work (task instances, their declarations from ``serialized_dag``, history).
- :mod:`.writer`: the one writer of pools, weights and queues, for a plan and for a fail-open release.
- :mod:`.plan_store`: the provider's plan tables.
- :mod:`.notes`: task-instance notes, written inside the writer's transaction.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from sqlalchemy.engine import Engine

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.cycle.snapshot import FailOpenState, GpuTaskInstance, GpuWorkSnapshot, JobKey, is_gpu_pool
from airflow_gpu_scheduler.db.records import Method
from airflow_gpu_scheduler.hooks import connection_url
from airflow_gpu_scheduler.hooks.collect import MetadataCollector
from airflow_gpu_scheduler.hooks.connection import PLANNING_LOCK_KEY, GpuSchedulerMetadataError, MetadataConnection
from airflow_gpu_scheduler.hooks.plan_store import PlanStore
from airflow_gpu_scheduler.hooks.tables import AIRFLOW_TABLES, RELEASABLE_STATES, to_epoch
from airflow_gpu_scheduler.hooks.writer import MOVE_BATCH, ApplyResult, LeverWriter

#: Plan method recorded when held work was handed back to Airflow's own order (``Method.FAIL_OPEN``).
FAIL_OPEN_METHOD = Method.FAIL_OPEN.value
#: The job identity's earlier name (it is not Airflow's ``TaskInstanceKey``); use :class:`JobKey`.
TaskInstanceKey = JobKey

__all__ = [
    "AIRFLOW_TABLES",
    "FAIL_OPEN_METHOD",
    "MOVE_BATCH",
    "PLANNING_LOCK_KEY",
    "RELEASABLE_STATES",
    "ApplyResult",
    "FailOpenState",
    "GpuSchedulerMetadataError",
    "GpuSchedulerMetadataHook",
    "GpuTaskInstance",
    "GpuWorkSnapshot",
    "JobKey",
    "TaskInstanceKey",
    "is_gpu_pool",
    "to_epoch",
]


class GpuSchedulerMetadataHook(MetadataConnection, MetadataCollector, LeverWriter, PlanStore, BaseHook):
    """
    Reads GPU work from, and writes plan levers to, Airflow's metadata database.

    Its connection type is ``gpu_scheduler_metadata``: Host names the SQLAlchemy driver
    (``postgresql+psycopg2://db.example.com``), Schema the database (SQLite: no Host, Schema is the
    file's absolute path), extras go to the driver (``sslmode``). ``airflow connections add
    gpu_scheduler_metadata --conn-uri "gpu-scheduler-metadata://$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"``
    makes one from Airflow's own database URL. Connections of type ``postgres``, ``mysql``,
    ``sqlite`` or a driver name (``postgresql+psycopg2``) work too, and any type may carry a full
    URL in its extra as ``{"sqlalchemy_url": "..."}``; see
    :mod:`airflow_gpu_scheduler.hooks.connection_url`.

    :param gpu_scheduler_conn_id: Airflow connection to the metadata database
        (default: ``[gpu_scheduler] metadata_conn_id``, ``gpu_scheduler_metadata``).
    :param engine_kwargs: extra keyword arguments for :func:`sqlalchemy.create_engine`.
    :param history_rows: finished GPU task instances read for estimates
        (default: ``[gpu_scheduler] history_rows``).
    """

    conn_name_attr = "gpu_scheduler_conn_id"
    default_conn_name = "gpu_scheduler_metadata"
    conn_type = connection_url.CONN_TYPE
    hook_name = "GPU Scheduler metadata database"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict:
        """The connection form: every field applies; labels say the host carries the driver."""
        return connection_url.UI_FIELD_BEHAVIOUR

    def __init__(
        self,
        gpu_scheduler_conn_id: str | None = None,
        engine_kwargs: dict | None = None,
        history_rows: int | None = None,
    ) -> None:
        super().__init__()
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id or config.get_str("metadata_conn_id")
        self.engine_kwargs = engine_kwargs or {}
        self.history_rows = history_rows or config.get_int("history_rows")
        self._engine: Engine | None = None
        self._declarations: dict[Any, dict[str, Any]] = {}
        self._default_weights: dict[Any, dict[str, int]] = {}
