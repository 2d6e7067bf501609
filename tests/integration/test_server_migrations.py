"""The schema exists only through Alembic migrations, and they match the ORM models exactly."""

from __future__ import annotations

from importlib.resources import as_file, files

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, select
from sqlalchemy.exc import IntegrityError

from alembic import command
from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.migrate import MIGRATIONS_PACKAGE
from padbench.server.db.models import HELD_BY_GANG, HELD_BY_WORKER, Base, GangMember, JobAttempt


def test_migrations_match_the_models(queue_db: Database) -> None:
    with queue_db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_migrations_create_every_table(queue_db: Database) -> None:
    tables = set(inspect(queue_db.engine).get_table_names())
    assert tables == {"alembic_version", *Base.metadata.tables}


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(queue_db: Database) -> None:
    if queue_db.is_postgresql:
        return
    with queue_db.engine.connect() as connection:
        pragma = connection.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA foreign_keys").scalar() == 1
        assert pragma("PRAGMA busy_timeout").scalar() == 10_000


def migrate(database: Database, action: str, revision: str) -> None:
    """`alembic upgrade|downgrade REVISION` on the database, as `upgrade_to_head` runs the migrations."""
    with as_file(files(MIGRATIONS_PACKAGE).joinpath("env.py")) as env_script:
        config = Config()
        config.set_main_option("script_location", str(env_script.parent))
        with database.engine.begin() as connection:
            config.attributes["connection"] = connection
            getattr(command, action)(config, revision)


def test_attempts_recorded_before_whole_claims_are_a_gangs_exactly_for_jobs_across_nodes(queue_db: Database) -> None:
    """0008 adds who holds each attempt: before it, only a gang claimed a job across several nodes."""
    migrate(queue_db, "downgrade", "0007")
    with queue_db.write.begin() as session:
        for nodes, token in ((1, "one-node"), (2, "two-nodes")):
            job_id = queue.insert_job(session, kind="padding", name=None, spec={}, submitter="alice",
                                      max_attempts=3, requirements=["kind:padding"], nodes=nodes)
            session.execute(insert(JobAttempt).values(lease_token=token, job_id=job_id, claimed_at=db_now()))
    migrate(queue_db, "upgrade", "head")
    with queue_db.read() as session:
        held = {token: holder for token, holder in session.execute(select(JobAttempt.lease_token, JobAttempt.held_by))}
    assert held == {"one-node": HELD_BY_WORKER, "two-nodes": HELD_BY_GANG}


def test_ended_attempts_members_go_on_downgrade_and_node_ranks_are_unique_only_in_a_forming_gang(
        queue_db: Database) -> None:
    """0009 keeps ended gang attempts' members beside the next gang's: node ranks repeat across attempts, not
    within the forming gang; downgraded, only the live members are kept, as before it."""
    with queue_db.write.begin() as session:
        job_id = queue.insert_job(session, kind="padding", name=None, spec={}, submitter="alice", max_attempts=3,
                                  requirements=["kind:padding"], nodes=2)
        for token, attempt in (("first-0", "first"), ("second-0", "second"), ("forming-0", None)):
            session.execute(insert(GangMember).values(member_token=token, job_id=job_id, node_rank=0, address="a",
                                                      port=1, joined_at=db_now(), expires_at=db_now(),
                                                      attempt_token=attempt))
    with pytest.raises(IntegrityError), queue_db.write.begin() as session:
        session.execute(insert(GangMember).values(member_token="forming-again", job_id=job_id, node_rank=0,
                                                  address="a", port=1, joined_at=db_now(), expires_at=db_now()))
    migrate(queue_db, "downgrade", "0008")
    with queue_db.read() as session:
        assert list(session.scalars(select(GangMember.member_token))) == ["forming-0"]
    migrate(queue_db, "upgrade", "head")
