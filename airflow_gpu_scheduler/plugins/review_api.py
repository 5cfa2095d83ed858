"""The GPU Schedule review page and the JSON API behind it, mounted in Airflow's api-server.

Routes (under the plugin's ``url_prefix``, ``/gpu-scheduler``):

- ``GET /``: the page (one self-contained HTML/JS/CSS page, no external resources).
- ``GET /api/plan``: the newest plan with every job in it; ``{"plan": null}`` before the first plan.
- ``GET /api/plans?limit=N``: the last N plans (no jobs), with what each changed.
- ``GET /api/jobs/{key}``: one job (key ``dag_id/run_id/task_id/map_index``) in the newest plan that
  considered it, and its history over the last plans; 404 if no plan ever considered it.
- ``GET /api/utilization?hours=H``: realized GPU-pool utilization from task instances' start/end times.
- ``GET /api/openapi.json``: the OpenAPI description of these routes.

Every route needs a logged-in Airflow user (a bearer token, or the UI's own ``_token`` cookie,
which the page inside the UI's iframe sends by itself) and read access to pools and task
instances, checked by Airflow's auth manager. Jobs of DAGs the user may not read are shown
as anonymous bars (they still hold GPUs), never by name, and so is every job when the auth
manager cannot say which DAGs the user may read (fail closed). All SQL is in
:class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`; here it runs on the
api-server's own database session.
"""

from __future__ import annotations

import math
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag, requires_access_pool
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from airflow_gpu_scheduler.core.levers import gpu_type_of_pool
from airflow_gpu_scheduler.core.usage import GpuInterval, realized_utilization
from airflow_gpu_scheduler.db.records import API_NAMES, HELD_DECISIONS, from_json
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook

URL_PREFIX = "/gpu-scheduler"
STATIC = Path(__file__).parent / "static"
#: Jobs of DAGs the user may not read keep their bar, without any name.
HIDDEN = "(a job of a DAG you cannot read)"

read_access = [
    Depends(requires_access_pool(method="GET")),
    Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE)),
]


def _hook() -> GpuSchedulerMetadataHook:
    return GpuSchedulerMetadataHook()


def _readable_dag_ids(user: Any) -> set[str]:
    """DAG ids the user may read. An auth manager that cannot say gets none: every job is then
    shown anonymous (fail closed), never by name."""
    from airflow.api_fastapi.app import get_auth_manager

    try:
        return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))
    except NotImplementedError:
        return set()


def _ui_base(request: Request) -> str:
    """Path of Airflow's UI root as seen by the browser (the app is mounted below it)."""
    root = request.scope.get("root_path", "")
    return root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""


