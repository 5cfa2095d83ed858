"""One planning cycle's glue between Airflow's rows and the pure core.

Nothing here runs SQL or imports Airflow (``tests/unit/core/test_core_is_pure.py`` keeps it so; only
reading the cluster Variable imports the Task SDK, when it is called): the hook
(:mod:`airflow_gpu_scheduler.hooks`) reads rows into the snapshot types of :mod:`.snapshot`, and
these modules turn them into the core's jobs and back into records and notes.

- :mod:`.snapshot`: what the hook reads (job identity, GPU task instances, snapshots).
- :mod:`.serialized_dag`: declarations and default weights out of ``serialized_dag`` documents.
- :mod:`.cluster_config`: the cluster from a JSON file or an Airflow Variable.
- :mod:`.workload`: task-instance rows -> the core's queued and running jobs.
- :mod:`.loop`: the re-planning rule and planner kept between cycles of one run.
- :mod:`.records`: a plan -> the stored plan record, and whether its decisions changed.
- :mod:`.notes`: the text of each task instance's plan note (written by
  :mod:`~airflow_gpu_scheduler.hooks.notes`).
- :mod:`.fail_open`: the watchdog's decisions when the planner is down.
"""
