"""Provider metadata read by Airflow's ``ProvidersManager`` (``apache_airflow_provider`` entry point)."""

from __future__ import annotations


def get_provider_info() -> dict:
    """Describe the provider: its hooks, operators, plugin, connection type and DB manager."""
    return {
        "package-name": "airflow-gpu-scheduler",
        "name": "GPU Scheduler",
        "description": "Plans the order in which GPU work starts (Pyomo + HiGHS) and applies it "
        "through Airflow pools, pool slots and priority weights.",
        "integrations": [
            {
                "integration-name": "GPU Scheduler",
                "external-doc-url": "https://github.com/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {"integration-name": "GPU Scheduler", "python-modules": ["airflow_gpu_scheduler.operators.schedule",
                                                                 "airflow_gpu_scheduler.operators.fail_open"]}
        ],
        "hooks": [
            {"integration-name": "GPU Scheduler", "python-modules": ["airflow_gpu_scheduler.hooks.metadata"]}
        ],
        "plugins": [
            {"name": "gpu_scheduler", "plugin-class": "airflow_gpu_scheduler.plugins.gpu_schedule.GpuSchedulePlugin"}
        ],
        "db-managers": ["airflow_gpu_scheduler.db_manager.GpuSchedulerDBManager"],
    }
