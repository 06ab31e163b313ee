"""``python -m bench``: the same as ``python bench/run.py``."""

from bench.run import main

main()
