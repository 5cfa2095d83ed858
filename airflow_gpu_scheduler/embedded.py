"""Moved to :mod:`airflow_gpu_scheduler.dev.embedded` (development tooling); this name stays importable."""

import sys

from airflow_gpu_scheduler.dev import embedded as _moved

sys.modules[__name__] = _moved
