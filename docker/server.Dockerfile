# The padbench server: FastAPI + the job queue. Build from the repository root:
#   docker build -f docker/server.Dockerfile -t padbench-server .
# It needs no GPU. torch comes from the CPU wheel index only because the one `padbench` package
# depends on it; the server itself never imports it.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 PADBENCH_HOST=0.0.0.0 PADBENCH_PORT=8000 \
    PADBENCH_DATABASE_URL=sqlite:////data/padbench.sqlite3

RUN useradd --create-home --uid 1000 padbench && mkdir /data && chown padbench /data
WORKDIR /app
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY padbench ./padbench
COPY server ./server
COPY worker ./worker
COPY client ./client
# Editable, so the migrations in /app/alembic sit where the server looks for them.
RUN pip install -e ".[postgres]"

USER padbench
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import httpx; httpx.get('http://127.0.0.1:8000/healthz').raise_for_status()"
# Tokens come from a mounted file (PADBENCH_TOKENS_FILE); the server refuses to start without them.
CMD ["sh", "-c", "exec padbench server --host \"$PADBENCH_HOST\" --port \"$PADBENCH_PORT\""]
