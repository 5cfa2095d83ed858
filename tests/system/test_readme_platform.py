"""The README's platform section, run line by line as written, in a fresh virtualenv, on PostgreSQL and SQLite.

A copy of the repository's files stands in for a fresh clone. Before the README's planning cycle,
GPU work is put in the metadata database (a scheduler would put it there); the cycle must plan it
through the connection the README made. Then the connection is made again with the command the
README used to give (``--conn-uri "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"``, type
``postgresql+psycopg2``/``sqlite``), and the next cycle must plan through that one too.
"""

from __future__ import annotations

import contextlib
import re
import subprocess

import pytest
from gpu_airflow_support import database_url
from metadata_seed import Seeder
from sqlalchemy import create_engine, select, text
from venvs import ROOT, clean_env

from airflow_gpu_scheduler.models import plan_table

pytestmark = pytest.mark.airflow


def readme_platform_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## For platform teams", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def fresh_clone(dest) -> None:
    """The files a clone would have: tracked and new, not ignored ones."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(source.read_bytes())


def shell(line: str, env: dict, cwd) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", line],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"README line failed: {line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def seed_gpu_work(url: str, run_id: str, seed: Seeder) -> None:
    if "gpu_jobs" not in seed.versions:
        seed.dag("gpu_jobs", {"train": {"declaration": {"kind": "training", "gpus": 2, "estimate_s": 600}}})
    seed.run("gpu_jobs", run_id)
    seed.task_instances([{"dag_id": "gpu_jobs", "run_id": run_id, "task_id": "train", "pool_slots": 2, "waited_s": 30}])


def planned_pool(url: str, run_id: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(
                text("SELECT pool FROM task_instance WHERE dag_id = 'gpu_jobs' AND run_id = :r"), {"r": run_id}
            ).scalar()
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_every_platform_command_in_the_readme_works_as_written(backend, fresh_venv, tmp_path):
    commands = readme_platform_commands()
    assert commands[0].startswith("pip install") and commands[-1].startswith("airflow dags test")
    clone = tmp_path / "clone"
    clone.mkdir()
    fresh_clone(clone)
    with contextlib.ExitStack() as stack:
        url = database_url(backend, tmp_path / "db", stack)
        env = clean_env(
            fresh_venv,
            AIRFLOW_HOME=str(tmp_path / "airflow-home"),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=url,
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
        )
        seed = None
        for line in commands:
            if line.startswith("airflow dags test"):
                seed = Seeder(url)
                seed_gpu_work(url, "r0", seed)
            output = shell(line, env, clone)
        assert "success" in output.lower()
        assert planned_pool(url, "r0") in ("gpu_h100", "gpu_l4"), output[-3000:]
        engine = create_engine(url)
        with engine.connect() as conn:
            methods = [m for (m,) in conn.execute(select(plan_table.c.method))]
            conn_type = conn.execute(
                text("SELECT conn_type FROM connection WHERE conn_id = 'gpu_scheduler_metadata'")
            ).scalar()
        engine.dispose()
        assert conn_type == "gpu_scheduler_metadata" and methods and "fail_open" not in methods

        # The connection the README used to make still plans.
        shell("airflow connections delete gpu_scheduler_metadata", env, clone)
        shell(
            'airflow connections add gpu_scheduler_metadata --conn-uri "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"',
            env,
            clone,
        )
        seed_gpu_work(url, "r1", seed)
        shell(commands[-1], env, clone)
        assert planned_pool(url, "r1") in ("gpu_h100", "gpu_l4")
        seed.engine.dispose()
