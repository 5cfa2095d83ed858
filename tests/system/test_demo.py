"""``./scripts/demo.sh`` as the README writes it: its options, its errors, a whole run, and stopping it with SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from airflow_gpu_scheduler.embedded import free_port, session_members

ROOT = Path(__file__).parents[2]
DEMO = ["./scripts/demo.sh"]
TABLE_LINES = (
    "GPU utilization",
    "priority-weighted output",
    "training gang (4 GPUs) wait",
    "real-time wait",
    "jobs finished in the window",
)


def run_demo_script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*DEMO, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def test_demo_help_shows_its_options():
    done = run_demo_script("--help")
    assert done.returncode == 0, done.stderr
    for option in ("--exit", "--port", "--home"):
        assert option in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--port", "http"], "--port must be an integer, got 'http'"),
        (["--port", "70000"], "--port must be between 1 and 65535, got 70000"),
    ],
)
def test_demo_errors_go_to_stderr_with_a_nonzero_exit(args, message):
    done = run_demo_script(*args)
    assert done.returncode == 2
    assert message in done.stderr and done.stdout == ""


def _wait_for_line(log: Path, pattern: str, proc: subprocess.Popen, timeout_s: float) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the demo exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(1)
    raise TimeoutError(f"no line matching {pattern!r} after {timeout_s} s:\n{log.read_text()[-3000:]}")


def _favours_alone(label: str, cells: list[str]) -> bool:
    """Does this table line favour Airflow alone (measured columns)?"""

    def number(cell: str) -> float:
        return float(re.sub(r"[^0-9.]", "", cell.split(" of ")[0]))

    alone, planned = number(cells[0]), number(cells[1])
    if label.startswith(("GPU utilization", "priority-weighted output", "jobs finished")):
        return alone > planned
    return planned > alone  # waits: lower is better


@pytest.mark.airflow
def test_the_readme_demo_command_runs_the_workload_and_exits(tmp_path):
    """``./scripts/demo.sh --exit``, verbatim: health all green while it runs, the table, a reason for
    every line where Airflow alone is ahead, and nothing left running afterwards."""
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*DEMO, "--exit"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = _wait_for_line(log, r"Airflow is up: (http://localhost:\d+)", proc, 300).group(1)
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=30) as answer:
            health = json.loads(answer.read())
        assert {name: part["status"] for name, part in health.items() if isinstance(part, dict)} == {
            "metadatabase": "healthy",
            "scheduler": "healthy",
            "triggerer": "healthy",
            "dag_processor": "healthy",
        }
        started = [p for p in psutil.Process(proc.pid).children(recursive=True)]
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    output = log.read_text()
    print(output[output.index("What ran") :])
    rows = {}
    for line in output.splitlines():
        for label in TABLE_LINES:
            if line.strip().startswith(label):
                rows[label] = re.split(r"\s{2,}", line.strip())[1:]
    assert set(rows) == set(TABLE_LINES), output
    assert all(len(cells) == 4 for cells in rows.values()), rows
    favouring = [label for label, cells in rows.items() if _favours_alone(label, cells)]
    explained = re.findall(
        r"^  - (GPU utilization|priority-weighted output|training gang wait|real-time wait|"
        r"jobs finished):",
        output,
        re.MULTILINE,
    )
    assert [label.split()[0] for label in favouring] == [label.split()[0] for label in explained], (
        favouring,
        explained,
    )
    assert "Stopping Airflow" in output
    assert not [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _task_processes(members: list[int], sessions: set[int]) -> list[int]:
    """Task processes: the executor starts each in a process group of its own, inside the scheduler's session."""
    out = []
    for pid in members:
        try:
            if pid not in sessions and os.getpgid(pid) == pid:
                out.append(pid)
        except ProcessLookupError:
            continue
    return out


@pytest.mark.airflow
def test_sigterm_stops_every_process_the_demo_started(tmp_path):
    """A closed terminal or a container stop: SIGTERM mid-run stops Airflow's components and the running tasks."""
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gpu-scheduler"),
                "demo",
                "--home",
                str(tmp_path / "home"),
                "--port",
                str(free_port()),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_line(log, r"Submitting", proc, 300)
        components = {p.pid: " ".join(p.cmdline()) for p in psutil.Process(proc.pid).children()}
        for name in ("scheduler", "dag-processor", "triggerer", "api_server"):
            assert any(name in cmdline for cmdline in components.values()), components
        sessions = set(components)  # each component leads its own session
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _task_processes(session_members(sessions), sessions):
            time.sleep(1)
        started = session_members(sessions)
        tasks = _task_processes(started, sessions)
        assert tasks, "no GPU task was running when the demo was stopped"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:  # the test failed first: still stop Airflow the way the demo does
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    assert "Stopped by SIGTERM" in log.read_text()
    survivors = [
        pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert survivors == [] and session_members(sessions) == [], survivors
    print(f"SIGTERM stopped {len(started)} processes, {len(tasks)} of them running tasks")


def test_the_forecast_plans_like_the_platform_dag(monkeypatch):
    """The demo forecasts with the planning task's settings; a change to one must reach the other.

    The platform DAG takes its planner knobs from ``[gpu_scheduler]``; the demo sets them through
    ``AIRFLOW__GPU_SCHEDULER__*`` in its Airflow's environment, from the forecast's own config.
    """
    from airflow_gpu_scheduler.example_dags import gpu_scheduler

    from airflow_gpu_scheduler import config, demo, demo_report
    from airflow_gpu_scheduler.operators.schedule import configured_planner

    task = gpu_scheduler.dag.get_task("plan_and_apply")
    assert task.planner_config is None and task.repeat_every_s is None, "the DAG must leave these to the settings"
    for name, value in demo.planner_settings().items():
        monkeypatch.setenv(name, value)
    assert configured_planner() == demo_report.PLANNER_CONFIG
    assert config.get_float("cycle_interval_s") == demo_report.CYCLE_S
    assert config.get_float("replan_interval_s") == demo_report.REPLAN_S
    assert all((demo.SOURCE_DAGS / name).exists() for name in demo.DAG_FILES)
