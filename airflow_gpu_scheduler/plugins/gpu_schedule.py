"""The provider's Airflow plugin (loaded through the ``airflow.plugins`` entry point).

It adds "GPU Schedule" under Browse in the Airflow 3 UI: an iframe view of the review page
that the plugin's FastAPI app serves in the api-server (see :mod:`.review_api`).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_gpu_scheduler.plugins.review_api import URL_PREFIX, create_app


class GpuSchedulePlugin(AirflowPlugin):
    """Airflow plugin of the GPU scheduler provider: the plan review page and its JSON API."""

    name = "gpu_scheduler"
    # Annotated as AirflowPlugin declares them (mypy rejects a ClassVar over its attributes).
    fastapi_apps: list[dict[str, Any]] = [  # noqa: RUF012
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "GPU Schedule"}
    ]
    external_views: list[dict[str, Any]] = [
        {  # noqa: RUF012
            "name": "GPU Schedule",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "gpu-schedule",
        }
    ]
