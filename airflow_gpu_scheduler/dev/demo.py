"""``gpu-scheduler demo``: a real Airflow with the provider, one GPU workload run by Airflow alone and by the plan.

Starts an embedded Airflow 3 (SQLite, LocalExecutor, simple auth manager, login admin/admin;
scheduler, dag-processor, triggerer and api-server) with the platform DAG ``gpu_scheduler`` and
the demo's workload DAGs (``gpu_demo_workload.py``), then submits the workload of
:mod:`airflow_gpu_scheduler.dev.demo_workload` twice, at the same moments, to two identical
clusters of GPUs:

1. **Airflow alone**: the ``demo_alone_*`` DAGs, in one pool with a slot per GPU and weighted by
   priority; Airflow's scheduler dispatches them as it would without this provider.
2. **Planned**: the ``demo_planned_*`` DAGs, declared with ``gpu_task``; the ``gpu_scheduler``
   DAG plans them and applies each plan.

Both share the machine, so start-up and load hit both alike. Over the same window it prints the
benchmark's metrics of both runs, from the task instances' recorded start and end times, next
to what the core's simulator forecast for the same workload, and says why on every line where
Airflow alone comes out ahead (:mod:`airflow_gpu_scheduler.dev.demo_report`). Airflow then keeps
running for the UI: Ctrl-C stops it, ``--exit`` stops right away, and SIGTERM (a container stop)
or SIGHUP (a closed terminal) stops it with every process it started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import and_, bindparam, create_engine, func, select, text

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.db.models import plan_job_table, plan_table
from airflow_gpu_scheduler.db.records import HELD_DECISIONS, Decision, stored_decision
from airflow_gpu_scheduler.dev import demo_report as report
from airflow_gpu_scheduler.dev import demo_workload as workload
from airflow_gpu_scheduler.dev.embedded import EmbeddedAirflow, free_port
from airflow_gpu_scheduler.examples import example_dags_folder
from airflow_gpu_scheduler.hooks.tables import to_epoch

SOURCE_DAGS = example_dags_folder()
DAG_FILES = ("gpu_scheduler.py", "gpu_demo_workload.py")
PLANNER_DAG = "gpu_scheduler"
DEMO_DAGS = [workload.dag_id(kind, planned) for kind in workload.KINDS for planned in (True, False)]
#: After the window closes, how long to let Airflow record the ends that fell inside it.
GRACE_S = 5.0
#: Health checks that the UI's home page shows; each must say "healthy".
HEALTH = ("metadatabase", "scheduler", "triggerer", "dag_processor")


class Stopped(BaseException):
    """A signal asked the demo to stop (SIGTERM: a container stop; SIGHUP: a closed terminal).

    A ``BaseException``, like ``KeyboardInterrupt``, so that only the demo's own handler catches it
    and the ``finally`` that stops Airflow always runs.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Stopped` while the demo runs."""

    def handler(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """While Airflow is being stopped, a second signal (or Ctrl-C) must not cut that short."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def planner_settings(config: PlannerConfig = report.PLANNER_CONFIG, cycle_s: float = report.CYCLE_S) -> dict[str, str]:
    """``AIRFLOW__GPU_SCHEDULER__*`` for the demo's Airflow: the planner knobs the forecast simulates."""
    return {
        "AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S": str(config.step_s),
        "AIRFLOW__GPU_SCHEDULER__PLANNING_HORIZON_S": str(config.horizon_s),
        "AIRFLOW__GPU_SCHEDULER__PLANNING_BUDGET_S": str(config.time_limit_s),
        "AIRFLOW__GPU_SCHEDULER__CYCLE_INTERVAL_S": str(cycle_s),
        "AIRFLOW__GPU_SCHEDULER__REPLAN_INTERVAL_S": str(report.REPLAN_S),
    }


def _port(wanted: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
        except OSError:
            return free_port()
    return wanted


def _say(message: str = "") -> None:
    print(message, flush=True)


def _error(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wait_until_healthy(af: EmbeddedAirflow, timeout_s: float = 120.0) -> dict[str, str]:
    """Wait until every health check the UI's home page shows is healthy; returns their statuses."""
    deadline = time.monotonic() + timeout_s
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        health = af.health()
        statuses = {name: (health.get(name) or {}).get("status", "missing") for name in HEALTH}
        if all(s == "healthy" for s in statuses.values()):
            return statuses
        time.sleep(1.0)
    raise TimeoutError(f"Airflow's health checks are not all healthy after {timeout_s:.0f} s: {statuses}")


def start_planner(af: EmbeddedAirflow, timeout_s: float = 120.0) -> None:
    """Unpause the platform DAG and wait until its planning task runs, so the first arrival finds it planning."""
    af.api("PATCH", f"/dags/{PLANNER_DAG}", {"is_paused": False})
    af.trigger(PLANNER_DAG, "demo_start")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = af.api("GET", f"/dags/{PLANNER_DAG}/dagRuns/~/taskInstances?state=running")["task_instances"]
        if running:
            return
        time.sleep(1.0)
    raise TimeoutError(
        f"the {PLANNER_DAG} DAG's planning task did not start within {timeout_s:.0f} s; see {af.home / 'logs'}"
    )


def submit(af: EmbeddedAirflow) -> float:
    """Trigger every arrival of the workload for both runs at its time; returns the epoch of the first."""
    t0 = time.time()
    start = time.monotonic()
    for i, arrival in enumerate(workload.ARRIVALS):
        time.sleep(max(0.0, start + arrival.at_s - time.monotonic()))
        # Alternate which run is triggered first, so neither is always a few milliseconds ahead.
        for planned in (True, False) if i % 2 == 0 else (False, True):
            af.trigger(workload.dag_id(arrival.kind, planned), arrival.name, {"seconds": arrival.seconds})
    return t0


def recorded(engine, t0: float) -> dict[bool, list[report.Record]]:
    """Both runs' jobs as Airflow recorded them: ``{planned: [Record]}``, seconds from ``t0``."""
    query = text(
        "SELECT ti.dag_id, ti.run_id, ti.start_date, ti.end_date, dr.queued_at FROM task_instance ti "
        "JOIN dag_run dr ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id WHERE ti.dag_id IN :dags"
    ).bindparams(bindparam("dags", expanding=True))
    planned_dags = {workload.dag_id(kind, True) for kind in workload.KINDS}
    out: dict[bool, list[report.Record]] = {True: [], False: []}
    with engine.connect() as conn:
        for row in conn.execute(query, {"dags": DEMO_DAGS}).mappings():

            def rel(value):
                epoch = to_epoch(value)
                return None if epoch is None else epoch - t0

            out[row["dag_id"] in planned_dags].append(
                report.Record(row["run_id"], rel(row["queued_at"]) or 0.0, rel(row["start_date"]), rel(row["end_date"]))
            )
    return out


def plan_trace(engine, t0: float, window_s: float) -> report.PlanTrace:
    """What the planner stored about the planned run during the window."""
    planned_dags = [workload.dag_id(kind, True) for kind in workload.KINDS]
    window = and_(plan_table.c.created_s >= t0, plan_table.c.created_s <= t0 + window_s)
    with engine.connect() as conn:
        plans = conn.execute(
            select(plan_table.c.created_s, plan_table.c.pool_slots).where(window).order_by(plan_table.c.created_s)
        ).all()
        seen = conn.execute(select(func.max(plan_table.c.checked_s)).where(window)).scalar()
        jobs = conn.execute(
            select(plan_table.c.created_s, plan_job_table.c.run_id, plan_job_table.c.decision, plan_job_table.c.reason)
            .join(plan_table, plan_table.c.id == plan_job_table.c.plan_id)
            .where(window, plan_job_table.c.dag_id.in_(planned_dags))
            .order_by(plan_table.c.created_s)
        ).all()
    streaming = f"gpu_{workload.GPU_TYPE}_streaming"
    reasons: dict[str, list[tuple[float, str]]] = {}
    released: dict[str, float] = {}
    for created, run_id, decision, reason in jobs:
        decision = stored_decision(decision)
        if decision in HELD_DECISIONS and reason:
            reasons.setdefault(run_id, []).append((created - t0, reason))
        elif decision == Decision.RELEASED:
            released.setdefault(run_id, created - t0)
    return report.PlanTrace(
        created_s=tuple(created - t0 for created, _ in plans),
        streaming_slots=tuple(
            (created - t0, int(json.loads(slots or "{}").get(streaming, 0))) for created, slots in plans
        ),
        reasons={k: tuple(v) for k, v in reasons.items()},
        released_s=released,
        last_seen_s=float(seen) - t0 if seen is not None else None,
    )


def print_summary(
    alone: report.RunScore,
    planned: report.RunScore,
    sim_airflow: report.RunScore,
    sim_milp: report.RunScore,
    trace: report.PlanTrace,
) -> None:
    _say(
        f"\nWhat ran over the same {workload.WINDOW_S:.0f} s window on {workload.GPUS} {workload.GPU_TYPE} GPUs "
        "(measured: from the task instances' recorded start and end times; forecast: the core's simulator, "
        "where a task starts the moment its slot opens):"
    )
    rows = report.lines(alone, planned, sim_airflow, sim_milp)
    for line in report.table(rows):
        _say("  " + line)
    reasons = report.why_alone_is_ahead(alone, planned, trace, rows)
    if reasons:
        _say("\nWhere Airflow alone comes out ahead, and why:")
        for reason in reasons:
            _say(f"  - {reason}")
    _say(
        "\nPriority-weighted output counts a batch job (priority x GPUs x its length) only if it finishes in the "
        "window and by its deadline,\nand a real-time job only if it starts within its wait budget, as in "
        "'gpu-scheduler bench'."
    )


def run(home: Path, port: int, exit_after: bool) -> int:
    """Run the demo; returns the process exit status."""
    if not all((SOURCE_DAGS / name).exists() for name in DAG_FILES):
        _error(
            f"error: the demo's DAG files {', '.join(DAG_FILES)} are missing from {SOURCE_DAGS}; "
            "reinstall airflow-gpu-scheduler"
        )
        return 2
    home = Path(home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    (home / "dags").mkdir(parents=True)
    for name in DAG_FILES:
        shutil.copy(SOURCE_DAGS / name, home / "dags" / name)

    af = EmbeddedAirflow(
        home,
        home / "dags",
        port=_port(port),
        parallelism=2 * workload.GPUS + 4,
        extra_env={
            "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps(workload.CLUSTER.to_dict()),
            # The platform DAG plans as the forecast does: jobs of seconds, not hours, need a fine grid
            # near now and a short cycle ([gpu_scheduler] settings, read by the planning task).
            **planner_settings(),
            # Nothing runs until the demo says so.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        },
    )
    shown = False
    with stop_on_signals():
        try:
            # The forecast first, so it does not compete with Airflow for the CPU. Airflow's logging
            # (configured on import) would print every HiGHS solve log here; the task logs keep them.
            logging.getLogger("pyomo").setLevel(logging.WARNING)
            sim_airflow, sim_milp = report.forecast()
            _say(f"Starting Airflow in {home} (SQLite, LocalExecutor) ...")
            af.start()
            af.wait_for_dags([PLANNER_DAG, *DEMO_DAGS])
            statuses = wait_until_healthy(af)
            _say(
                f"Airflow is up: {af.base_url}  (login admin / admin); health: "
                + ", ".join(f"{name} {status}" for name, status in statuses.items())
            )
            af.set_pool(workload.ALONE_POOL, workload.GPUS)
            for dag in DEMO_DAGS:
                af.api("PATCH", f"/dags/{dag}", {"is_paused": False})
            start_planner(af)
            _say(
                f"\nSubmitting {len(workload.ARRIVALS)} GPU jobs over {workload.ARRIVALS[-1].at_s:.0f} s to both runs "
                f"at once: Airflow alone (pool {workload.ALONE_POOL}, {workload.GPUS} slots) and planned (the "
                f"{PLANNER_DAG} DAG plans every {report.CYCLE_S:.0f} s); results after {workload.WINDOW_S:.0f} s ..."
            )
            t0 = submit(af)
            time.sleep(max(0.0, t0 + workload.WINDOW_S + GRACE_S - time.time()))
            engine = create_engine(af.sqlalchemy_url)
            try:
                runs = recorded(engine, t0)
                trace = plan_trace(engine, t0, workload.WINDOW_S)
            finally:
                engine.dispose()
            alone, planned = report.score("Airflow alone", runs[False]), report.score("planned", runs[True])
            print_summary(alone, planned, sim_airflow, sim_milp, trace)
            shown = True
            _say(
                f"\nUI: {af.base_url}  login: admin / admin  (Browse > GPU Schedule: the plan and why each job "
                "waits; a held task's note in the Grid view says the same)"
            )
            if exit_after:
                return 0
            _say("Airflow keeps running (the rest of the workload finishes); press Ctrl-C to stop it.")
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0 if shown else 130
        except Stopped as stop:
            _error(f"Stopped by {signal.Signals(stop.signum).name}.")
            return 128 + stop.signum
        except Exception as error:  # noqa: BLE001 - the demo reports, it does not dump a traceback
            _error(f"error: {error}")
            return 1
        finally:
            with stop_signals_ignored():
                _say("Stopping Airflow ...")
                af.stop()


if __name__ == "__main__":
    from airflow_gpu_scheduler.cli import main

    sys.exit(main(["demo", *sys.argv[1:]]))
