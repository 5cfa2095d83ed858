"""One planning cycle's glue between Airflow's rows and the pure core.

Nothing here touches a database or imports Airflow (``tests/core/test_core_is_pure.py`` keeps
it so): the hook (:mod:`airflow_gpu_scheduler.hooks`) reads rows into the snapshot types of
:mod:`.snapshot`, and these modules turn them into the core's jobs and back into records.

- :mod:`.snapshot`: what the hook reads (job identity, GPU task instances, snapshots).
- :mod:`.serialized_dag`: declarations and default weights out of ``serialized_dag`` documents.
- :mod:`.cluster_config`: the cluster from a JSON file or an Airflow Variable.
- :mod:`.workload`: task-instance rows -> the core's queued and running jobs.
- :mod:`.loop`: the re-planning rule and planner kept between cycles of one run.
- :mod:`.records`: a plan -> the stored plan record, and whether its decisions changed.
- :mod:`.fail_open`: the watchdog's decisions when the planner is down.
"""
