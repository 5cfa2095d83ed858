"""The hook's connection to the metadata database, and the lock that lets one planner run at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.hooks import connection_url

#: Key of the PostgreSQL advisory lock that lets one planning cycle run at a time ("GPUSCHED").
PLANNING_LOCK_KEY = 0x4750555343484544


class GpuSchedulerMetadataError(RuntimeError):
    """The metadata database cannot be reached or used; the message never contains a password."""


class MetadataConnection:
    """Engine, connection test and planning lock of the metadata hook
    (:class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`).

    Expects ``gpu_scheduler_conn_id``, ``engine_kwargs``, ``_engine`` and Airflow's ``get_connection``
    (the hook's ``BaseHook``).
    """

    gpu_scheduler_conn_id: str
    engine_kwargs: dict
    _engine: Engine | None

    def sqlalchemy_url(self) -> URL:
        """The SQLAlchemy URL of the connection (log it only via ``render_as_string(hide_password=True)``)."""
        try:
            return connection_url.sqlalchemy_url(self.get_connection(self.gpu_scheduler_conn_id))  # type: ignore[attr-defined]
        except connection_url.MetadataConnectionError as error:
            raise GpuSchedulerMetadataError(str(error)) from None

    def get_engine(self) -> Engine:
        """The hook's own engine (created once); checks the database is reachable."""
        if self._engine is None:
            url = self.sqlalchemy_url()
            kwargs = dict(self.engine_kwargs)
            kwargs.setdefault("pool_pre_ping", True)
            if url.get_backend_name() == "sqlite":
                # The scheduler writes the same file; wait for its lock rather than fail.
                kwargs.setdefault("connect_args", {"timeout": 30})
            engine = create_engine(url, **kwargs)
            try:
                with engine.connect():
                    pass
            except SQLAlchemyError as error:
                engine.dispose()
                cause = getattr(error, "orig", None) or error  # the driver's error (DBAPIError has one)
                raise GpuSchedulerMetadataError(
                    f"cannot reach the metadata database of connection {self.gpu_scheduler_conn_id!r} "
                    f"({url.render_as_string(hide_password=True)}): {type(cause).__name__}: "
                    f"{str(cause).strip().splitlines()[0] if str(cause).strip() else ''}"
                ) from None
            self._engine = engine
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def test_connection(self) -> tuple[bool, str]:
        """The UI's Test button: reach the database and check it is an Airflow schema the provider knows."""
        from airflow_gpu_scheduler.schema_check import check_metadata_schema

        try:
            check_metadata_schema(self)
        except GpuSchedulerMetadataError as error:
            return False, str(error)
        url = self.get_engine().url.render_as_string(hide_password=True)
        return True, f"Connection successfully tested: {url} is an Airflow metadata database with the plan tables"

    @contextlib.contextmanager
    def _reading(self, conn: Connection | None = None) -> Iterator[Connection]:
        """``conn`` if given (the review page passes the api-server's own session connection), else one of our own."""
        if conn is not None:
            yield conn
        else:
            with self.get_engine().connect() as own:
                yield own

    @contextmanager
    def planning_lock(self) -> Iterator[bool]:
        """Hold the planners' lock for one cycle; yields ``False`` at once if another run holds it.

        Two runs (a manual trigger during a scheduled one, or the fail-open watchdog) must not
        interleave collect-plan-apply: the later would apply a plan made from a stale snapshot.
        PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection of its
        own, closed afterwards, so the lock dies with the connection even if unlocking fails or
        the process is killed. MySQL: ``GET_LOCK(name, 0)``. SQLite (one host by nature): an
        exclusive ``flock`` on a file beside the database, released by the kernel when the
        process dies. Never waits: the loser skips its cycle.
        """
        engine = self.get_engine()
        backend = engine.dialect.name
        if backend in ("postgresql", "mysql"):
            conn = engine.connect()
            try:
                if backend == "postgresql":
                    got = bool(conn.execute(select(func.pg_try_advisory_lock(PLANNING_LOCK_KEY))).scalar())
                else:
                    got = conn.execute(select(func.get_lock("airflow_gpu_scheduler", 0))).scalar() == 1
                conn.commit()  # a session lock outlives the transaction; do not sit idle in one
                yield got
            finally:
                conn.invalidate()  # closes the DB connection: the session lock goes with it
                conn.close()
            return
        database = engine.url.database
        if backend != "sqlite" or not database or database == ":memory:":
            yield True
            return
        fd = os.open(f"{database}.gpu-scheduler.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
