"""Provider-owned tables: every plan the operator made, and each job's place in it.

Created by ``airflow db migrate`` through :class:`~airflow_gpu_scheduler.db.manager.GpuSchedulerDBManager`.
Times are epoch seconds (floats) so the rows read the same on every database. What a row holds,
and the values of ``method`` and ``decision``, are in :mod:`airflow_gpu_scheduler.db.records`.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

from airflow_gpu_scheduler.db.records import Decision, Method, vocabulary

metadata = MetaData()

#: One row per plan whose decisions differ from the plan before it (cycles that change nothing only
#: move ``checked_s``).
plan_table = Table(
    "gpu_sched_plan",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_s", Float, nullable=False, doc="when the plan was made (epoch seconds, = now_s)"),
    Column("dag_id", String(250), doc="the scheduling DAG run that made it"),
    Column("run_id", String(250)),
    Column("cluster", Text, nullable=False, doc="cluster config (JSON)"),
    Column("method", String(32), nullable=False, doc=vocabulary(Method)),
    Column("status", String(200), nullable=False, doc="solver termination status"),
    Column("objective", Float),
    Column("greedy_objective", Float),
    Column("bound", Float),
    Column("gap", Float),
    Column("wall_s", Float),
    Column("message", Text),
    Column("waiting", Integer, nullable=False),
    Column("running", Integer, nullable=False),
    Column("due", Integer, nullable=False, doc="jobs released to a GPU pool (decision released)"),
    Column("rejected", Integer, nullable=False),
    Column("pool_slots", Text, nullable=False, doc="slots written per pool (JSON)"),
    Column("streaming_reserve", Text, nullable=False, doc="GPUs kept for streaming per type (JSON)"),
    Column("predicted", Text, doc="predicted metrics of the plan vs Airflow's own dispatch (JSON)"),
    Column("applied", Boolean, nullable=False),
    Column("moved", Integer, doc="task instances whose pool or weight this plan changed"),
    Column(
        "checked_s",
        Float,
        doc="when a planning cycle last found this plan's decisions unchanged (the planner's heartbeat; epoch seconds)",
    ),
)

#: One row per job considered in a plan.
plan_job_table = Table(
    "gpu_sched_plan_job",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("plan_id", Integer, ForeignKey("gpu_sched_plan.id", ondelete="CASCADE"), nullable=False),
    Column("job_id", String(1000), nullable=False),
    Column("dag_id", String(250), nullable=False),
    Column("run_id", String(250), nullable=False),
    Column("task_id", String(250), nullable=False),
    Column("map_index", Integer, nullable=False),
    Column("decision", String(16), nullable=False, doc=vocabulary(Decision)),
    Column("kind", String(32)),
    Column("gpus", Integer),
    Column("priority", Float),
    Column("estimate_s", Float),
    Column("estimate_source", String(32)),
    Column("gpu_type", String(100)),
    Column("pool", String(256)),
    Column("weight", Integer),
    Column("rank", Integer),
    Column("planned_start_s", Float),
    Column("planned_end_s", Float),
    Column("reason", Text, doc="why the job is held or rejected, in plain words"),
    Column("deadline_s", Float, doc="when the job should finish (epoch seconds), if it declares a deadline"),
    Column("reason_code", String(16), doc="too_big | busy | streaming | reserved | later | horizon | rejected"),
    Index("idx_gpu_sched_plan_job_plan", "plan_id"),
    Index("idx_gpu_sched_plan_job_ti", "dag_id", "run_id", "task_id", "map_index"),
)
