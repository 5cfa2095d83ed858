"""The provider's Airflow plugin (loaded through the ``airflow.plugins`` entry point).

It registers only its name for now; the plan review page is a separate piece of work.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class GpuSchedulePlugin(AirflowPlugin):
    """Airflow plugin of the GPU scheduler provider."""

    name = "gpu_scheduler"
