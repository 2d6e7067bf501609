"""The padbench server: a FastAPI app over a SQLite (or PostgreSQL) job queue with leased workers."""
