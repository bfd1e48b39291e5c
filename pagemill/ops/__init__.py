"""Ops tables (SQL views made by migrations) and Prometheus metrics, read from Postgres."""
