"""Writes DAGs, DAG runs and task instances straight into a migrated Airflow metadata database.

The rows are what Airflow 3.3 itself writes (checked against ``airflow db migrate``'s schema and the
serialized form of a real DAG), inserted with SQLAlchemy Core in bulk, so hook-level tests can put
thousands of GPU task instances beside non-GPU ones without starting a scheduler.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import MetaData, create_engine, delete, insert, select, update


def wrap_declaration(raw: Any) -> dict:
    return {"__type": "dict", "__var": {"gpu_scheduler": {"__type": "dict", "__var": raw}}}


class Seeder:
    """Inserts metadata rows; :meth:`state` reads back every task instance and pool for comparison."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.sqlite = self.engine.dialect.name == "sqlite"
        self.meta = MetaData()
        self.meta.reflect(
            self.engine,
            only=["dag_bundle", "dag", "dag_version", "serialized_dag", "dag_run", "task_instance", "slot_pool"],
        )
        self.t = self.meta.tables
        self.versions: dict[str, Any] = {}

    def _id(self) -> Any:
        value = uuid.uuid4()
        return value.hex if self.sqlite else value

    def _time(self, when: datetime) -> datetime:
        return when.astimezone(timezone.utc).replace(tzinfo=None) if self.sqlite else when

    def dag(self, dag_id: str, tasks: Mapping[str, Mapping[str, Any]]) -> Any:
        """A DAG with ``{task_id: {"declaration": raw | absent, "priority_weight", "weight_rule", "downstream"}}``."""
        now = self._time(datetime.now(timezone.utc))
        with self.engine.begin() as conn:
            if (
                conn.execute(select(self.t["dag_bundle"].c.name).where(self.t["dag_bundle"].c.name == "tests")).first()
                is None
            ):
                conn.execute(insert(self.t["dag_bundle"]).values(name="tests", active=True))
            conn.execute(
                insert(self.t["dag"]).values(
                    dag_id=dag_id,
                    is_paused=False,
                    is_stale=False,
                    bundle_name="tests",
                    timetable_type="",
                    partition_mapper_info={},
                    max_active_tasks=10_000,
                    max_consecutive_failed_dag_runs=0,
                    has_task_concurrency_limits=False,
                )
            )
            version = self._id()
            conn.execute(
                insert(self.t["dag_version"]).values(
                    id=version, version_number=1, dag_id=dag_id, bundle_name="tests", created_at=now, last_updated=now
                )
            )
            serialized = []
            for task_id, spec in tasks.items():
                var: dict[str, Any] = {
                    "task_id": task_id,
                    "task_type": "EmptyOperator",
                    "downstream_task_ids": list(spec.get("downstream", [])),
                }
                if "declaration" in spec:
                    var["executor_config"] = wrap_declaration(spec["declaration"])
                for name in ("priority_weight", "weight_rule"):
                    if name in spec:
                        var[name] = spec[name]
                serialized.append({"__type": "operator", "__var": var})
            data = {"__version": 3, "dag": {"dag_id": dag_id, "tasks": serialized}}
            conn.execute(
                insert(self.t["serialized_dag"]).values(
                    id=self._id(),
                    dag_id=dag_id,
                    data=data,
                    created_at=now,
                    last_updated=now,
                    dag_hash=hashlib.md5(json.dumps(data).encode()).hexdigest(),
                    dag_version_id=version,
                )
            )
        self.versions[dag_id] = version
        return version

    def run(self, dag_id: str, run_id: str, state: str = "running") -> None:
        now = self._time(datetime.now(timezone.utc))
        with self.engine.begin() as conn:
            conn.execute(
                insert(self.t["dag_run"]).values(
                    dag_id=dag_id,
                    run_id=run_id,
                    run_type="manual",
                    run_after=now,
                    state=state,
                    queued_at=now,
                    start_date=now,
                )
            )

    def task_instances(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Bulk insert; each row: dag_id, run_id, task_id, [map_index, pool, pool_slots, state, priority_weight,
        waited_s]."""
        now = datetime.now(timezone.utc)
        values = []
        for row in rows:
            waited = row.get("waited_s", 10.0)
            values.append(
                {
                    "id": self._id(),
                    "dag_id": row["dag_id"],
                    "run_id": row["run_id"],
                    "task_id": row["task_id"],
                    "map_index": row.get("map_index", -1),
                    "try_number": 1,
                    "pool": row.get("pool", "gpu_intake"),
                    "pool_slots": row.get("pool_slots", 1),
                    "state": row.get("state", "scheduled"),
                    "priority_weight": row.get("priority_weight", 1),
                    "max_tries": 0,
                    "scheduled_dttm": self._time(now - timedelta(seconds=waited)),
                    "dag_version_id": self.versions[row["dag_id"]],
                }
            )
        with self.engine.begin() as conn:
            for start in range(0, len(values), 1000):
                conn.execute(insert(self.t["task_instance"]), values[start : start + 1000])
        return len(values)

    def set_pool(self, pool: str, slots: int) -> None:
        sp = self.t["slot_pool"]
        with self.engine.begin() as conn:
            if conn.execute(update(sp).where(sp.c.pool == pool).values(slots=slots)).rowcount == 0:
                conn.execute(insert(sp).values(pool=pool, slots=slots, include_deferred=False))

    def state(self) -> tuple[dict[tuple, tuple], dict[str, int]]:
        """Every task instance's (pool, pool_slots, priority_weight, state), and every pool's slots."""
        ti, sp = self.t["task_instance"], self.t["slot_pool"]
        with self.engine.connect() as conn:
            tis = {
                (r.dag_id, r.run_id, r.task_id, r.map_index): (r.pool, r.pool_slots, r.priority_weight, r.state)
                for r in conn.execute(
                    select(
                        ti.c.dag_id,
                        ti.c.run_id,
                        ti.c.task_id,
                        ti.c.map_index,
                        ti.c.pool,
                        ti.c.pool_slots,
                        ti.c.priority_weight,
                        ti.c.state,
                    )
                )
            }
            pools = dict(conn.execute(select(sp.c.pool, sp.c.slots)).all())
        return tis, pools

    def clear(self) -> None:
        with self.engine.begin() as conn:
            for name in ("task_instance", "dag_run", "serialized_dag", "dag_version", "dag"):
                conn.execute(delete(self.t[name]))
        self.engine.dispose()
