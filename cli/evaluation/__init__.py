"""`pagemill eval`: the pipeline's output scored against ground truth.

discovery finds documents and their references by name, variants makes scanned copies
of born-digital PDFs, runner converts each document in process, scoring applies the
metrics of `pagemill.quality.metrics`, aggregate, thresholds and report sum up.
"""
