"""Moved to :mod:`airflow_gpu_scheduler.dev.demo_workload` (development tooling); this name stays importable."""

import sys

from airflow_gpu_scheduler.dev import demo_workload as _moved

sys.modules[__name__] = _moved
