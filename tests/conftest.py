"""The whole suite: one private AIRFLOW_HOME per test process.

The home is made here, before any test module imports airflow, so that no test reads or writes a developer's
``~/airflow``; ``tests/system/gpu_airflow_support.py`` reuses it (and makes its own when a script such as
``tests/system/soak.py`` imports it outside pytest).

Each folder's conftest marks its tests: ``tests/unit/`` ``unit``, ``tests/system/`` ``system``.
"""

from __future__ import annotations

import os
import tempfile

HOME = tempfile.mkdtemp(prefix="gpu-sched-tests-")
os.environ["AIRFLOW_HOME"] = HOME
os.environ["GPU_SCHED_TEST_HOME"] = f"{os.getpid()}:{HOME}"
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
