"""Development tooling shipped with the package, never used by the provider at runtime.

- :mod:`.embedded`: a real Airflow 3 started as child processes (the demo and the end-to-end tests).
- :mod:`.demo`: ``gpu-scheduler demo`` (``./scripts/demo.sh``); :mod:`.demo_workload` its jobs (the shipped
  ``gpu_demo_workload`` DAGs import it) and :mod:`.demo_report` its table.

Importing this package imports nothing; only :mod:`.embedded` and :mod:`.demo` start processes.
"""
