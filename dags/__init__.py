"""The shipped DAGs, installed as ``airflow_gpu_scheduler.example_dags`` (see ``examples.example_dags_folder``)."""
