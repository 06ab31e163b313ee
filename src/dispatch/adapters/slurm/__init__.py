"""Slurm through its command-line tools: sbatch, squeue/sacct/scontrol, scancel.

Layout of this package (pure parts apart from I/O, STYLE.md points 2-4):

* ``script``    — the batch script of an attempt (the dry run is this text)
* ``commands``  — argv builders for every Slurm command used
* ``parsers``, ``output``, ``probe`` — parsers of what those commands print
* ``native``    — the normalised record every parser produces
* ``states``    — the annotated native-state table and the cause derivation
* ``transport`` — local or ssh, and the one runner that starts processes
* ``status``    — one status query set per poll cycle for all jobs
* ``adapter``   — ``SlurmAdapter``, the SPI on top of the above
"""

from dispatch.adapters.slurm.adapter import SlurmAdapter

__all__ = ["SlurmAdapter"]
