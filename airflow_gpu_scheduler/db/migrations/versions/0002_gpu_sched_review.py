"""What the review page shows that plans did not record: deadlines, wait-reason codes, applied moves.

Revision ID: 0002_gpu_sched_review
Revises: 0001_gpu_sched
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_gpu_sched_review"
down_revision = "0001_gpu_sched"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gpu_sched_plan", sa.Column("moved", sa.Integer))
    op.add_column("gpu_sched_plan_job", sa.Column("deadline_s", sa.Float))
    op.add_column("gpu_sched_plan_job", sa.Column("reason_code", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("gpu_sched_plan_job") as batch:
        batch.drop_column("reason_code")
        batch.drop_column("deadline_s")
    with op.batch_alter_table("gpu_sched_plan") as batch:
        batch.drop_column("moved")
