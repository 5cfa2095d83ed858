"""The planner's heartbeat: a plan is stored only when its decisions change; otherwise its row is confirmed.

Revision ID: 0003_gpu_sched_heartbeat
Revises: 0002_gpu_sched_review
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_gpu_sched_heartbeat"
down_revision = "0002_gpu_sched_review"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gpu_sched_plan", sa.Column("checked_s", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("gpu_sched_plan") as batch:
        batch.drop_column("checked_s")
