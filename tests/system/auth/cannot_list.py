"""An auth manager that cannot say which DAGs a user may read, as a real api-server loads it."""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class CannotListDagsAuthManager(SimpleAuthManager):
    """Airflow's simple auth manager, except that listing a user's readable DAGs is not implemented
    (as in auth managers that only answer per-resource questions)."""

    def get_authorized_dag_ids(self, *, user, method="GET", session=None) -> set[str]:
        raise NotImplementedError("this auth manager cannot list the DAGs a user may read")
