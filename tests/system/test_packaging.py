"""The published artifacts: what the wheel and sdist hold, and that the wheel installs and runs without matplotlib."""

from __future__ import annotations

import email
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from venvs import ROOT, clean_env, installed

from airflow_gpu_scheduler.demo import DAG_FILES

pytestmark = pytest.mark.airflow

PKG = "airflow_gpu_scheduler"


def source_packages() -> set[str]:
    found = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in (ROOT / PKG).rglob("__init__.py")}
    return found | {f"{PKG}.example_dags"}


def test_the_wheel_holds_the_code_static_files_migrations_example_dags_and_license(distributions):
    wheel, _ = distributions
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(Path(n).parent).replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = source_packages() - packages
    assert not missing, f"packages missing from the wheel (add them to [tool.setuptools] packages): {missing}"
    for path in (
        "plugins/static/gpu_schedule.html",
        "plugins/static/gpu_schedule.js",
        "plugins/static/gpu_schedule.css",
        "db/migrations/alembic.ini",
        "db/migrations/env.py",
        "db/migrations/script.py.mako",
        "example_dags/gpu_scheduler.py",
        "example_dags/gpu_workloads.py",
        "example_dags/gpu_demo_workload.py",
        "demo_workload.py",
        "get_provider_info.py",
        "py.typed",
    ):
        assert f"{PKG}/{path}" in names, path
    versions = {n for n in names if n.startswith(f"{PKG}/db/migrations/versions/") and n.endswith(".py")}
    assert {Path(n).name for n in versions} >= {
        p.name for p in (ROOT / PKG / "db" / "migrations" / "versions").glob("0*.py")
    }
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
        metadata = email.message_from_bytes(zf.read(f"{dist_info}/METADATA"))
    assert "apache_airflow_provider" in entry_points and "airflow.plugins" in entry_points
    assert "gpu-scheduler = airflow_gpu_scheduler.cli:main" in entry_points
    assert metadata["License-Expression"] == "Apache-2.0"
    classifiers = metadata.get_all("Classifier")
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider"} <= set(classifiers)
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in classifiers)
    assert metadata["Keywords"] and metadata.get_all("Project-URL")
    requires = metadata.get_all("Requires-Dist")
    runtime = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith(("apache-airflow<4,>=3.2", "apache-airflow>=3.2,<4")) for r in runtime)
    assert any(r.startswith("numpy") for r in runtime) and not any(r.startswith("matplotlib") for r in runtime)
    assert any(r.startswith("matplotlib") and 'extra == "plots"' in r for r in requires)
    assert "test" not in metadata.get_all("Provides-Extra")
    assert not any(r.startswith(("pytest", "ruff", "playwright", "hypothesis")) for r in requires)


def test_the_build_ignores_no_folder_of_the_package(distributions):
    # setuptools warns when a folder it ships files from is not among `packages`; a later setuptools may
    # then leave it out (the review page's static/ was one).
    log = (distributions[0].parent / "build.log").read_text()
    assert "would be ignored" not in log and "is absent from the `packages` configuration" not in log, [
        line for line in log.splitlines() if "absent from the" in line
    ]


def test_the_sdist_holds_what_a_build_needs(distributions):
    _, sdist = distributions
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "pyproject.toml",
        "dags/gpu_scheduler.py",
        "dags/gpu_workloads.py",
        f"{PKG}/py.typed",
        "docs/design.md",
        "docs/operations.md",
        "docs/benchmark.md",
        "docs/api.md",
        "dags/gpu_demo_workload.py",
        f"{PKG}/plugins/static/gpu_schedule.js",
        f"{PKG}/db/migrations/alembic.ini",
    } <= names


def test_the_wheel_installs_without_matplotlib_and_the_benchmark_runs(fresh_venv, tmp_path):
    dists = installed(fresh_venv)
    print(f"fresh virtualenv: {len(dists)} distributions installed")
    assert "matplotlib" not in dists and "apache-airflow" in dists and "numpy" in dists
    env = clean_env(fresh_venv)
    bench = subprocess.run(
        ["gpu-scheduler", "bench", "--quick", "--scenarios", "steady_mix", "--no-bound", "--policies", "fifo"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert "steady_mix" in bench.stdout
    plots = subprocess.run(
        [
            "gpu-scheduler",
            "bench",
            "--quick",
            "--scenarios",
            "steady_mix",
            "--policies",
            "fifo",
            "--plots",
            str(tmp_path / "png"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert plots.returncode == 2 and "pip install 'airflow-gpu-scheduler[plots]'" in plots.stderr, plots.stderr
    assert not (tmp_path / "png").exists()
    folder = subprocess.run(
        [
            fresh_venv / "python",
            "-c",
            ("from airflow_gpu_scheduler.examples import example_dags_folder as f; print(f())"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert "site-packages" in folder and (Path(folder) / "gpu_scheduler.py").exists()
    # What `gpu-scheduler demo` copies into its DAGs folder, found from the installed wheel.
    assert all((Path(folder) / name).exists() for name in DAG_FILES), sorted(p.name for p in Path(folder).iterdir())
