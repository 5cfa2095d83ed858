"""The core never imports Airflow: it must run (and be benchmarked) without it. Nor does the glue of
one planning cycle (``airflow_gpu_scheduler.cycle``): it turns rows the hook read into the core's jobs
and plans into records, and may use the hook's row types (``cycle.snapshot``) and the plan record
types (``db.records``), never Airflow's ORM, the hook itself, an operator or the plugin."""

import pkgutil
import subprocess
import sys

import airflow_gpu_scheduler.core as core
import airflow_gpu_scheduler.cycle as cycle


def imported_by(modules: list[str]) -> list[str]:
    """The ``airflow`` and upper-layer modules that importing ``modules`` loads (in a fresh interpreter).

    Upper layers: the hook (but not the types of it the glue may use), the operators, the plugin, the DB manager.
    """
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "upper = ('airflow_gpu_scheduler.hooks.', 'airflow_gpu_scheduler.operators', 'airflow_gpu_scheduler.plugins',"
        " 'airflow_gpu_scheduler.db.manager', 'airflow_gpu_scheduler.schema_check')\n"
        # The hook's types the glue may use: the notes it writes (plain SQLAlchemy, no Airflow).
        "types = ('airflow_gpu_scheduler.hooks.notes',)\n"
        "bad = sorted(m for m in sys.modules if (m == 'airflow' or m.startswith(('airflow.', *upper)))"
        " and m not in types)\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return [] if done.returncode == 0 else [done.stdout, done.stderr]


def test_core_and_cli_import_without_airflow():
    modules = [m.name for m in pkgutil.walk_packages(core.__path__, "airflow_gpu_scheduler.core.")]
    modules.append("airflow_gpu_scheduler.cli")
    assert imported_by(modules) == []
    assert len(modules) > 10


def test_the_cycle_glue_imports_neither_airflow_nor_the_layers_above_it():
    modules = [m.name for m in pkgutil.walk_packages(cycle.__path__, "airflow_gpu_scheduler.cycle.")]
    modules += [
        "airflow_gpu_scheduler.db.records",
        "airflow_gpu_scheduler.db.models",
        "airflow_gpu_scheduler.authoring",
    ]
    assert imported_by(modules) == []
    assert {
        "airflow_gpu_scheduler.cycle.snapshot",
        "airflow_gpu_scheduler.cycle.records",
        "airflow_gpu_scheduler.cycle.fail_open",
        "airflow_gpu_scheduler.cycle.workload",
        "airflow_gpu_scheduler.cycle.notes",
    } <= set(modules)
