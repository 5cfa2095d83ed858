"""Provider metadata read by Airflow's ``ProvidersManager`` (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.hooks.connection_url import CONN_TYPE, UI_FIELD_BEHAVIOUR

#: The project's home; its README is the documentation.
PROJECT_URL = "https://github.com/airflow-gpu-scheduler/airflow-gpu-scheduler"
DOCS_URL = f"{PROJECT_URL}#readme"


def get_provider_info() -> dict:
    """Describe the provider: hooks, operators, connection type, settings, plugin and DB manager."""
    return {
        "package-name": "airflow-gpu-scheduler",
        "name": "GPU Scheduler",
        "description": "Plans the order in which GPU work starts (Pyomo + HiGHS) and applies it "
        "through Airflow pools, pool slots and priority weights.",
        "integrations": [
            {
                "integration-name": "GPU Scheduler",
                "external-doc-url": DOCS_URL,
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "GPU Scheduler",
                "python-modules": [
                    "airflow_gpu_scheduler.operators.schedule",
                    "airflow_gpu_scheduler.operators.fail_open",
                ],
            }
        ],
        "hooks": [{"integration-name": "GPU Scheduler", "python-modules": ["airflow_gpu_scheduler.hooks.metadata"]}],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": "airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook",
                "hook-name": "GPU Scheduler metadata database",
                # Airflow >= 3.2 reads the form's behaviour from here without importing the hook.
                "ui-field-behaviour": {
                    "hidden-fields": UI_FIELD_BEHAVIOUR["hidden_fields"],
                    "relabeling": UI_FIELD_BEHAVIOUR["relabeling"],
                    "placeholders": UI_FIELD_BEHAVIOUR["placeholders"],
                },
            }
        ],
        "config": config.provider_config(),
        "plugins": [
            {"name": "gpu_scheduler", "plugin-class": "airflow_gpu_scheduler.plugins.gpu_schedule.GpuSchedulePlugin"}
        ],
        "db-managers": ["airflow_gpu_scheduler.db.manager.GpuSchedulerDBManager"],
    }
