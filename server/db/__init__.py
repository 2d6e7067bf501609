"""Persistence: the database clock, the ORM models, the engine and sessions, and migrations."""
