"""The ``dispatch`` command line."""
