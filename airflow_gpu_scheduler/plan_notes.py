"""Moved to :mod:`airflow_gpu_scheduler.cycle.notes` (the text of each task instance's plan note)."""

import sys

from airflow_gpu_scheduler.cycle import notes as _moved

sys.modules[__name__] = _moved
