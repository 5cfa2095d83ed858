"""On a real Airflow (scheduler, dag-processor, api-server): the connection's Test button, and the cycle's metrics.

- The UI's Test button is ``POST /api/v2/connections/test`` (enabled by ``[core] test_connection``): a
  connection of the provider's type is tested by the provider's hook, which says whether the database
  is an Airflow schema it knows; the form's field behaviour reaches the UI.
- With ``[metrics] statsd_on``, the planning task (a Task SDK worker) sends the cycle's metrics to a
  StatsD listener on localhost that the test runs; the test reads them from it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time

import pytest
from gpu_airflow_support import database_url

from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.examples import example_dags_folder

pytestmark = pytest.mark.airflow

CLUSTER = {"gpu_types": {"h100": {"count": 2, "speed": 1.0}}}


class StatsdListener:
    """Collects StatsD lines (``name:value|type``) sent to a UDP port on 127.0.0.1."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            self.lines.extend(line for line in data.decode(errors="replace").splitlines() if line)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def samples(self, prefix: str) -> dict[str, list[str]]:
        """``{metric name: ["value|type", ...]}`` of the lines whose name starts with ``prefix``."""
        out: dict[str, list[str]] = {}
        for line in list(self.lines):
            name, _, rest = line.partition(":")
            if name.startswith(prefix):
                out.setdefault(name, []).append(rest)
        return out


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    home = tmp_path_factory.mktemp("platform-e2e")
    dags = home / "dags"
    dags.mkdir()
    for name in ("gpu_scheduler.py", "gpu_workloads.py"):
        shutil.copy(example_dags_folder() / name, dags / name)
    listener = StatsdListener()
    with contextlib.ExitStack() as stack:
        stack.callback(listener.close)
        url = database_url("sqlite", home, stack)
        af = EmbeddedAirflow(
            home,
            dags,
            database_url=url,
            extra_env={
                "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps(CLUSTER),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
                "AIRFLOW__METRICS__STATSD_ON": "True",
                "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
                "AIRFLOW__METRICS__STATSD_PORT": str(listener.port),
                "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
                "AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S": "10",
                "AIRFLOW__GPU_SCHEDULER__PLANNING_HORIZON_S": "3600",
                "AIRFLOW__GPU_SCHEDULER__CYCLE_INTERVAL_S": "3",
            },
        )
        stack.callback(af.stop)
        af.start()
        af.wait_for_dags(["gpu_scheduler", "example_gpu_quantization"])
        af.listener = listener
        yield af


def test_the_test_button_runs_the_providers_hook(airflow):
    url = airflow.sqlalchemy_url
    body = {"connection_id": "gpu_button", "conn_type": "gpu_scheduler_metadata", "schema": url.database}
    answer = airflow.api("POST", "/connections/test", body)
    assert answer["status"] is True, answer
    assert "Airflow metadata database with the plan tables" in answer["message"]
    wrong = airflow.api("POST", "/connections/test", {**body, "schema": str(airflow.home / "missing" / "x.db")})
    assert wrong["status"] is False and "cannot reach the metadata database" in wrong["message"], wrong
    no_driver = airflow.api("POST", "/connections/test", {**body, "host": "db.example.com", "schema": "airflow"})
    assert no_driver["status"] is False and "names no SQLAlchemy driver" in no_driver["message"], no_driver


def test_the_connection_form_knows_the_type(airflow):
    meta = {m["connection_type"]: m for m in airflow._request("GET", "/ui/connections/hook_meta")}
    ours = meta["gpu_scheduler_metadata"]
    assert ours["hook_name"] == "GPU Scheduler metadata database"
    assert ours["standard_fields"]["host"]["title"] == "Host (driver://host)"
    assert ours["standard_fields"]["url_schema"]["title"] == "Database"
    assert ours["standard_fields"]["host"]["placeholder"].startswith("postgresql+psycopg2://")


def test_every_cycle_reports_its_metrics_to_statsd(airflow):
    airflow.set_pool("gpu_intake", 0)
    for dag_id in ("gpu_scheduler", "example_gpu_quantization"):
        airflow.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
    work = airflow.trigger("example_gpu_quantization", "metrics_work")
    planner = airflow.trigger("gpu_scheduler", "metrics_plan", conf={"repeat_for_s": 40})
    states = airflow.wait_for_runs([("example_gpu_quantization", work), ("gpu_scheduler", planner)], timeout_s=420)
    assert set(states.values()) == {"success"}, states
    time.sleep(1)  # the last datagrams
    samples = airflow.listener.samples("airflow.gpu_scheduler.")
    print(
        "\n".join(
            f"{name}:{max(values, key=lambda v: float(v.split('|')[0]))}  (largest of {len(values)})"
            for name, values in sorted(samples.items())
        )
    )
    expected = {
        "cycles": "c",
        "cycle.duration": "ms",
        "plan.duration": "ms",
        "plan.status.optimal": "c",
        "plan.method.milp": "c",
        "tasks.waiting": "g",
        "tasks.held": "g",
        "tasks.released": "g",
        "tasks.running": "g",
        "tasks.rejected": "g",
        "gpus.busy.h100": "g",
        "plan.utilization": "g",
        "plan.utilization_airflow": "g",
    }
    for name, kind in expected.items():
        values = samples.get(f"airflow.gpu_scheduler.{name}")
        assert values, f"no airflow.gpu_scheduler.{name} in {sorted(samples)}"
        assert all(v.split("|")[1] == kind for v in values), (name, values)
    # Six 1-GPU jobs on two GPUs: some cycle saw both GPUs busy and released work.
    assert max(float(v.split("|")[0]) for v in samples["airflow.gpu_scheduler.gpus.busy.h100"]) == 2
    assert max(float(v.split("|")[0]) for v in samples["airflow.gpu_scheduler.tasks.released"]) >= 1
    if "airflow.gpu_scheduler.plan.gap" in samples:
        assert all(float(v.split("|")[0]) >= 0 for v in samples["airflow.gpu_scheduler.plan.gap"])
