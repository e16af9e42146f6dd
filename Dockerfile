# Steplab production image: web (gunicorn), CPU workers and the GPU worker all run from it.
# Built elsewhere (`docker compose build`); this development machine has no Docker engine.
FROM python:3.11-slim-bookworm

# pip reads PIP_EXTRA_INDEX_URL from the environment. Empty by default: torch (pinned in
# constraints.txt) then comes from the default index. A CUDA build of torch for the GPU worker
# comes from the index the builder points at, e.g.
#   docker compose build --build-arg PIP_EXTRA_INDEX_URL=<torch wheel index for your CUDA version>
ARG PIP_EXTRA_INDEX_URL=""

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OMP_NUM_THREADS=1 \
    DJANGO_SETTINGS_MODULE=webapp.config.settings \
    STEPLAB_DATA_DIR=/data \
    STEPLAB_VAR_DIR=/var/lib/steplab \
    STATIC_ROOT=/app/staticfiles

# bubblewrap: sandboxed tool execution; git: repository-backed environments; libpq5: PostgreSQL;
# chromium: the steplab/browser environment (Playwright drives Debian's chromium).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap git libpq5 chromium \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system steplab \
    && useradd --system --gid steplab --home-dir /home/steplab --create-home --shell /usr/sbin/nologin steplab

WORKDIR /app

# Project metadata first, then the source (the package is installed from it, not editable).
COPY pyproject.toml constraints.txt README.md ./
COPY manage.py ./
COPY webapp ./webapp
COPY workers ./workers
COPY trainer_core ./trainer_core
COPY templates ./templates
COPY static ./static

RUN pip install --no-cache-dir -c constraints.txt .

# Static files are collected into the image (served by whitenoise). The settings refuse to start
# with DEBUG=0 and no SECRET_KEY, so the build uses a throwaway key that is never used at runtime.
RUN DEBUG=0 SECRET_KEY=build-only-not-a-secret-collectstatic python manage.py collectstatic --noinput \
    && mkdir -p /data /var/lib/steplab \
    && chown -R steplab:steplab /data /var/lib/steplab

USER steplab

EXPOSE 8000

CMD ["gunicorn", "webapp.config.wsgi", "-b", "0.0.0.0:8000", "-w", "3", "--access-logfile", "-"]
