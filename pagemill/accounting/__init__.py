"""Accounting: what a device second costs, what a page cost, what a job will cost
(the quote) and what it did cost (its totals).

The quantity is `device_seconds` everywhere: the seconds of a device (a CPU core
for CPU engines, a GPU for GPU engines) attributed to a page, summed over every
attempt and every reading the page took.
"""
