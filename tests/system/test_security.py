"""Security (issue 5, point 8): no SQL built from strings, and the metadata connection's
credentials never reach a log, an XCom summary or a stored plan."""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest
from metadata_seed import Seeder
from sqlalchemy.engine import make_url

import airflow_gpu_scheduler.operators.fail_open as watchdog
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook
from airflow_gpu_scheduler.operators.fail_open import release_if_planner_down
from airflow_gpu_scheduler.operators.schedule import schedule_cycle

ROOT = Path(__file__).parents[2]
SQL_SINKS = {"text", "execute", "exec_driver_sql", "DDL"}
PASSWORD = "s3cr3t-Hunter2-pw"


def _dynamic(node: ast.AST) -> bool:
    """A string assembled at run time: f-string, concatenation, % or .format()."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"


def test_no_sql_is_built_from_strings_in_the_provider():
    offenders = []
    for path in [*(ROOT / "airflow_gpu_scheduler").rglob("*.py"), *(ROOT / "dags").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and node.args:
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in SQL_SINKS and _dynamic(node.args[0]):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], f"SQL assembled from strings (use SQLAlchemy Core and bound parameters): {offenders}"


def test_the_guard_catches_what_it_should():
    bad = ast.parse('conn.execute(text(f"SELECT * FROM t WHERE a = {x}"))').body[0].value.args[0]
    assert _dynamic(bad.args[0]) and not _dynamic(ast.parse('"SELECT 1"').body[0].value)


@pytest.mark.postgres
def test_credentials_never_reach_logs_xcom_or_stored_plans(metadata_url, monkeypatch, caplog):
    url = make_url(metadata_url)
    if url.get_backend_name() != "postgresql":
        pytest.skip("the password is only sent to PostgreSQL (the test server trusts local connections)")
    monkeypatch.setenv(
        "AIRFLOW_CONN_GPU_SECRET",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": url.host,
                "port": url.port,
                "login": url.username,
                "password": PASSWORD,
                "schema": url.database,
            }
        ),
    )
    monkeypatch.setattr(watchdog, "_stats", lambda: type("S", (), {"incr": print, "gauge": print})())
    seed = Seeder(metadata_url)
    hook = GpuSchedulerMetadataHook("gpu_secret")
    try:
        seed.dag(
            "gpu_jobs",
            {
                "train": {"declaration": {"kind": "training", "gpus": 2, "estimate_s": 60}},
                "bad": {"declaration": {"kind": "training", "gpus": 99}},
            },
        )
        seed.run("gpu_jobs", "r0")
        seed.task_instances(
            [
                {"dag_id": "gpu_jobs", "run_id": "r0", "task_id": t, "pool_slots": 2, "waited_s": 900}
                for t in ("train", "bad")
            ]
        )
        caplog.set_level(logging.DEBUG)
        log = logging.getLogger("gpu_scheduler.security")
        cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})
        outputs = [
            release_if_planner_down(hook, 300.0, lambda: cluster, log=log),
            schedule_cycle(hook, RolloutPlanner(PlannerConfig(time_limit_s=1.0)), cluster, log=log),
            hook.test_connection(),
            hook.get_plans(),
        ]
        stored = json.dumps(outputs, default=str)
        assert outputs[0]["action"] == "released" and outputs[1]["plan_id"]
        assert PASSWORD not in stored, "a summary (XCom) or a stored plan holds the password"
        assert PASSWORD not in caplog.text, "a log line holds the password"
        assert PASSWORD not in repr(hook.get_engine().url)
    finally:
        hook.close()
        seed.clear()
