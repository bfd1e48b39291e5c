"""`make bench`: the service measured against its references, side by side.

Every figure is a ratio against a reference measured in the same run on the
same machine, and each is the median over several runs; see bench/run.py.
"""
