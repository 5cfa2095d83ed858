"""The metadata connection: every SQLAlchemy URL Airflow accepts, by the provider's type and the older ones.

Connections are parsed by Airflow's own ``Connection(uri=...)``, exactly as ``airflow connections add
--conn-uri`` stores them; the URL the hook builds from the stored fields must open the same database.
"""

from __future__ import annotations

import json

import pytest
from gpu_airflow_support import PG_ADMIN, postgres_available
from sqlalchemy import text

from airflow_gpu_scheduler.hooks.connection_url import CONN_TYPE, MetadataConnectionError, sqlalchemy_url
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataError, GpuSchedulerMetadataHook

URLS = {
    "postgresql+psycopg2://airflow:p%40ss%2Fw0rd@db.example.com:5433/airflow?sslmode=require": (
        "postgresql+psycopg2",
        "p@ss/w0rd",
        "db.example.com",
        5433,
        "airflow",
        {"sslmode": "require"},
    ),
    "postgresql://airflow:pw@db/airflow": ("postgresql+psycopg2", "pw", "db", None, "airflow", {}),
    "postgres://airflow:pw@db:5432/airflow": ("postgresql+psycopg2", "pw", "db", 5432, "airflow", {}),
    "mysql+mysqldb://airflow:pw@db/airflow?charset=utf8mb4": (
        "mysql+mysqldb",
        "pw",
        "db",
        None,
        "airflow",
        {"charset": "utf8mb4"},
    ),
    "sqlite:////opt/airflow/airflow.db": ("sqlite", None, None, None, "/opt/airflow/airflow.db", {}),
}


def parsed(uri: str):
    from airflow.models.connection import Connection

    return Connection(conn_id="gpu_meta", uri=uri)


@pytest.mark.parametrize("form", ["own type", "older type"])
@pytest.mark.parametrize("uri", list(URLS))
def test_every_airflow_database_url_gives_the_same_database(uri, form):
    conn = parsed(f"gpu-scheduler-metadata://{uri}" if form == "own type" else uri)
    if form == "own type":
        assert conn.conn_type == CONN_TYPE
    driver, password, host, port, database, query = URLS[uri]
    url = sqlalchemy_url(conn)
    assert (url.drivername, url.password, url.host, url.port, url.database, dict(url.query)) == (
        driver,
        password,
        host,
        port,
        database,
        query,
    )


def test_extras_reach_the_driver_as_query_parameters():
    conn = parsed("gpu-scheduler-metadata://postgresql+psycopg2://u@db/airflow?sslmode=verify-full&connect_timeout=10")
    assert conn.extra_dejson == {"sslmode": "verify-full", "connect_timeout": 10}  # Airflow parsed the number
    assert dict(sqlalchemy_url(conn).query) == {"sslmode": "verify-full", "connect_timeout": "10"}


def test_a_whole_url_in_extra_still_works_and_the_password_field_wins():
    from airflow.models.connection import Connection

    conn = Connection(
        conn_id="c",
        conn_type="generic",
        password="from-field",
        extra=json.dumps({"sqlalchemy_url": "postgresql://u:in-url@db/airflow", "sslmode": "require"}),
    )
    url = sqlalchemy_url(conn)
    assert (url.password, url.host, dict(url.query)) == ("from-field", "db", {"sslmode": "require"})


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        (
            {"conn_type": CONN_TYPE, "host": "db.example.com", "schema": "airflow"},
            "Host 'db.example.com' names no SQLAlchemy driver; write it as postgresql\\+psycopg2://db.example.com",
        ),
        ({"conn_type": CONN_TYPE, "schema": "airflow"}, "not a SQLite file's absolute path"),
        (
            {"conn_type": CONN_TYPE, "host": "nosuchdb://db", "schema": "airflow"},
            "unknown SQLAlchemy driver 'nosuchdb'",
        ),
        ({"conn_type": "http", "host": "example.com"}, "unsupported conn_type 'http'"),
        (
            {"conn_type": CONN_TYPE, "host": "postgresql://db", "extra": json.dumps({"options": {"a": 1}})},
            "extra 'options' must be a string, number or list",
        ),
    ],
)
def test_a_connection_that_names_no_usable_database_says_how_to_fix_it(conn, message):
    from airflow.models.connection import Connection

    with pytest.raises(MetadataConnectionError, match=message):
        sqlalchemy_url(Connection(conn_id="bad", **conn))


@pytest.mark.postgres
def test_extras_are_really_passed_to_postgresql(monkeypatch):
    """``application_name`` arrives at the server; ``sslmode=require`` is refused by a server without TLS."""
    if not postgres_available():
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    base = f"gpu-scheduler-metadata://{PG_ADMIN.render_as_string(hide_password=False)}"
    monkeypatch.setenv("AIRFLOW_CONN_GPU_APPNAME", f"{base}?application_name=gpu-sched-conn-test")
    hook = GpuSchedulerMetadataHook("gpu_appname")
    try:
        with hook.get_engine().connect() as conn:
            assert conn.execute(text("SELECT current_setting('application_name')")).scalar() == "gpu-sched-conn-test"
    finally:
        hook.close()
    with hook.get_engine().connect() as conn:
        ssl_on = conn.execute(text("SHOW ssl")).scalar() == "on"
    hook.close()
    if ssl_on:
        pytest.skip("this server speaks TLS, so sslmode=require cannot be shown to reach the driver by a refusal")
    monkeypatch.setenv("AIRFLOW_CONN_GPU_SSL", f"{base}?sslmode=require")
    with pytest.raises(GpuSchedulerMetadataError, match="SSL"):
        GpuSchedulerMetadataHook("gpu_ssl").get_engine()


def test_the_hook_declares_its_own_type_and_form():
    from airflow_gpu_scheduler.get_provider_info import get_provider_info

    assert GpuSchedulerMetadataHook.conn_type == CONN_TYPE
    (declared,) = get_provider_info()["connection-types"]
    assert declared["connection-type"] == CONN_TYPE
    assert declared["hook-class-name"].endswith("GpuSchedulerMetadataHook")
    behaviour = GpuSchedulerMetadataHook.get_ui_field_behaviour()
    assert declared["ui-field-behaviour"]["relabeling"] == behaviour["relabeling"]
