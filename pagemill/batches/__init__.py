"""Batches: many documents submitted at once, one job each, one event at the end."""
