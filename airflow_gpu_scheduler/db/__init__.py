"""The provider's own tables: their definitions (:mod:`.models`), what a stored plan record holds
(:mod:`.records`: the decision and method vocabulary too), and ``airflow db migrate``'s manager
(:mod:`.manager`) with its alembic history in ``migrations/``.

Importing this package imports no Airflow: only :mod:`.manager` does.
"""
