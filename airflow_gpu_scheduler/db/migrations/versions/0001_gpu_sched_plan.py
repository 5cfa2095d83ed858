"""Create the plan tables.

Revision ID: 0001_gpu_sched
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_gpu_sched"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpu_sched_plan",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_s", sa.Float, nullable=False),
        sa.Column("dag_id", sa.String(250)),
        sa.Column("run_id", sa.String(250)),
        sa.Column("cluster", sa.Text, nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("status", sa.String(200), nullable=False),
        sa.Column("objective", sa.Float),
        sa.Column("greedy_objective", sa.Float),
        sa.Column("bound", sa.Float),
        sa.Column("gap", sa.Float),
        sa.Column("wall_s", sa.Float),
        sa.Column("message", sa.Text),
        sa.Column("waiting", sa.Integer, nullable=False),
        sa.Column("running", sa.Integer, nullable=False),
        sa.Column("due", sa.Integer, nullable=False),
        sa.Column("rejected", sa.Integer, nullable=False),
        sa.Column("pool_slots", sa.Text, nullable=False),
        sa.Column("streaming_reserve", sa.Text, nullable=False),
        sa.Column("predicted", sa.Text),
        sa.Column("applied", sa.Boolean, nullable=False),
    )
    op.create_table(
        "gpu_sched_plan_job",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.Integer, sa.ForeignKey("gpu_sched_plan.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_id", sa.String(1000), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32)),
        sa.Column("gpus", sa.Integer),
        sa.Column("priority", sa.Float),
        sa.Column("estimate_s", sa.Float),
        sa.Column("estimate_source", sa.String(32)),
        sa.Column("gpu_type", sa.String(100)),
        sa.Column("pool", sa.String(256)),
        sa.Column("weight", sa.Integer),
        sa.Column("rank", sa.Integer),
        sa.Column("planned_start_s", sa.Float),
        sa.Column("planned_end_s", sa.Float),
        sa.Column("reason", sa.Text),
    )
    op.create_index("idx_gpu_sched_plan_job_plan", "gpu_sched_plan_job", ["plan_id"])
    op.create_index("idx_gpu_sched_plan_job_ti", "gpu_sched_plan_job", ["dag_id", "run_id", "task_id", "map_index"])


def downgrade() -> None:
    op.drop_index("idx_gpu_sched_plan_job_ti", table_name="gpu_sched_plan_job")
    op.drop_index("idx_gpu_sched_plan_job_plan", table_name="gpu_sched_plan_job")
    op.drop_table("gpu_sched_plan_job")
    op.drop_table("gpu_sched_plan")
