"""The worker's Celery application: the shared configuration plus the tasks.

Start with `pagemill worker --queues prepare,ocr,finalize`. CPU engines run in a
prefork pool (PyMuPDF is not thread-safe); each child loads its models lazily.
"""

from __future__ import annotations

import logging

from pagemill.queue import make_celery
from pagemill.settings import get_settings

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]
