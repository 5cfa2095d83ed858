"""A real Airflow 3 (scheduler, dag-processor, triggerer, api-server) started as child processes.

Used by ``gpu-scheduler demo`` and by the end-to-end tests: one class that owns an
``AIRFLOW_HOME``, the environment of the components, their start and stop, and the few
REST calls (``/api/v2``) needed to drive them. Works with SQLite (absolute path) and
PostgreSQL, with the simple auth manager and a fixed login; the LocalExecutor by default,
or the CeleryExecutor (set it in ``extra_env``) with Celery workers added by
:meth:`EmbeddedAirflow.start_celery_worker`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from airflow_gpu_scheduler.dev.airflow_api import AirflowApiError, AirflowRestClient
from airflow_gpu_scheduler.dev.processes import (
    WORKER_HOSTNAME_ENV,
    free_port,
    session_members,
    stop_sessions,
    worker_hostname,
)

#: Every component ``airflow standalone`` starts: without a triggerer the UI's health check shows it red
#: (and deferrable tasks would never resume).
COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")


@dataclass
class EmbeddedAirflow(AirflowRestClient):
    """One Airflow installation in ``home``.

    :param home: AIRFLOW_HOME (created); logs of the components go to ``home/logs/<component>.log``.
    :param dags_folder: folder of DAG files to serve.
    :param database_url: SQLAlchemy URL of the metadata DB; default SQLite in ``home``.
    :param port: api-server port (default: a free one).
    :param users: simple auth manager logins ``{user: (role, password)}``.
    :param extra_env: more environment (``AIRFLOW_VAR_*``, ``AIRFLOW_CONN_*``, config).
    """

    home: Path
    dags_folder: Path
    database_url: str | None = None
    port: int = 0
    users: Mapping[str, tuple[str, str]] = field(default_factory=lambda: {"admin": ("admin", "admin")})
    extra_env: Mapping[str, str] = field(default_factory=dict)
    parallelism: int = 8

    def __post_init__(self) -> None:
        self.home = Path(self.home).resolve()
        self.dags_folder = Path(self.dags_folder).resolve()
        self.port = self.port or free_port()
        if self.database_url is None:
            self.database_url = f"sqlite:///{self.home / 'airflow.db'}"
        # SQLite keeps its default 5 s lock timeout on purpose: the api-server mixes sync and async
        # (aiosqlite) connections to the same file, and a longer wait measured here stalled the
        # whole api-server for that long (task heartbeats timed out) instead of failing one request.
        self._procs: dict[str, subprocess.Popen] = {}
        self._sessions: set[int] = set()
        self._started: set[str] = set()
        self._token: str | None = None

    # ------------------------------------------------------------------ environment

    @property
    def base_url(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def sqlalchemy_url(self) -> URL:
        assert self.database_url is not None  # __post_init__ sets it
        return make_url(self.database_url)

    def metadata_connection_json(self) -> str:
        """The ``gpu_scheduler_metadata`` connection (the provider's type) for this database, as Airflow JSON."""
        url = self.sqlalchemy_url
        if url.get_backend_name() == "sqlite":
            return json.dumps({"conn_type": "gpu_scheduler_metadata", "schema": url.database})
        return json.dumps(
            {
                "conn_type": "gpu_scheduler_metadata",
                "host": f"{url.drivername}://{url.host}",
                "port": url.port,
                "login": url.username,
                "password": url.password,
                "schema": url.database,
                "extra": json.dumps(dict(url.query)),
            }
        )

    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        venv_bin = str(Path(sys.executable).parent)
        base["PATH"] = venv_bin + os.pathsep + base.get("PATH", "")
        admin_user = next(iter(self.users))
        base.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                    f"{u}:{role}" for u, (role, _) in self.users.items()
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                "AIRFLOW__API_AUTH__JWT_SECRET": "gpu-scheduler-embedded-jwt-secret",
                "AIRFLOW__API__SECRET_KEY": "gpu-scheduler-embedded-secret-key",
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.sqlalchemy_url.render_as_string(hide_password=False),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                "AIRFLOW_CONN_GPU_SCHEDULER_METADATA": self.metadata_connection_json(),
                "_AIRFLOW_EMBEDDED_ADMIN": admin_user,
            }
        )
        base.update(self.extra_env)
        return base

    # ------------------------------------------------------------------ lifecycle

    def migrate(self) -> None:
        """``airflow db migrate``: Airflow's tables and, through the provider's DB manager, the plan tables."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({u: pw for u, (_, pw) in self.users.items()}))
        with open(self.home / "logs" / "db-migrate.log", "w") as log:
            done = subprocess.run(
                ["airflow", "db", "migrate"],
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=300,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed; see {self.home / 'logs' / 'db-migrate.log'}")
        if self.sqlalchemy_url.get_backend_name() == "sqlite":
            # Scheduler, api-server, task supervisors and the planner all write this one file:
            # write-ahead logging lets readers proceed while one writes (the mode is stored in the file).
            import sqlite3

            database = self.sqlalchemy_url.database
            assert database is not None  # a file, which every component opens
            with contextlib.closing(sqlite3.connect(database)) as db:
                db.execute("PRAGMA journal_mode=WAL")

    def start(self, timeout_s: float = 120.0) -> None:
        """Migrate, start the components, and wait until the API answers."""
        self.migrate()
        for component in COMPONENTS:
            self.start_component(component)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(f"{self.base_url}/api/v2/monitor/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"Airflow api-server not healthy after {timeout_s} s; logs in {self.home / 'logs'}")

    def start_component(self, component: str) -> None:
        """Start one of :data:`COMPONENTS` (or start it again after :meth:`stop_component`: its log goes on)."""
        if component not in COMPONENTS:
            raise ValueError(f"unknown component {component!r}; one of {COMPONENTS}")
        if component in self._procs and self._procs[component].poll() is None:
            raise ValueError(f"airflow {component} is already running")
        args = ["airflow", component]
        if component == "api-server":
            args += ["--port", str(self.port), "--workers", "1"]
        elif component == "triggerer":
            # Its log server has a fixed port that a second Airflow on the machine would collide on;
            # the api-server reads trigger logs from the shared log folder instead.
            args += ["--skip-serve-logs"]
        mode = "a" if component in self._started else "w"
        log = open(self.home / "logs" / f"{component}.log", mode)  # noqa: SIM115 - lives as long as the process
        self._started.add(component)
        self._procs[component] = subprocess.Popen(
            args, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._sessions.add(self._procs[component].pid)

    def stop_component(self, component: str, timeout_s: float = 20.0) -> None:
        """Stop one running component (SIGTERM to its process group, SIGKILL after ``timeout_s``), as an operator would.

        Only the component's own process group is signalled: task processes it started in groups of
        their own keep running, as they do when a real scheduler restarts (they are stopped with the rest
        by :meth:`stop`).
        """
        proc = self._procs.pop(component)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def pid(self, component: str) -> int | None:
        """Process id of a running component (``None`` if it is not running)."""
        proc = self._procs.get(component)
        return proc.pid if proc is not None and proc.poll() is None else None

    def sessions(self) -> set[int]:
        """The sessions of every component started since :meth:`start` (led by, or holding, its processes)."""
        return set(self._sessions)

    def start_celery_worker(self, name: str, queues: list[str], concurrency: int) -> None:
        """Start ``airflow celery worker`` serving only ``queues`` (call after :meth:`start`).

        The worker reports ``name`` as the hostname of every task instance it runs, writes its
        pid file and log under ``home`` and serves no logs (workers here share one machine).
        """
        if name in self._procs:
            raise ValueError(f"a component named {name!r} is already running")
        env = {
            **self.env(),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "airflow_gpu_scheduler.dev.processes.worker_hostname",
            WORKER_HOSTNAME_ENV: name,
        }
        args = [
            "airflow",
            "celery",
            "worker",
            "--queues",
            ",".join(queues),
            "--concurrency",
            str(concurrency),
            "--celery-hostname",
            f"{name}@%h",
            "--pid",
            str(self.home / f"{name}.pid"),
            "--skip-serve-logs",
            "--without-gossip",
            "--without-mingle",
        ]
        log = open(self.home / "logs" / f"{name}.log", "w")  # noqa: SIM115 - lives as long as the process
        self._procs[name] = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._sessions.add(self._procs[name].pid)

    def wait_for_celery_workers(self, names: list[str], timeout_s: float = 120.0) -> None:
        """Wait until each named worker logs that it is ready to take tasks."""
        deadline = time.monotonic() + timeout_s
        waiting = list(names)
        while time.monotonic() < deadline:
            self._check_alive()
            waiting = [
                n for n in waiting if " ready." not in (self.home / "logs" / f"{n}.log").read_text(errors="replace")
            ]
            if not waiting:
                return
            time.sleep(0.5)
        raise TimeoutError(f"Celery workers not ready after {timeout_s} s: {waiting}; logs in {self.home / 'logs'}")

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"airflow {name} exited with {proc.returncode}; see {self.home / 'logs' / (name + '.log')}"
                )

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the components this object started, and everything they started, politely then firmly.

        Each component leads a session of its own; the executor runs each task in a process
        group of its own inside the scheduler's session, which a signal to the component's
        group does not reach. Those are stopped afterwards, by session.
        """
        # Also the sessions of components stopped and started again: tasks they ran may still run.
        sessions = {proc.pid for proc in self._procs.values()} | self._sessions
        for proc in self._procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self._procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self._procs.clear()
        stop_sessions(sessions)
        self._sessions.clear()

    def __enter__(self) -> EmbeddedAirflow:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def remove(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


__all__ = [
    "COMPONENTS",
    "WORKER_HOSTNAME_ENV",
    "AirflowApiError",
    "EmbeddedAirflow",
    "free_port",
    "session_members",
    "stop_sessions",
    "worker_hostname",
]
