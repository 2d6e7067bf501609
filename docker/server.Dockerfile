# The padbench server: FastAPI + the job queue. Build from the repository root:
#   docker build -f docker/server.Dockerfile -t padbench-server .
# It needs no GPU and never imports torch, transformers or datasets (checked: the CLI parser and the app
# build with those imports blocked), so the package goes in without its engine dependencies and the server's
# own are listed here — the same pins as pyproject.toml's, less the engine's.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 PADBENCH_HOST=0.0.0.0 PADBENCH_PORT=8000 \
    PADBENCH_DATABASE_URL=sqlite:////data/padbench.sqlite3

RUN useradd --create-home --uid 1000 padbench && mkdir /data && chown padbench /data
WORKDIR /app
RUN pip install "fastapi>=0.115" "uvicorn>=0.30" "pydantic>=2.7" "pydantic-settings>=2.3" "sqlalchemy>=2.0.30" \
    "alembic>=1.13" "httpx>=0.27" "pyyaml>=6" "platformdirs>=4" "psycopg[binary]>=3.1"
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY padbench ./padbench
COPY server ./server
COPY worker ./worker
COPY client ./client
# Editable, so the migrations in /app/alembic sit where the server looks for them.
RUN pip install --no-deps -e .

USER padbench
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import httpx; httpx.get('http://127.0.0.1:8000/healthz').raise_for_status()"
# Host and port come from PADBENCH_HOST / PADBENCH_PORT; tokens from a mounted file (PADBENCH_TOKENS_FILE):
# the server refuses to start without them.
CMD ["padbench", "server"]
