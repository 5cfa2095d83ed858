"""The few REST calls (``/api/v2``) that drive the embedded Airflow: log in, trigger, wait, set states."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any


class AirflowApiError(RuntimeError):
    """A REST call to the embedded Airflow failed; names the call and the answer."""


class AirflowRestClient:
    """REST calls of :class:`~airflow_gpu_scheduler.dev.embedded.EmbeddedAirflow` (expects ``base_url``,
    ``users``, ``_token`` and ``_check_alive``)."""

    users: Mapping[str, tuple[str, str]]
    _token: str | None

    @property
    def base_url(self) -> str:  # the embedded Airflow's api-server
        raise NotImplementedError

    def _check_alive(self) -> None:  # the embedded Airflow checks its processes
        pass

    def token(self) -> str:
        if self._token is None:
            user = next(iter(self.users))
            answer = self._request(
                "POST", "/auth/token", {"username": user, "password": self.users[user][1]}, auth=False
            )
            self._token = answer["access_token"]
        return self._token

    def _request(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if auth:
            request.add_header("Authorization", f"Bearer {self.token()}")
        try:
            # Generous: on a loaded machine SQLite requests can wait for the write lock.
            with urllib.request.urlopen(request, timeout=120) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as error:
            raise AirflowApiError(f"{method} {path} -> {error.code}: {error.read().decode()[:500]}") from None
        return json.loads(text) if text else None

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health`` (no login needed): what the UI's home page shows per component."""
        with urllib.request.urlopen(f"{self.base_url}/api/v2/monitor/health", timeout=30) as answer:
            return json.loads(answer.read().decode())

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call ``/api/v2``: ``api("GET", "/pools")``."""
        return self._request(method, "/api/v2" + path, body)

    def wait_for_dags(self, dag_ids: list[str], timeout_s: float = 120.0) -> None:
        """Wait until the dag-processor has parsed these DAGs (and none of our files fails to import)."""
        deadline = time.monotonic() + timeout_s
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            self._check_alive()
            errors = self.api("GET", "/importErrors").get("import_errors", [])
            if errors:
                raise RuntimeError(f"DAG import errors: {errors}")
            missing = [d for d in dag_ids if not self._dag_exists(d)]
            if not missing:
                return
            time.sleep(1)
        raise TimeoutError(f"DAGs not parsed after {timeout_s} s: {missing}")

    def _dag_exists(self, dag_id: str) -> bool:
        try:
            self.api("GET", f"/dags/{dag_id}")
        except AirflowApiError:
            return False
        return True

    def set_pool(self, name: str, slots: int) -> None:
        """Create or resize a pool."""
        try:
            self.api("PATCH", f"/pools/{name}", {"pool": name, "slots": slots, "include_deferred": False})
        except AirflowApiError:
            self.api("POST", "/pools", {"name": name, "slots": slots, "include_deferred": False})

    def trigger(self, dag_id: str, run_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Trigger a run with logical date now (so arrival order is the tie-break)."""
        logical_date = datetime.now(timezone.utc).isoformat()
        body = {"dag_run_id": run_id, "logical_date": logical_date, "conf": dict(conf or {})}
        # On SQLite the API now and then answers 500 "Database error" after waiting for the
        # file's write lock. The run id makes a retry safe: 409 means the first attempt did land.
        for attempt in range(3):
            try:
                self.api("POST", f"/dags/{dag_id}/dagRuns", body)
                return run_id
            except AirflowApiError as error:
                if attempt and "-> 409" in str(error):
                    return run_id
                if "-> 500" not in str(error) or attempt == 2:
                    raise
                time.sleep(1.0)
        return run_id

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")["state"]

    def wait_for_runs(self, runs: list[tuple[str, str]], timeout_s: float = 300.0) -> dict[tuple[str, str], str]:
        """Wait until every (dag_id, run_id) has finished; returns their states."""
        deadline = time.monotonic() + timeout_s
        states: dict[tuple[str, str], str] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            states = {run: self.run_state(*run) for run in runs}
            if all(s in ("success", "failed") for s in states.values()):
                return states
            time.sleep(1)
        raise TimeoutError(f"runs not finished after {timeout_s} s: {states}")

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """Set a task instance's state (e.g. ``success`` stops a running task)."""
        self.api(
            "PATCH",
            f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}",
            {"new_state": state},
        )

    def active_runs(self, dag_id: str) -> list[str]:
        """Run ids of the DAG's queued or running runs."""
        answer = self.api("GET", f"/dags/{dag_id}/dagRuns?state=queued&state=running")
        return [run["dag_run_id"] for run in answer.get("dag_runs", [])]

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> None:
        self.api(
            "POST",
            f"/dags/{dag_id}/clearTaskInstances",
            {
                "dry_run": False,
                "dag_run_id": run_id,
                "task_ids": [task_id],
                "only_failed": False,
                "reset_dag_runs": True,
            },
        )
