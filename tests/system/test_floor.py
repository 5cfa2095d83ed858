"""The oldest supported Airflow minor (the newest 3.2.x from PyPI) passes a small end-to-end run.

The full suite runs on the Airflow of ``.venv``; this test makes (once, then reuses) a virtualenv with
the wheel and ``apache-airflow>=3.2,<3.3`` and runs ``floor_e2e.py`` there: ``airflow db migrate``
creates the plan tables through the provider's DB manager, and one planned cycle is applied.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from venvs import cached_venv, clean_env, installed

pytestmark = pytest.mark.airflow

FLOOR = "apache-airflow>=3.2,<3.3"
# Airflow 3.2 leaves FastAPI uncapped, and its execution API does not start under FastAPI releases newer
# than itself (the dag-processor exits: "TITerminalStatePayload needs a discriminator field"). Airflow's
# constraints files pin FastAPI, and Airflow 3.3 caps it below 0.137: the one pin the floor run needs.
FLOOR_PINS = ["fastapi<0.137"]


def test_the_lowest_supported_airflow_minor_plans_and_applies(distributions, tmp_path):
    with cached_venv("airflow-floor", distributions[0], [FLOOR, *FLOOR_PINS]) as bin_dir:
        airflow_version = installed(bin_dir)["apache-airflow-core"]
        assert airflow_version.startswith("3.2."), airflow_version
        done = subprocess.run(
            [bin_dir / "python", Path(__file__).with_name("floor_e2e.py"), tmp_path / "home"],
            env=clean_env(bin_dir),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"floor run on Airflow {result['airflow']}: {result}")
    assert result["airflow"] == airflow_version
    assert set(result["states"].values()) == {"success"}, result
    assert {"gpu_sched_plan", "gpu_sched_plan_job", "alembic_version_gpu_sched"} <= set(result["plan_tables"])
    assert any(p["method"] != "fail_open" and p["due"] > 0 for p in result["plans"]), result["plans"]
    assert result["pools"] and set(result["pools"]) == {"gpu_h100"}, result["pools"]