def ti_url(ui_base: str, dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The task instance's page in the Airflow 3 UI."""
    q = urllib.parse.quote
    url = f"{ui_base}/dags/{q(dag_id, safe='')}/runs/{q(run_id, safe='')}/tasks/{q(task_id, safe='')}"
    return url + (f"/mapped/{map_index}" if map_index is not None and map_index >= 0 else "")


def _redacted(reason: str | None, readable: set[str], job_ids: Sequence[str]) -> str | None:
    """A reason naming a job of a DAG the user may not read (the job the GPUs are kept for) names it only as such."""
    for job_id in job_ids:
        if reason and job_id in reason and job_id.split("/", 1)[0] not in readable:
            reason = reason.replace(f"job {job_id}", "job of a DAG you cannot read").replace(job_id, HIDDEN)
    return reason


def _job_view(
    row: dict[str, Any], ui_base: str, readable: set[str] | None, job_ids: Sequence[str] = ()
) -> dict[str, Any]:
    """A stored job row (:class:`~airflow_gpu_scheduler.db.records.JobRow`) as the API shows it: the same
    columns under the API's public names (:data:`~airflow_gpu_scheduler.db.records.API_NAMES`), its lane,
    whether it meets its deadline, its task instance's page; a job of a DAG the user may not read, anonymous."""
    streaming = row.get("kind") == "realtime_inference"
    end, deadline = row.get("planned_end_s"), row.get("deadline_s")
    job = {
        API_NAMES["job_id"]: row["job_id"],
        "dag_id": row["dag_id"],
        "run_id": row["run_id"],
        "task_id": row["task_id"],
        "map_index": row["map_index"],
        "decision": row["decision"],
        "kind": row.get("kind"),
        "gpus": row.get("gpus"),
        "priority": row.get("priority"),
        "estimate_s": row.get("estimate_s"),
        "estimate_source": row.get("estimate_source"),
        "gpu_type": row.get("gpu_type"),
        "lane": (row["gpu_type"] + (":streaming" if streaming else "")) if row.get("gpu_type") else None,
        "pool": row.get("pool"),
        API_NAMES["weight"]: row.get("weight"),
        "rank": row.get("rank"),
        "planned_start_s": row.get("planned_start_s"),
        API_NAMES["planned_end_s"]: end,
        "deadline_s": deadline,
        "deadline_met": None if deadline is None or end is None else bool(end <= deadline + 1e-6),
        "reason": row.get("reason"),
        "reason_code": row.get("reason_code"),
        "ti_url": ti_url(ui_base, row["dag_id"], row["run_id"], row["task_id"], row["map_index"]),
        "hidden": False,
    }
    if readable is not None and row["dag_id"] not in readable:
        job.update(
            {
                API_NAMES["job_id"]: f"hidden-{row['id']}",
                "dag_id": None,
                "run_id": None,
                "task_id": HIDDEN,
                "map_index": None,
                "ti_url": None,
                "reason": None,
                "pool": None,
                "hidden": True,
            }
        )
    elif readable is not None:
        job["reason"] = _redacted(job["reason"], readable, job_ids)
    return job


def _lanes(cluster: dict[str, Any] | None, reserve: dict[str, int], jobs: list[dict[str, Any]]) -> list[dict]:
    """One lane per GPU type for batch work, and one for its streaming reservation where there is one."""
    lanes = []
    types = (cluster or {}).get("gpu_types", {})
    streaming_types = {j["gpu_type"] for j in jobs if j["lane"] and j["lane"].endswith(":streaming")}
    for name, spec in types.items():
        kept = int(reserve.get(name, 0))
        lanes.append(
            {
                "id": name,
                "gpu_type": name,
                "streaming": False,
                "gpus": int(spec["count"]) - kept,
                "count": int(spec["count"]),
                "speed": spec.get("speed", 1.0),
            }
        )
        if kept or name in streaming_types:
            lanes.append(
                {
                    "id": f"{name}:streaming",
                    "gpu_type": name,
                    "streaming": True,
                    "gpus": kept,
                    "count": int(spec["count"]),
                    "speed": spec.get("speed", 1.0),
                }
            )
    return lanes


def _plan_view(plan: dict[str, Any], jobs: list[dict[str, Any]] | None) -> dict[str, Any]:
    out = {
        k: v for k, v in plan.items() if k not in ("jobs", "cluster", "pool_slots", "streaming_reserve", "predicted")
    }
    out.update(
        {
            "cluster": from_json(plan.get("cluster")),
            "pool_slots": from_json(plan.get("pool_slots")) or {},
            "streaming_reserve": from_json(plan.get("streaming_reserve")) or {},
            "predicted": from_json(plan.get("predicted")),
            "applied": bool(plan.get("applied")),
        }
    )
    if jobs is not None:
        out["held"] = sum(1 for j in jobs if j["decision"] in HELD_DECISIONS)
    return out


router = APIRouter(dependencies=read_access)


@router.get("/api/plan", summary="The newest plan with all its jobs")
def get_plan(request: Request, session: SessionDep, user: GetUserDep) -> dict[str, Any]:
    """``{"now_s", "plan": {...} | null, "lanes": [...], "jobs": [...]}``.

    Each job: ``key``, ``dag_id``, ``run_id``, ``task_id``, ``map_index``, ``decision`` (released | held |
    unplanned | rejected | running: :class:`~airflow_gpu_scheduler.db.records.Decision`), ``kind``, ``gpus``,
    ``priority``, ``estimate_s``, ``estimate_source``,
    ``gpu_type``, ``lane``, ``pool``, ``priority_weight``, ``rank``, ``planned_start_s``, ``expected_end_s``,
    ``deadline_s``, ``deadline_met``, ``reason``, ``reason_code``, ``ti_url``. Times are epoch seconds.
    """
    now = time.time()
    plan = _hook().latest_plan(conn=session.connection())
    if plan is None:
        return {"now_s": now, "plan": None, "lanes": [], "jobs": []}
    readable, base = _readable_dag_ids(user), _ui_base(request)
    job_ids = [row["job_id"] for row in plan["jobs"]]
    jobs = [_job_view(row, base, readable, job_ids) for row in plan["jobs"]]
    view = _plan_view(plan, jobs)
    return {"now_s": now, "plan": view, "lanes": _lanes(view["cluster"], view["streaming_reserve"], jobs), "jobs": jobs}


@router.get("/api/plans", summary="The last plans and what each changed")
def get_plans(session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 20) -> dict[str, Any]:
    """``{"plans": [...]}``, newest first; each with ``decisions`` (jobs per decision), ``moved``
    (task instances whose pool or weight it changed) and ``pool_slots`` (slots it wrote)."""
    plans = _hook().plan_summaries(limit=limit, conn=session.connection())
    out = []
    for plan in plans:
        view = _plan_view(plan, None)
        view.pop("cluster", None)
        out.append(view)
    return {"plans": out}


@router.get("/api/jobs/{key:path}", summary="One job: its place in the newest plan and its history")
def get_job(
    key: str, request: Request, session: SessionDep, user: GetUserDep, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> dict[str, Any]:
    """``{"job": {...}, "history": [{"plan_id", "created_s", "decision", "reason", ...}]}``; 404 if no plan
    ever considered the job, 403 if the user may not read its DAG."""
    history = _hook().job_history(key, limit=limit, conn=session.connection())
    if not history:
        raise HTTPException(status_code=404, detail=f"no plan has considered job {key!r}")
    from airflow.api_fastapi.app import get_auth_manager

    dag_id = history[0]["dag_id"]
    if not get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.TASK_INSTANCE, details=DagDetails(id=dag_id), user=user
    ):
        raise HTTPException(status_code=403, detail="Forbidden")
    base = _ui_base(request)
    job = _job_view(history[0], base, None)
    job["plan_id"], job["plan_created_s"] = history[0]["plan_id"], history[0]["created_s"]
    steps = [
        {
            "plan_id": h["plan_id"],
            "created_s": h["created_s"],
            "decision": h["decision"],
            "gpu_type": h["gpu_type"],
            "pool": h["pool"],
            API_NAMES["weight"]: h["weight"],
            "rank": h["rank"],
            "planned_start_s": h["planned_start_s"],
            "reason": h["reason"],
            "reason_code": h["reason_code"],
        }
        for h in history
    ]
    return {"job": job, "history": steps}


@router.get("/api/utilization", summary="Realized GPU-pool utilization from task instances' start/end times")
def get_utilization(session: SessionDep, hours: Annotated[float, Query(gt=0, le=168)] = 6.0) -> dict[str, Any]:
    """``{"since_s", "until_s", "bucket_s", "capacity": {type: GPUs}, "buckets": [{"start_s", "end_s",
    "utilization", "by_type"}]}`` over the last ``hours`` (starting at the first GPU task if later).
    Capacity is the cluster of the newest plan; without a plan there is nothing to measure against."""
    hook, conn = _hook(), session.connection()
    now = time.time()
    plans = hook.plan_summaries(limit=1, conn=conn)
    cluster = from_json(plans[0]["cluster"]) if plans else None
    capacity = {name: int(spec["count"]) for name, spec in (cluster or {}).get("gpu_types", {}).items()}
    rows = hook.gpu_pool_intervals(now - hours * 3600.0, conn=conn)
    intervals = [
        GpuInterval(t, r["gpus"], r["start_s"], r["end_s"])
        for r in rows
        if (t := gpu_type_of_pool(r["pool"])) is not None and t in capacity
    ]
    since = max(now - hours * 3600.0, min((i.start_s for i in intervals), default=now) - 60.0)
    bucket = max(10.0, math.ceil((now - since) / 60.0 / 10.0) * 10.0)
    buckets = realized_utilization(intervals, capacity, since, now, bucket) if capacity else []
    return {"since_s": since, "until_s": now, "bucket_s": bucket, "capacity": capacity, "buckets": buckets}


def _static(name: str, media_type: str) -> Response:
    return Response((STATIC / name).read_bytes(), media_type=media_type, headers={"Cache-Control": "no-cache"})


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page() -> Response:
    return _static("gpu_schedule.html", "text/html; charset=utf-8")


@router.get("/static/gpu_schedule.js", include_in_schema=False)
def script() -> Response:
    return _static("gpu_schedule.js", "text/javascript; charset=utf-8")


@router.get("/static/gpu_schedule.css", include_in_schema=False)
def stylesheet() -> Response:
    return _static("gpu_schedule.css", "text/css; charset=utf-8")


def create_app() -> FastAPI:
    """The FastAPI app the plugin mounts; FastAPI's own unprotected docs routes are switched off."""
    app = FastAPI(
        title="GPU Schedule review API",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        description=__doc__,
    )
    app.include_router(router)

    @app.get("/api/openapi.json", dependencies=read_access, include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    return app
