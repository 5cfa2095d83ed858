"""A soak under faults: a real Airflow on PostgreSQL runs the planner and the watchdog for N minutes.

``scripts/soak.sh [--minutes N]`` runs this file. It creates a fresh PostgreSQL database (dropped at
the end), starts Airflow (scheduler, dag-processor, triggerer, api-server; the CeleryExecutor with
one worker when Redis answers on 127.0.0.1:6379, else the LocalExecutor) with the shipped
``gpu_scheduler`` and ``gpu_scheduler_watchdog`` DAGs and the four kinds of GPU work of
``soak_dags/soak_workload.py``, and then, at once:

- submits a steady stream of GPU work (a run every few seconds, at most ``--backlog`` unfinished);
- injects faults in random order and at random moments, one at a time: SIGKILL of the planning
  task's process, ``pg_terminate_backend`` of the planning task's database connections, a stop
  and restart of the scheduler, a pause and unpause of the planner DAG;
- samples every ``--sample-s``: rows of the plan tables, resident memory of the api-server (with
  its workers) and of the planning task, and whether the task instances and pools agree with the
  newest stored plan (one REPEATABLE READ snapshot: an apply is one transaction, so a plan is
  either wholly visible or not at all).

At the end the stream and the faults stop, and every GPU task instance submitted gets a grace
period to finish. The report (stdout, and JSON with ``--json``) gives cycles (the planner's own
``gpu_scheduler.cycles`` metric, read from a StatsD listener here), faults by kind, task instances
lost (failed, or never created) and stranded (not finished after the grace period), half-applied
snapshots, plan-table rows and memory over time. Exit status 1 if anything was lost, stranded or
half-applied, or if no cycle ran. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import psutil
import pytest
from gpu_airflow_support import PostgresDatabase, postgres_available
from sqlalchemy import create_engine, text
from test_platform_e2e import StatsdListener

from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.embedded import EmbeddedAirflow, session_members
from airflow_gpu_scheduler.examples import example_dags_folder
from airflow_gpu_scheduler.hooks.metadata import FAIL_OPEN_METHOD

sys.path.insert(0, str(HERE / "soak_dags"))
from soak_workload import KINDS

PLANNER_DAG, PLANNER_TASK = "gpu_scheduler", "plan_and_apply"
WATCHDOG_DAG = "gpu_scheduler_watchdog"
GPU_DAGS = [dag_id for dag_id, _, _ in KINDS.values()]
CLUSTER = {"gpu_types": {"h100": {"count": 4, "speed": 1.0}}}
#: Share of each kind in the stream.
MIX = {"quantization": 0.4, "batch_inference": 0.25, "realtime_inference": 0.2, "training": 0.15}
#: How long the planner's database connections are cut again and again (longer than one cycle interval).
TERMINATE_BURST_S = 6.0
FAULTS = ("kill_planner", "terminate_planner_db", "restart_scheduler", "pause_planner")
FINISHED = {"success"}
LOST_STATES = {"failed", "upstream_failed", "removed", "skipped"}


@dataclass
class Soak:
    af: EmbeddedAirflow
    engine: Any
    database: str
    minutes: float
    backlog: int
    sample_s: float
    rng: random.Random
    short: bool
    started: float = field(default_factory=time.time)
    submitted: list[tuple[str, str]] = field(default_factory=list)
    throttled: int = 0
    submit_errors: list[str] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    fault_log: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    half_applied: list[dict] = field(default_factory=list)
    checks: Counter = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    def t(self) -> float:
        return round(time.time() - self.started, 1)

    # ------------------------------------------------------------------ GPU work

    def unfinished(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(
                text("SELECT count(*) FROM dag_run WHERE dag_id = ANY(:dags) AND state IN ('queued', 'running')"),
                {"dags": GPU_DAGS},
            ).scalar()

    def submit_stream(self) -> None:
        n = 0
        kinds, weights = list(MIX), list(MIX.values())
        while not self.stop.is_set():
            self.stop.wait(self.rng.uniform(2.0, 6.0))
            if self.stop.is_set():
                break
            try:
                if self.unfinished() >= self.backlog:
                    self.throttled += 1
                    continue
                kind = self.rng.choices(kinds, weights)[0]
                dag_id, _, seconds = KINDS[kind]
                run_id = f"soak_{kind}_{n:05d}"
                n += 1
                self.af.trigger(dag_id, run_id, conf={"seconds": round(seconds * self.rng.uniform(0.5, 1.5), 1)})
                self.submitted.append((dag_id, run_id))
            except Exception as error:  # noqa: BLE001 - recorded and reported; the stream goes on
                self.submit_errors.append(f"{self.t()} s: {type(error).__name__}: {str(error)[:200]}")

    # ------------------------------------------------------------------ faults

    def planner_process(self) -> psutil.Process | None:
        """The running planning task's process (``task_instance.pid``), if it is one this soak started."""
        with self.engine.connect() as conn:
            pid = conn.execute(
                text(
                    "SELECT pid FROM task_instance WHERE dag_id = :d AND task_id = :t AND state = 'running' "
                    "AND pid IS NOT NULL ORDER BY start_date DESC LIMIT 1"
                ),
                {"d": PLANNER_DAG, "t": PLANNER_TASK},
            ).scalar()
        if pid is None or pid not in session_members(self.af.sessions()):
            return None  # never signal a process outside this Airflow
        try:
            return psutil.Process(pid)
        except psutil.NoSuchProcess:
            return None

    def planner_backends(self, process: psutil.Process) -> list[int]:
        """PostgreSQL backends serving the planning task: matched by the client port of its TCP sockets."""
        try:
            ports = {c.laddr.port for c in process.net_connections(kind="tcp") if c.raddr and c.raddr.port == 5432}
        except psutil.Error:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT pid, client_port FROM pg_stat_activity WHERE datname = :db AND client_port IS NOT NULL"),
                {"db": self.database},
            ).all()
        return [pid for pid, port in rows if port in ports]

    def inject(self, kind: str) -> dict[str, Any] | None:
        """One fault; ``None`` when it could not be injected now (no planning task running)."""
        if kind == "kill_planner":
            process = self.planner_process()
            if process is None:
                return None
            process.send_signal(signal.SIGKILL)
            return {"pid": process.pid}
        if kind == "terminate_planner_db":
            # A burst longer than the cycle interval, so that a cycle's own connections (re-made by the
            # hook's pre-ping) are cut while it collects, plans or applies, not only idle ones between cycles.
            process = self.planner_process()
            if process is None:
                return None
            terminated, end = 0, time.monotonic() + TERMINATE_BURST_S
            with self.engine.connect() as conn:
                while time.monotonic() < end and process.is_running():
                    for backend in self.planner_backends(process):
                        terminated += bool(
                            conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": backend}).scalar()
                        )
                    conn.commit()
                    time.sleep(0.02)  # a cycle's transactions last tens of milliseconds
            if not terminated:
                return None
            return {
                "pid": process.pid,
                "burst_s": TERMINATE_BURST_S,
                "terminated": terminated,
                "planner_survived": process.is_running(),
            }
        if kind == "restart_scheduler":
            down_s = self.rng.uniform(3, 10) if self.short else self.rng.uniform(5, 30)
            self.af.stop_component("scheduler")
            self.stop.wait(down_s)
            self.af.start_component("scheduler")
            return {"down_s": round(down_s, 1)}
        if kind == "pause_planner":
            paused_s = self.rng.uniform(10, 25) if self.short else self.rng.uniform(20, 150)
            self.af.api("PATCH", f"/dags/{PLANNER_DAG}", {"is_paused": True})
            try:
                self.stop.wait(paused_s)
            finally:
                self.af.api("PATCH", f"/dags/{PLANNER_DAG}", {"is_paused": False})
            return {"paused_s": round(paused_s, 1)}
        raise ValueError(kind)

    def inject_faults(self) -> None:
        gap = (8, 20) if self.short else (30, 90)
        self.stop.wait(gap[0] * 2)  # the first plans before the first fault
        order: list[str] = []
        while not self.stop.is_set():
            if not order:
                order = self.rng.sample(FAULTS, len(FAULTS))  # every kind once per round, in random order
            kind = order[0]
            try:
                detail = self.inject(kind)
            except Exception as error:  # noqa: BLE001 - a fault that could not be injected is reported
                detail = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
            if detail is None:
                self.stop.wait(2)  # no planning task right now: try the same kind again shortly
                continue
            order.pop(0)
            if "error" not in detail:
                self.faults[kind] += 1
            self.fault_log.append({"t_s": self.t(), "fault": kind, **detail})
            self.stop.wait(self.rng.uniform(*gap))

    # ------------------------------------------------------------------ samples

    def rss_mb(self, pid: int | None, tree: bool = False) -> float | None:
        if pid is None:
            return None
        try:
            process = psutil.Process(pid)
            members = [process, *(process.children(recursive=True) if tree else [])]
            return round(sum(p.memory_info().rss for p in members if p.is_running()) / 2**20, 1)
        except psutil.Error:
            return None

    def sample(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            plans = conn.execute(text("SELECT count(*) FROM gpu_sched_plan")).scalar()
            jobs = conn.execute(text("SELECT count(*) FROM gpu_sched_plan_job")).scalar()
            runs = conn.execute(
                text("SELECT count(*) FROM dag_run WHERE dag_id IN (:p, :w)"), {"p": PLANNER_DAG, "w": WATCHDOG_DAG}
            ).scalar()
        planner = self.planner_process()
        verdict = self.check_plan_consistency()
        return {
            "t_s": self.t(),
            "plans": plans,
            "plan_jobs": jobs,
            "platform_dag_runs": runs,
            "api_server_rss_mb": self.rss_mb(self.af.pid("api-server"), tree=True),
            "scheduler_rss_mb": self.rss_mb(self.af.pid("scheduler"), tree=False),
            "planner_rss_mb": self.rss_mb(planner.pid) if planner else None,
            "planner_pid": planner.pid if planner else None,
            "consistency": verdict,
        }

    def check_plan_consistency(self) -> str:
        verdict, plan_id, problems = plan_consistency(self.engine)
        self.checks[verdict] += 1
        if problems:
            self.half_applied.append({"t_s": self.t(), "plan_id": plan_id, "problems": problems[:10]})
        return verdict

    def sample_loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append(self.sample())
            except Exception as error:  # noqa: BLE001 - e.g. during a scheduler restart; the next sample counts
                self.samples.append({"t_s": self.t(), "error": f"{type(error).__name__}: {str(error)[:200]}"})
            self.stop.wait(self.sample_s)

    # ------------------------------------------------------------------ the end

    def ti_states(self) -> dict[tuple[str, str], str | None]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT dag_id, run_id, state FROM task_instance WHERE dag_id = ANY(:dags)"), {"dags": GPU_DAGS}
            ).all()
        return {(d, r): s for d, r, s in rows}

    def drain(self, grace_s: float) -> dict[str, Any]:
        """Wait up to ``grace_s`` for every submitted GPU task instance to end; classify each."""
        at_end = self.ti_states()
        open_at_end = sum(1 for run in self.submitted if at_end.get(run) not in FINISHED | LOST_STATES)
        deadline = time.monotonic() + grace_s
        t0 = time.monotonic()
        states = at_end
        while time.monotonic() < deadline:
            states = self.ti_states()
            if all(states.get(run) in FINISHED | LOST_STATES for run in self.submitted):
                break
            time.sleep(5)
        lost = {
            f"{d}/{r}": states.get((d, r))
            for d, r in self.submitted
            if states.get((d, r)) in LOST_STATES or (d, r) not in states
        }
        stranded = {
            f"{d}/{r}": states.get((d, r))
            for d, r in self.submitted
            if (d, r) in states and states[(d, r)] not in FINISHED | LOST_STATES
        }
        by_kind = Counter(d for d, r in self.submitted if states.get((d, r)) == "success")
        return {
            "submitted": len(self.submitted),
            "succeeded": sum(by_kind.values()),
            "succeeded_by_dag": dict(by_kind),
            "unfinished_when_stream_stopped": open_at_end,
            "drain_s": round(time.monotonic() - t0, 1),
            "lost": lost,
            "stranded": stranded,
        }


