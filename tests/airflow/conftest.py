"""Airflow-side tests: the support module sets a private AIRFLOW_HOME before airflow is imported."""

import gpu_airflow_support  # noqa: F401
