"""Slurm through its command-line tools."""
