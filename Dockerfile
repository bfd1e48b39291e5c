# One image for the API and the CPU workers. The GPU worker builds on it with the
# `gpu` extra (see docs/gpu.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md LICENSE alembic.ini ./
COPY pagemill ./pagemill
COPY api ./api
COPY worker ./worker
COPY cli ./cli
COPY migrations ./migrations
RUN pip install .
RUN useradd --create-home pagemill
USER pagemill
EXPOSE 8000
CMD ["pagemill", "api", "--host", "0.0.0.0"]
