"""The core never imports Airflow: it must run (and be benchmarked) without it."""

import pkgutil
import subprocess
import sys

import airflow_gpu_scheduler.core as core


def test_core_and_cli_import_without_airflow():
    modules = [m.name for m in pkgutil.walk_packages(core.__path__, "airflow_gpu_scheduler.core.")]
    modules.append("airflow_gpu_scheduler.cli")
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(modules) > 10
