"""docker/ is valid and is the deployment the Celery end-to-end test runs.

No Docker engine runs in CI, so the compose file is checked as data: YAML, the services of
Airflow's official compose, one worker per GPU type on that type's queue with one process per
GPU, and the settings the end-to-end test takes from it. ``docker compose config`` is run too
where the compose plugin exists.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib.metadata import version

import pytest
from compose_deployment import CLUSTER_FILE, COMPOSE_FILE, DOCKER, PORTABLE_SETTINGS, REPO, load_deployment
from sqlalchemy.engine import make_url

from airflow_gpu_scheduler.core.levers import executor_queue

AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
}


@pytest.fixture(scope="module")
def deployment():
    return load_deployment()


def test_compose_has_the_official_services_and_every_airflow_service_runs_our_image(deployment):
    services = deployment.compose["services"]
    assert {"postgres", "redis", *AIRFLOW_SERVICES} <= set(services)
    airflow_services = AIRFLOW_SERVICES | {w.service for w in deployment.workers}
    for name in airflow_services:
        spec = services[name]
        assert spec["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}, name
        assert spec["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        for dependency in spec.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    commands = {name: services[name]["command"] for name in AIRFLOW_SERVICES - {"airflow-init"}}
    assert commands == {
        "airflow-apiserver": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }


def test_the_image_is_the_airflow_version_the_tests_run_and_installs_the_provider_from_the_repo():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert base == f"apache/airflow:{version('apache-airflow')}"
    for source in re.findall(r"^COPY\s+(?:--\S+\s+)*(.+)\s+\S+$", dockerfile, re.MULTILINE):
        for path in source.split():
            assert (REPO / path).exists(), f"Dockerfile copies missing {path}"
    assert '"/opt/gpu-scheduler[postgres,celery]"' in dockerfile


def test_one_worker_per_gpu_type_serves_only_its_queue_with_one_process_per_gpu(deployment):
    cluster = deployment.cluster
    workers = deployment.gpu_workers()
    assert len(cluster.gpu_types) >= 2, "the demo shows routing between at least two GPU types"
    for gpu_type in cluster.gpu_types:
        worker = workers[gpu_type.name]
        assert worker.queues == (executor_queue(gpu_type),), worker
        assert worker.concurrency == gpu_type.count, worker
    # The planning task goes to the default queue; exactly one non-GPU worker serves it.
    default_queue = deployment.common_env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
    (platform,) = deployment.workers_for_queue(default_queue)
    assert platform not in workers.values()
    assert len({w.hostname for w in deployment.workers}) == len(deployment.workers)


def test_settings_the_end_to_end_test_reuses_are_there_and_point_at_the_compose_services(deployment):
    env = deployment.common_env
    assert set(PORTABLE_SETTINGS) <= set(env)
    assert env["AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER"] == "1"
    assert int(env["AIRFLOW__CORE__PARALLELISM"]) >= deployment.cluster.total_gpus + 1
    broker, backend = env["AIRFLOW__CELERY__BROKER_URL"], env["AIRFLOW__CELERY__RESULT_BACKEND"]
    assert broker.startswith("redis://") and "@redis:6379" in broker
    # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, which Airflow does not install: name the driver.
    assert backend.startswith("db+postgresql+psycopg2://")
    metadata = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert metadata.host == "postgres" and metadata.drivername == "postgresql+psycopg2"
    assert make_url(backend.removeprefix("db+")).host == "postgres"
    # The planner's connection reaches the same database Airflow uses.
    from airflow.models.connection import Connection

    from airflow_gpu_scheduler.hooks.connection_url import CONN_TYPE, sqlalchemy_url

    conn = Connection.from_json(env["AIRFLOW_CONN_GPU_SCHEDULER_METADATA"], conn_id="gpu_scheduler_metadata")
    assert conn.conn_type == CONN_TYPE
    url = sqlalchemy_url(conn)
    assert (url.drivername, url.host, url.username, url.password, url.database) == (
        metadata.drivername,
        metadata.host,
        metadata.username,
        metadata.password,
        metadata.database,
    )
    assert url.port in (metadata.port, 5432)
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:8080/")


def test_dags_cluster_and_login_are_mounted_where_the_services_read_them(deployment):
    common = deployment.compose["x-airflow-common"]
    mounts = {target.split(":")[0]: source for source, target in (v.split(":", 1) for v in common["volumes"])}
    assert (DOCKER / mounts["/opt/airflow/dags"] / "gpu_scheduler.py").exists()
    assert (DOCKER / mounts["/opt/airflow/dags"] / "gpu_workloads.py").exists()
    assert (DOCKER / mounts["/opt/airflow/cluster.json"]).resolve() == CLUSTER_FILE.resolve()
    init = "\n".join(deployment.compose["services"]["airflow-init"]["command"])
    assert "airflow db migrate" in init and "variables set gpu_scheduler_cluster" in init
    assert "/opt/airflow/cluster.json" in init
    env = deployment.common_env
    passwords = json.loads((DOCKER / mounts[env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]]).read_text())
    users = dict(u.split(":") for u in env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(","))
    assert set(passwords) == set(users) and users["admin"] == "admin"


@pytest.mark.skipif(shutil.which("docker") is None, reason="the docker CLI is not installed")
def test_docker_compose_config_accepts_the_file():
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
    if plugin.returncode != 0:
        pytest.skip(f"the docker compose plugin is not installed: {plugin.stderr.strip()[:200]}")
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        cwd=DOCKER,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
