"""airflow-gpu-scheduler: plan the order in which GPU work starts, and make Airflow follow the plan."""

__version__ = "0.1.0"
