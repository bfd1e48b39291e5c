"""The engine catalogue (catalog.py): what the service knows about each engine without
loading one. The engines themselves live in worker/engines/."""
