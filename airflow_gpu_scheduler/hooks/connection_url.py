"""The SQLAlchemy URL of a metadata-database connection, whichever way the connection was made.

The provider's own connection type ``gpu_scheduler_metadata``:

- Host names the SQLAlchemy driver as its protocol, ``postgresql+psycopg2://db.example.com``, as an
  HTTP connection's host names ``https://``. Airflow's URI form fills it so:
  ``gpu-scheduler-metadata://postgresql+psycopg2://airflow:pw@db:5432/airflow?sslmode=require``,
  which is ``"gpu-scheduler-metadata://$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"`` in a shell.
- Port, Login, Password, and Schema (the database). SQLite: no Host, Schema is the file's
  absolute path (Airflow parses ``sqlite:////path/airflow.db`` so, and accepts only absolute paths).

Older connections keep working: types ``postgres``, ``mysql`` and ``sqlite``, and a driver name
as the type (``postgresql+psycopg2``, ``mysql+mysqldb``: what ``--conn-uri
"$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"`` makes). Any type may instead carry a whole URL in its
extra as ``sqlalchemy_url`` (Login and Password, if set, replace the URL's own).

Every other extra key goes to the driver as a URL query parameter (``sslmode``,
``connect_timeout``, SQLite's ``timeout``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

#: The provider's own connection type.
CONN_TYPE = "gpu_scheduler_metadata"
#: Extra key holding a whole SQLAlchemy URL.
URL_EXTRA = "sqlalchemy_url"
#: Drivers of the older, provider-neutral connection types.
_DRIVER_OF_TYPE = {"postgres": "postgresql+psycopg2", "postgresql": "postgresql+psycopg2", "mysql": "mysql+mysqldb"}

#: How the connection form shows the type (Airflow's ``ui-field-behaviour``). Every standard field
#: applies to a database (host with driver, port, login, password, database, extra as driver
#: options), so none is hidden; labels and placeholders say what goes where.
UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden_fields": [],
    "relabeling": {"host": "Host (driver://host)", "schema": "Database"},
    "placeholders": {
        "host": "postgresql+psycopg2://db.example.com (SQLite: leave empty)",
        "port": "5432",
        "schema": "airflow (SQLite: the file's absolute path, /opt/airflow/airflow.db)",
        "login": "airflow",
        "password": "the metadata database's password",
        "extra": '{"sslmode": "require"}  (driver options, passed as URL query parameters)',
    },
}


class ConnectionLike(Protocol):
    conn_id: str
    conn_type: str | None
    host: str | None
    port: int | None
    login: str | None
    password: str | None
    schema: str | None

    @property
    def extra_dejson(self) -> dict: ...


class MetadataConnectionError(ValueError):
    """The connection does not describe a database the provider can reach; the message says how to fix it."""


def sqlalchemy_url(conn: ConnectionLike) -> URL:
    """The URL to open the metadata database of ``conn`` with; never includes the password in errors."""
    conn_id = conn.conn_id
    extra = dict(conn.extra_dejson or {})
    whole = extra.pop(URL_EXTRA, None)
    query = _query(conn_id, extra)
    conn_type = (conn.conn_type or "").lower()
    if whole:
        try:
            url = make_url(str(whole))
        except ArgumentError:
            raise MetadataConnectionError(
                f"connection {conn_id!r}: extra {URL_EXTRA!r} is not a SQLAlchemy URL"
            ) from None
        if conn.login:
            url = url.set(username=conn.login)
        if conn.password:
            url = url.set(password=conn.password)
        return _known_driver(conn_id, url.update_query_dict(query), f"extra {URL_EXTRA!r}")
    if conn_type == CONN_TYPE:
        return _own_type_url(conn, query)
    if conn_type == "sqlite":
        path = conn.host or conn.schema
        if not path:
            raise MetadataConnectionError(
                f"connection {conn_id!r}: a sqlite connection needs the database file path in host or schema"
            )
        return URL.create("sqlite", database=path, query=query)
    if not conn_type:
        raise MetadataConnectionError(f"connection {conn_id!r} has no conn_type; use {CONN_TYPE!r}")
    driver = _DRIVER_OF_TYPE.get(conn_type, conn_type)
    url = URL.create(
        driver,
        conn.login or None,
        conn.password or None,
        conn.host or None,
        conn.port or None,
        conn.schema or None,
        query,
    )
    return _known_driver(
        conn_id,
        url,
        f"unsupported conn_type {conn.conn_type!r}; use {CONN_TYPE!r} (or postgres, "
        f'mysql, sqlite), or put a full URL in extra as {{"{URL_EXTRA}": ...}}',
    )


def _own_type_url(conn: ConnectionLike, query: Mapping[str, Any]) -> URL:
    host = conn.host or ""
    driver, sep, hostname = host.partition("://")
    if not sep:
        if host:
            raise MetadataConnectionError(
                f"connection {conn.conn_id!r}: Host {host!r} names no SQLAlchemy driver; write it as "
                f"postgresql+psycopg2://{host} (or mysql+mysqldb://{host})"
            )
        if (conn.schema or "").startswith("/"):
            driver, hostname = "sqlite", ""
        else:
            raise MetadataConnectionError(
                f"connection {conn.conn_id!r}: no Host, and Schema {conn.schema!r} is not a SQLite file's absolute "
                "path; give Host as driver://host, e.g. postgresql+psycopg2://db.example.com"
            )
    # ``postgres://`` is what Airflow itself writes and SQLAlchemy 2 refuses.
    driver = _DRIVER_OF_TYPE.get(driver, driver)
    if driver.startswith("sqlite"):
        if not conn.schema:
            raise MetadataConnectionError(
                f"connection {conn.conn_id!r}: SQLite needs the file's absolute path in Schema"
            )
        return _known_driver(conn.conn_id, URL.create(driver, database=conn.schema, query=query), f"Host {host!r}")
    url = URL.create(
        driver,
        conn.login or None,
        conn.password or None,
        hostname.rstrip("/") or None,
        conn.port or None,
        conn.schema or None,
        query,
    )
    return _known_driver(conn.conn_id, url, f"Host {host!r} names an unknown SQLAlchemy driver {driver!r}")


def _known_driver(conn_id: str, url: URL, problem: str) -> URL:
    try:
        url.get_dialect()
    except NoSuchModuleError:
        raise MetadataConnectionError(f"connection {conn_id!r}: {problem}") from None
    return url


def _query(conn_id: str, extra: Mapping[str, Any]) -> dict[str, str | tuple[str, ...]]:
    """Extra keys as URL query parameters (Airflow parses ``?connect_timeout=10`` into the number 10)."""
    query: dict[str, str | tuple[str, ...]] = {}
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            query[key] = str(value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
            query[key] = tuple(str(v) for v in value)
        else:
            raise MetadataConnectionError(
                f"connection {conn_id!r}: extra {key!r} must be a string, number or list to pass to the driver, "
                f"got {type(value).__name__}"
            )
    return query
