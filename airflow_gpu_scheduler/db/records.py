"""What a stored plan holds: the decision and method vocabulary, and the plan record type.

A plan record is one ``gpu_sched_plan`` row (:class:`PlanRow`) and one ``gpu_sched_plan_job`` row
per job (:class:`JobRow`), as one :class:`PlanRecord`. The planning cycle
(:func:`airflow_gpu_scheduler.cycle.records.plan_record`) and the fail-open watchdog
(:func:`airflow_gpu_scheduler.cycle.fail_open.fail_open_record`) build it, the hook's single
writer stores it, and the review API reads the same rows back (renaming three fields for its
public JSON, see :data:`API_NAMES`). Rows are plain dicts, so they go to SQL, XCom and JSON as
they are; the JSON text columns (:data:`JSON_COLUMNS`) are encoded here, once.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, NamedTuple, TypedDict, overload


class Decision(str, Enum):
    """What a plan decided for one job (``gpu_sched_plan_job.decision``, the API's ``decision``, the page's colours)."""

    #: moved to the pool of a GPU type: it starts now, or is next in line there (``released_ahead``).
    RELEASED = "released"
    #: placed in the plan, kept in the zero-slot intake pool until its planned start.
    HELD = "held"
    #: not placed within the planning horizon yet; kept in the intake pool.
    UNPLANNED = "unplanned"
    #: its declaration cannot be planned; kept in the intake pool until it is fixed.
    REJECTED = "rejected"
    #: holds GPUs now (recorded so the page can draw it).
    RUNNING = "running"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: str) -> Decision:
        """The decision a stored value names (:func:`stored_decision` first)."""
        return cls(stored_decision(value))


#: How releases were stored before there was one word for them.
LEGACY_RELEASED = "due"


def stored_decision(value: str) -> str:
    """A stored ``decision`` in today's words: ``"due"`` (earlier rows) reads as ``"released"``; others as they are."""
    return Decision.RELEASED.value if value == LEGACY_RELEASED else value


#: Decisions counted as "held" everywhere (XCom summary, metrics, API, page): waiting in the intake
#: pool by the plan's choice. Rejected jobs are counted apart, as ``rejected``.
HELD_DECISIONS = frozenset({Decision.HELD, Decision.UNPLANNED})


class Method(str, Enum):
    """How a plan was made (``gpu_sched_plan.method``, the API's ``method``, the page's "Method")."""

    #: the time-indexed MILP (Pyomo + HiGHS) over the whole horizon.
    MILP = "milp"
    #: the MILP solved window by window (a large queue).
    MILP_WINDOWS = "milp-windows"
    #: the greedy fallback (no solver answer in time).
    GREEDY = "greedy"
    #: nothing to place.
    EMPTY = "empty"
    #: no plan: the fail-open watchdog handed held work back to Airflow's own order.
    FAIL_OPEN = "fail_open"

    def __str__(self) -> str:
        return self.value


def vocabulary(enum: type[Enum]) -> str:
    """``"released | held | ..."``: the values of an enum, for the tables' column docs."""
    return " | ".join(str(m.value) for m in enum)


class PlanRow(TypedDict, total=False):
    """One ``gpu_sched_plan`` row as written (see :mod:`airflow_gpu_scheduler.db.models` for each column)."""

    created_s: float
    dag_id: str | None
    run_id: str | None
    cluster: str
    method: str
    status: str
    objective: float | None
    greedy_objective: float | None
    bound: float | None
    gap: float | None
    wall_s: float | None
    message: str | None
    waiting: int
    running: int
    #: the number of jobs released (the column keeps its first name)
    due: int
    rejected: int
    pool_slots: str
    streaming_reserve: str
    predicted: str | None
    applied: bool
    moved: int
    checked_s: float


class JobRow(TypedDict, total=False):
    """One ``gpu_sched_plan_job`` row as written; ``released_ahead`` is not stored (the note uses it)."""

    job_id: str
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    decision: str
    kind: str | None
    gpus: int | None
    priority: float | None
    estimate_s: float | None
    estimate_source: str | None
    gpu_type: str | None
    pool: str | None
    weight: int | None
    rank: int | None
    planned_start_s: float | None
    #: a running job: when it is expected to give its GPUs back (``core.workload.expected_end_s``)
    planned_end_s: float | None
    reason: str | None
    reason_code: str | None
    deadline_s: float | None
    released_ahead: bool


class PlanRecord(NamedTuple):
    """One plan as stored: its ``gpu_sched_plan`` row and a row per job it considered."""

    plan: PlanRow
    jobs: list[JobRow]


#: Plan columns that hold JSON text.
JSON_COLUMNS = ("cluster", "pool_slots", "streaming_reserve", "predicted")

#: The review API's public names of three job columns (``GET /api/plan``, documented in README).
API_NAMES = {"job_id": "key", "weight": "priority_weight", "planned_end_s": "expected_end_s"}


@overload
def to_json(value: None) -> None: ...


@overload
def to_json(value: Any) -> str: ...


def to_json(value: Any) -> str | None:
    """A JSON text column's value (``None`` stays NULL); what cannot be encoded is written as its ``str``."""
    return None if value is None else json.dumps(value, default=str)


def from_json(text: str | None) -> Any:
    """A JSON text column read back (``None`` for NULL, empty or unreadable text)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
