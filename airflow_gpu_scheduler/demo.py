"""``gpu-scheduler demo``: a real Airflow with the provider, a GPU workload run twice, and what happened.

Starts an embedded Airflow 3 (SQLite, LocalExecutor, simple auth manager, login admin/admin)
with the platform DAG and the example workloads of ``dags/``, then feeds the same workload
twice on a 4-GPU H100 cluster:

1. **Airflow alone**: the GPU pool simply has 4 slots and Airflow's scheduler dispatches by
   priority weight and arrival, as it would without this provider.
2. **Planned**: the pool starts closed and the ``gpu_scheduler`` DAG plans and applies.

It prints, from the task instances' recorded start and end times, how long each job
waited, the GPU utilization and the makespan of both runs, then keeps Airflow running so
you can look at it in the UI (Ctrl-C stops it; ``--exit`` stops right away).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import bindparam, create_engine, text

from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.embedded import EmbeddedAirflow, free_port
from airflow_gpu_scheduler.examples import example_dags_folder
from airflow_gpu_scheduler.hooks.metadata import to_epoch

GPUS = 4
CLUSTER = {"gpu_types": {"h100": {"count": GPUS, "speed": 1.0}}}
SOURCE_DAGS = example_dags_folder()
WORKLOAD_DAGS = ["example_gpu_quantization", "example_gpu_batch_inference", "example_gpu_training",
                 "example_gpu_realtime_inference"]
#: (seconds after the first submission, DAG): small jobs first, the big gang and a burst later.
SUBMISSIONS = [(0.0, "example_gpu_quantization"), (1.0, "example_gpu_batch_inference"),
               (4.0, "example_gpu_training"), (12.0, "example_gpu_realtime_inference"),
               (14.0, "example_gpu_quantization")]
PRIORITY = {"example_gpu_training": 10.0, "example_gpu_realtime_inference": 5.0,
            "example_gpu_batch_inference": 2.0, "example_gpu_quantization": 1.0}


def _port(wanted: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
        except OSError:
            return free_port()
    return wanted


def _say(message: str) -> None:
    print(message, flush=True)


def submit(af: EmbeddedAirflow, tag: str) -> list[tuple[str, str]]:
    runs = []
    t0 = time.monotonic()
    for i, (at, dag_id) in enumerate(SUBMISSIONS):
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        runs.append((dag_id, af.trigger(dag_id, f"{tag}_{i}")))
    return runs


def recorded(af: EmbeddedAirflow, runs: list[tuple[str, str]]) -> list[dict]:
    """Task instances of the runs, with epoch start/end/ready times as Airflow recorded them."""
    query = text(
        "SELECT ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.pool_slots, ti.start_date, ti.end_date, "
        "ti.scheduled_dttm, dr.start_date AS run_start FROM task_instance ti JOIN dag_run dr "
        "ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id WHERE ti.run_id IN :runs"
    ).bindparams(bindparam("runs", expanding=True))
    engine = create_engine(af.sqlalchemy_url)
    try:
        with engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(query, {"runs": [r for _, r in runs]}).mappings()]
    finally:
        engine.dispose()
    for row in rows:
        row["start_s"], row["end_s"] = to_epoch(row["start_date"]), to_epoch(row["end_date"])
        row["ready_s"] = to_epoch(row["scheduled_dttm"]) or to_epoch(row["run_start"])
    return [r for r in rows if r["start_s"] is not None and r["end_s"] is not None]


def summarize(rows: list[dict]) -> dict[str, float]:
    first = min(r["ready_s"] for r in rows)
    start, end = min(r["start_s"] for r in rows), max(r["end_s"] for r in rows)
    busy = sum(r["pool_slots"] * (r["end_s"] - r["start_s"]) for r in rows)
    waits = {(r["dag_id"], r["task_id"], r["map_index"], r["run_id"]): r["start_s"] - r["ready_s"] for r in rows}
    weighted = sum(PRIORITY[d] * w for (d, *_), w in waits.items()) / sum(PRIORITY[d] for d, *_ in waits)
    train = [w for (d, *_), w in waits.items() if d == "example_gpu_training"]
    rt = [w for (d, *_), w in waits.items() if d == "example_gpu_realtime_inference"]
    return {"makespan_s": end - first, "utilization": busy / (GPUS * (end - start)),
            "priority_weighted_wait_s": weighted, "training_wait_s": max(train) if train else float("nan"),
            "realtime_wait_s": max(rt) if rt else float("nan"), "jobs": len(rows)}


def run_phase(af: EmbeddedAirflow, tag: str) -> dict[str, float]:
    runs = submit(af, tag)
    states = af.wait_for_runs(runs, timeout_s=600)
    failed = [run for run, state in states.items() if state != "success"]
    if failed:
        raise RuntimeError(f"workload runs failed: {failed}; task logs are in {af.home / 'logs'}")
    return summarize(recorded(af, runs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-scheduler demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default=".airflow-demo", help="AIRFLOW_HOME of the demo (wiped at start)")
    parser.add_argument("--port", type=int, default=8080, help="UI/API port (a free one if taken)")
    parser.add_argument("--exit", action="store_true", help="stop Airflow after printing the summary")
    args = parser.parse_args(argv)

    if not (SOURCE_DAGS / "gpu_scheduler.py").exists():
        _say(f"error: the shipped DAGs are missing from {SOURCE_DAGS}; reinstall airflow-gpu-scheduler")
        return 2
    home = Path(args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    (home / "dags").mkdir(parents=True)
    for name in ("gpu_scheduler.py", "gpu_workloads.py"):
        shutil.copy(SOURCE_DAGS / name, home / "dags" / name)

    af = EmbeddedAirflow(home, home / "dags", port=_port(args.port), extra_env={
        "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps(CLUSTER),
        # The demo's jobs run for seconds, not hours: a 10 s grid near now, plans every 5 s.
        "AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S": "10", "AIRFLOW__GPU_SCHEDULER__PLANNING_HORIZON_S": "7200",
        "AIRFLOW__GPU_SCHEDULER__PLANNING_BUDGET_S": "5", "AIRFLOW__GPU_SCHEDULER__CYCLE_INTERVAL_S": "5",
        # Nothing runs until the demo says so: first Airflow alone, then the planner.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    })
    _say(f"Starting Airflow in {home} (SQLite, LocalExecutor) ...")
    try:
        af.start()
        af.wait_for_dags(["gpu_scheduler", *WORKLOAD_DAGS])
        for dag_id in WORKLOAD_DAGS:
            af.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        _say(f"Airflow is up: {af.base_url}  (login admin / admin)")

        _say(f"\n[1/2] Airflow alone: one {GPUS}-slot GPU pool, Airflow's own dispatch ...")
        af.set_pool(INTAKE_POOL, GPUS)
        alone = run_phase(af, "alone")

        _say("[2/2] Planned: the pool is closed and the gpu_scheduler DAG plans every 5 s ...")
        af.set_pool(INTAKE_POOL, 0)
        af.api("PATCH", "/dags/gpu_scheduler", {"is_paused": False})
        af.api("POST", "/dags/gpu_scheduler/dagRuns", {"dag_run_id": "demo_start", "logical_date": None})
        planned = run_phase(af, "planned")

        _say("\nWhat actually ran (from the task instances' recorded start and end times):")
        _say(f"  {'':28}{'Airflow alone':>15}{'planned':>12}")
        for key, label in [("training_wait_s", "training job (4 GPUs) wait"), ("realtime_wait_s", "real-time job wait"),
                           ("priority_weighted_wait_s", "priority-weighted wait"), ("makespan_s", "makespan"),
                           ("utilization", "GPU utilization")]:
            fmt = "{:>14.0%}" if key == "utilization" else "{:>13.1f} s"
            _say(f"  {label:28}{fmt.format(alone[key]):>15}{fmt.format(planned[key]):>12}")
        _say("  (The demo's jobs last seconds, so the planner's 5 s cycle and task start-up show up as idle GPU\n"
             "   time; with jobs of minutes to hours they do not. Plans and their solver status: gpu_sched_plan.)")
        _say(f"\nUI: {af.base_url}  login: admin / admin   (pools, task instances, the gpu_scheduler DAG;"
             " plans are in the gpu_sched_plan tables)")
        if args.exit:
            return 0
        _say("Airflow keeps running; press Ctrl-C to stop it.")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except Exception as error:  # noqa: BLE001 - the demo reports, it does not dump a traceback
        _say(f"error: {error}")
        return 1
    finally:
        _say("Stopping Airflow ...")
        af.stop()


if __name__ == "__main__":
    sys.exit(main())
