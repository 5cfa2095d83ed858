"""The docker/ deployment read as data: ONE description that the compose test checks and the
Celery end-to-end test runs without Docker (same executor settings, same workers and queues,
same cluster file). Imported by name: pytest puts this folder on sys.path.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from airflow_gpu_scheduler.cluster_config import cluster_from_json
from airflow_gpu_scheduler.core.levers import executor_queue
from airflow_gpu_scheduler.core.workload import Cluster

REPO = Path(__file__).parents[2]
DOCKER = REPO / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yaml"
CLUSTER_FILE = DOCKER / "cluster.json"
#: Settings of the deployment that do not depend on where its services run: the end-to-end
#: test applies them unchanged (hosts and credentials differ, so URLs are rebuilt there).
PORTABLE_SETTINGS = (
    "AIRFLOW__CORE__EXECUTOR",
    "AIRFLOW__CORE__PARALLELISM",
    "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER",
    "AIRFLOW__CELERY__TASK_ACKS_LATE",
    "AIRFLOW__OPERATORS__DEFAULT_QUEUE",
)


@dataclass(frozen=True)
class CeleryWorker:
    """One ``celery worker`` service of the compose file."""

    service: str
    hostname: str
    queues: tuple[str, ...]
    concurrency: int


@dataclass(frozen=True)
class Deployment:
    compose: dict[str, Any]
    common_env: dict[str, str]
    workers: tuple[CeleryWorker, ...]
    cluster_json: str

    @property
    def cluster(self) -> Cluster:
        return cluster_from_json(self.cluster_json, str(CLUSTER_FILE))

    def portable_env(self) -> dict[str, str]:
        return {key: str(self.common_env[key]) for key in PORTABLE_SETTINGS}

    def workers_for_queue(self, queue: str) -> list[CeleryWorker]:
        return [w for w in self.workers if queue in w.queues]

    def gpu_workers(self) -> dict[str, CeleryWorker]:
        """``{gpu_type: the worker serving its queue}`` (exactly one each, or KeyError/ValueError)."""
        out = {}
        for gpu_type in self.cluster.gpu_types:
            (worker,) = self.workers_for_queue(executor_queue(gpu_type))
            out[gpu_type.name] = worker
        return out


def parse_worker_command(service: str, spec: dict[str, Any]) -> CeleryWorker | None:
    """The worker's queues and concurrency from ``command: celery worker -q Q --concurrency N``."""
    command = spec.get("command")
    words = shlex.split(command) if isinstance(command, str) else list(command or [])
    if words[:2] != ["celery", "worker"]:
        return None
    queues, concurrency = ("default",), 16  # Airflow's defaults when the flags are absent
    for i, word in enumerate(words):
        if word in ("-q", "--queues"):
            queues = tuple(q for q in words[i + 1].split(",") if q)
        elif word in ("-c", "--concurrency"):
            concurrency = int(words[i + 1])
    return CeleryWorker(service, spec.get("hostname", service), queues, concurrency)


def load_deployment() -> Deployment:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    common_env = {k: str(v) for k, v in compose["x-airflow-common"]["environment"].items()}
    workers = tuple(w for name, spec in compose["services"].items() if (w := parse_worker_command(name, spec)))
    return Deployment(compose, common_env, workers, CLUSTER_FILE.read_text())
