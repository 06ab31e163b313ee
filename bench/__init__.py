"""dispatch's benchmarks: ``python -m bench`` (or ``python bench/run.py``) runs them all.

See bench/README.md for what each measures and bench/results.md for the latest figures.
"""
