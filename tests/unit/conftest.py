"""Unit tests: the planning core (``core/``) and the provider's Airflow side (``airflow/``), with no service
(no PostgreSQL, Redis or browser) and no Airflow process (no scheduler, api-server or ``airflow`` command).

They import airflow where the code does, in the private AIRFLOW_HOME that tests/conftest.py made. Every test
here is marked ``unit``; ``scripts/test.sh --fast`` runs them, less those marked ``slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.unit)