def plan_consistency(engine) -> tuple[str, int | None, list[str]]:
    """Do the waiting GPU task instances and the GPU pools show exactly one stored plan (or fail-open)?

    Returns ``(verdict, newest plan id, problems)``, the verdict one of ``no_plan``, ``fail_open``,
    ``consistent`` and ``half_applied``. Read in one REPEATABLE READ snapshot (PostgreSQL): an apply is
    one transaction, so a plan and its writes are either wholly in the snapshot or not at all. With
    the newest plan a real one, each pool it wrote has the slots it stored, each waiting task instance
    it decided is in the pool, with the weight, it stored, and a waiting one it did not consider
    (newer than the plan) is still in the intake pool. A plan whose apply stopped half-way would leave
    some of these at the previous plan's values. Task instances the plan saw running are not checked
    (a scheduler restart may hand a queued one back as scheduled; the next plan places it).
    """
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
        newest = (
            conn.execute(text("SELECT id, method, pool_slots FROM gpu_sched_plan ORDER BY id DESC LIMIT 1"))
            .mappings()
            .first()
        )
        if newest is None:
            return "no_plan", None, []
        if newest["method"] == FAIL_OPEN_METHOD:
            return "fail_open", newest["id"], []
        decided = {
            (r.dag_id, r.run_id, r.task_id, r.map_index): r
            for r in conn.execute(
                text(
                    "SELECT dag_id, run_id, task_id, map_index, decision, pool, weight FROM gpu_sched_plan_job "
                    "WHERE plan_id = :id"
                ),
                {"id": newest["id"]},
            )
        }
        waiting = conn.execute(
            text(
                "SELECT dag_id, run_id, task_id, map_index, pool, priority_weight FROM task_instance "
                "WHERE state = 'scheduled' AND (pool = :intake OR pool LIKE 'gpu\\_%')"
            ),
            {"intake": INTAKE_POOL},
        ).all()
        slots = dict(conn.execute(text("SELECT pool, slots FROM slot_pool")).all())
    plan_id = newest["id"]
    problems = [
        f"pool {pool}: {slots.get(pool)} slots, plan {plan_id} wrote {n}"
        for pool, n in json.loads(newest["pool_slots"]).items()
        if slots.get(pool) != n
    ]
    for ti in waiting:
        key = (ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        job = "/".join(map(str, key))
        row = decided.get(key)
        if row is None:
            if ti.pool != INTAKE_POOL:
                problems.append(f"{job} in {ti.pool}, not in plan {plan_id}")
        elif row.decision != "running" and (
            ti.pool != row.pool or (row.weight is not None and ti.priority_weight != row.weight)
        ):
            problems.append(
                f"{job} in {ti.pool} weight {ti.priority_weight}; plan {plan_id} says {row.decision} "
                f"{row.pool} weight {row.weight}"
            )
    return ("half_applied" if problems else "consistent"), plan_id, problems


def platform_runs(engine) -> dict[str, dict[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT dag_id, state, count(*) FROM dag_run WHERE dag_id IN (:p, :w) GROUP BY dag_id, state"),
            {"p": PLANNER_DAG, "w": WATCHDOG_DAG},
        ).all()
    out: dict[str, dict[str, int]] = {}
    for dag_id, state, n in rows:
        out.setdefault(dag_id, {})[state] = n
    return out


def fail_open_plans(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM gpu_sched_plan WHERE method = :m"), {"m": FAIL_OPEN_METHOD}
        ).scalar()


def locked_out_runs(engine) -> int:
    """Planner runs that found the planner lock taken at their first cycle and so ended without planning."""
    with engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(*) FROM xcom WHERE dag_id = :d AND task_id = :t AND key = 'return_value' "
                "AND CAST(value AS TEXT) LIKE :pattern"
            ),
            {"d": PLANNER_DAG, "t": PLANNER_TASK, "pattern": '%"locked_out": true%'},
        ).scalar()


