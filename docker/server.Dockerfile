# The padbench server: FastAPI + the job queue. Build from the repository root:
#   docker build -f docker/server.Dockerfile -t padbench-server .
# It needs no GPU and never imports torch, transformers or datasets: the `server` extra brings only what the
# server runs on, and `postgres` the driver for a fleet's database.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 PADBENCH_HOST=0.0.0.0 PADBENCH_PORT=8000 PADBENCH_HEALTH_PORT=8001 \
    PADBENCH_DATABASE_URL=sqlite:////data/padbench.sqlite3

RUN useradd --create-home --uid 1000 padbench && mkdir /data && chown padbench /data
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY padbench ./padbench
COPY alembic ./alembic
COPY examples ./examples
COPY server ./server
COPY worker ./worker
COPY client ./client
# A regular install: the migrations ship inside the package (padbench.migrations).
RUN pip install ".[server,postgres]"

USER padbench
VOLUME /data
EXPOSE 8000 8001
# The health process answers on a port of its own (PADBENCH_HEALTH_PORT), promptly however busy the API is: point
# an orchestrator's probes there too (/livez, /healthz).
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import httpx; httpx.get('http://127.0.0.1:8001/healthz').raise_for_status()"
# Host and port come from PADBENCH_HOST / PADBENCH_PORT; tokens from a mounted file (PADBENCH_TOKENS_FILE):
# the server refuses to start without them. Server processes: --workers N or PADBENCH_SERVER_PROCESSES (default: one
# on SQLite, the container's cores less one, at most 4, on PostgreSQL); docker/compose.yaml passes --workers.
CMD ["padbench", "server"]
