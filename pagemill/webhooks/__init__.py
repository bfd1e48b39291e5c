"""Completion callbacks: an outbox written with the job's terminal transition, signed
per Standard Webhooks 1.0, retried with backoff, every attempt logged, replayable.
"""
