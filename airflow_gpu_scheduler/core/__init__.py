"""The planning core: workload, planner, baselines, simulator, scenarios, metrics.

Pure Python + Pyomo + HiGHS; it never imports Airflow, so it runs and is tested without it.
"""