def metric_samples(listener: StatsdListener) -> dict[str, dict[str, Any]]:
    """Each ``gpu_scheduler.*`` metric sent: how often, its type, its largest and its last value."""
    out = {}
    for name, values in sorted(listener.samples("airflow.gpu_scheduler.").items()):
        numbers = [float(v.split("|")[0]) for v in values]
        out[name] = {"type": values[-1].split("|")[1], "count": len(values), "max": max(numbers), "last": numbers[-1]}
    return out


def redis_broker(stack: contextlib.ExitStack) -> str | None:
    """A free Redis database on 127.0.0.1:6379 for Celery, or ``None`` (LocalExecutor) when Redis is not up."""
    from test_e2e_celery import redis_database

    try:
        return stack.enter_context(redis_database())
    except pytest.skip.Exception:
        return None


def every(samples: list[dict], n: int) -> list[dict]:
    """About ``n`` samples spread over the run, the first and last included."""
    good = [s for s in samples if "error" not in s]
    if len(good) <= n:
        return good
    step = (len(good) - 1) / (n - 1)
    return [good[round(i * step)] for i in range(n)]


def report_text(report: dict[str, Any]) -> str:
    r = report
    lines = [
        (
            f"soak: {r['minutes']} min on Airflow {r['airflow']} ({r['executor']}, PostgreSQL), "
            f"{r['cluster_gpus']} GPUs, seed {r['seed']}; started {r['started_utc']}"
        ),
        (
            f"  planning cycles: {r['cycles']} (StatsD gpu_scheduler.cycles); plans stored {r['plans_stored']} "
            f"({r['fail_open_plans']} fail-open); planner runs {r['platform_runs'].get(PLANNER_DAG, {})}, "
            f"watchdog runs {r['platform_runs'].get(WATCHDOG_DAG, {})}; planner runs locked out at their first "
            f"cycle {r['planner_runs_locked_out']}"
        ),
        f"  faults: {sum(r['faults'].values())} ({', '.join(f'{k} {v}' for k, v in sorted(r['faults'].items()))})",
        (
            f"  GPU work: submitted {r['work']['submitted']}, succeeded {r['work']['succeeded']} "
            f"{r['work']['succeeded_by_dag']}; unfinished when the stream stopped "
            f"{r['work']['unfinished_when_stream_stopped']}, all done {r['work']['drain_s']} s later"
        ),
        (
            f"  lost {len(r['work']['lost'])}, stranded {len(r['work']['stranded'])}, half-applied "
            f"{r['checks'].get('half_applied', 0)} (of {sum(r['checks'].values())} snapshots: "
            f"{r['checks'].get('consistent', 0)} consistent with the newest plan, {r['checks'].get('fail_open', 0)} "
            f"in fail-open)"
        ),
        "  over time:   t min   plans  plan_jobs  api-server MB  planner MB  scheduler MB",
    ]

    def mb(value: float | None, width: int) -> str:
        return f"{value:{width}.0f}" if value is not None else "-".rjust(width)

    for s in r["over_time"]:
        lines.append(
            f"             {s['t_s'] / 60:6.1f} {s['plans']:7d} {s['plan_jobs']:10d} "
            f"{mb(s['api_server_rss_mb'], 14)} {mb(s['planner_rss_mb'], 11)} {mb(s['scheduler_rss_mb'], 13)}"
        )
    planner = [s["planner_rss_mb"] for s in r["samples"] if s.get("planner_rss_mb")]
    api = [s["api_server_rss_mb"] for s in r["samples"] if s.get("api_server_rss_mb")]
    if api:
        lines.append(
            f"  api-server RSS MB: first {api[0]:.0f}, max {max(api):.0f}, last {api[-1]:.0f}; planning task "
            f"RSS MB: "
            + (
                f"min {min(planner):.0f}, max {max(planner):.0f} over {len(planner)} samples"
                if planner
                else "never sampled"
            )
        )
    lines.append(
        "  metrics sent (largest value|type, times): "
        + ", ".join(
            f"{name.removeprefix('airflow.gpu_scheduler.')}={m['max']:g}|{m['type']} x{m['count']}"
            for name, m in r["metrics"].items()
        )
    )
    lines.append(f"  verdict: {'PASS' if r['ok'] else 'FAIL'}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if not postgres_available():
        print(
            "soak: PostgreSQL is not reachable on 127.0.0.1:5432 (scripts/setup.sh --services starts it)",
            file=sys.stderr,
        )
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    rng = random.Random(seed)
    home = Path(args.home or tempfile.mkdtemp(prefix="gpu-soak-")).resolve()
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    shutil.copy(example_dags_folder() / "gpu_scheduler.py", dags / "gpu_scheduler.py")
    shutil.copy(HERE / "soak_dags" / "soak_workload.py", dags / "soak_workload.py")
    listener = StatsdListener()
    with contextlib.ExitStack() as stack:
        if not args.keep_home and not args.home:
            stack.callback(shutil.rmtree, home, True)  # registered first: runs last, after Airflow stopped
        stack.callback(listener.close)
        db = stack.enter_context(PostgresDatabase("gpu_soak"))
        url = db.url.render_as_string(hide_password=False)
        broker = None if args.local else redis_broker(stack)
        env = {
            "AIRFLOW__API__HOST": "127.0.0.1",  # nothing the soak starts listens beyond this machine
            "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps(CLUSTER),
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(listener.port),
            "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
            "AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S": "2",
            "AIRFLOW__GPU_SCHEDULER__PLANNING_HORIZON_S": "1800",
            "AIRFLOW__GPU_SCHEDULER__CYCLE_INTERVAL_S": "5",
            "AIRFLOW__GPU_SCHEDULER__FAIL_OPEN_AFTER_S": str(args.fail_open_after_s),
            "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": "64",
        }
        if broker:
            env.update(
                {
                    "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                    "AIRFLOW__CELERY__BROKER_URL": broker,
                    "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + url,
                    "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER": "1",
                    "AIRFLOW__CELERY__TASK_ACKS_LATE": "True",
                    "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "default",
                }
            )
        af = EmbeddedAirflow(home, dags, database_url=url, extra_env=env, parallelism=12)
        stack.callback(af.stop)
        print(
            f"soak: starting Airflow in {home} (database {db.name}, "
            f"{'CeleryExecutor, broker ' + broker if broker else 'LocalExecutor'})",
            flush=True,
        )
        af.start(timeout_s=300)
        if broker:
            # One worker for the platform DAGs and the GPU type's queue: 4 GPUs, the planner, the watchdog.
            af.start_celery_worker("soak-worker", ["default", "gpu-h100"], concurrency=7)
            af.wait_for_celery_workers(["soak-worker"], timeout_s=300)
        af.wait_for_dags([PLANNER_DAG, WATCHDOG_DAG, *GPU_DAGS], timeout_s=300)
        af.set_pool(INTAKE_POOL, 0)
        engine = create_engine(url, pool_pre_ping=True)
        stack.callback(engine.dispose)
        soak = Soak(af, engine, db.name, args.minutes, args.backlog, args.sample_s, rng, short=args.minutes < 10)
        threads = [
            threading.Thread(target=f, daemon=True, name=f.__name__)
            for f in (soak.submit_stream, soak.inject_faults, soak.sample_loop)
        ]
        print(f"soak: running {args.minutes} min", flush=True)
        for thread in threads:
            thread.start()
        soak.stop.wait(args.minutes * 60)
        soak.stop.set()
        for thread in threads:
            thread.join(300)
        # Leave the platform as an operator would after the faults: planner unpaused, scheduler up.
        af.api("PATCH", f"/dags/{PLANNER_DAG}", {"is_paused": False})
        if af.pid("scheduler") is None:
            af.start_component("scheduler")
        work = soak.drain(args.grace_s)
        soak.stop.clear()
        final = soak.sample()
        soak.samples.append(final)
        time.sleep(1)
        cycles = sum(
            int(float(v.split("|")[0]))
            for v in listener.samples("airflow.gpu_scheduler.cycles").get("airflow.gpu_scheduler.cycles", [])
        )
        from importlib.metadata import version

        report = {
            "minutes": args.minutes,
            "seed": seed,
            "airflow": version("apache-airflow"),
            "executor": "CeleryExecutor" if broker else "LocalExecutor",
            "cluster_gpus": 4,
            "started_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(soak.started)),
            "cycles": cycles,
            "plans_stored": final["plans"],
            "fail_open_plans": fail_open_plans(engine),
            "platform_runs": platform_runs(engine),
            "planner_runs_locked_out": locked_out_runs(engine),
            "metrics": metric_samples(listener),
            "faults": dict(soak.faults),
            "fault_log": soak.fault_log,
            "work": work,
            "throttled_submissions": soak.throttled,
            "submit_errors": soak.submit_errors,
            "checks": dict(soak.checks),
            "half_applied": soak.half_applied,
            "over_time": every(soak.samples, 7),
            "samples": soak.samples,
        }
        report["ok"] = (
            not work["lost"] and not work["stranded"] and not soak.half_applied and cycles > 0 and work["submitted"] > 0
        )
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        print(report_text(report), flush=True)
        if not report["ok"]:
            print(
                json.dumps({k: report[k] for k in ("work", "half_applied", "submit_errors", "fault_log")}, default=str)[
                    :4000
                ],
                flush=True,
            )
        return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="soak.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the stream and the faults go on")
    parser.add_argument(
        "--grace-s",
        type=float,
        default=300.0,
        help="how long submitted GPU work may take to finish after the stream stops",
    )
    parser.add_argument("--backlog", type=int, default=12, help="most unfinished GPU runs at once")
    parser.add_argument("--sample-s", type=float, default=20.0, help="seconds between samples")
    parser.add_argument(
        "--fail-open-after-s",
        type=float,
        default=60.0,
        help="the watchdog's [gpu_scheduler] fail_open_after_s (short, so pauses fail open)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed of the stream and the faults")
    parser.add_argument("--json", help="write the whole report (every sample, every fault) here")
    parser.add_argument("--home", help="AIRFLOW_HOME to use (kept); default a temporary one, removed")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary AIRFLOW_HOME (logs)")
    parser.add_argument("--local", action="store_true", help="LocalExecutor even when Redis is up")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be > 0")

    def stop(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds: Airflow stopped, the database dropped, the broker flushed

    # SIGINT too: a shell starts a background job with it ignored, and Python then never raises on it.
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, stop)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
