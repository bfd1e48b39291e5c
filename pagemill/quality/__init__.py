"""Output quality: checks on each page's Markdown, the page score and verdict, and the
metrics `pagemill eval` reports against ground truth."""
