"""Pure builders of the Slurm command lines dispatch runs. Each returns an argv list.

Nothing here runs anything: ``transport`` carries an argv to the cluster (locally or over ssh)
and the adapter parses what comes back with ``parsers``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.adapters.slurm.parsers import SACCT_FIELDS, SQUEUE_NAME_FORMAT
from dispatch.adapters.slurm.states import CANCEL_COMMENT


def build_mkdir_command(path: str) -> list[str]:
    """Create an attempt's output folder (the batch job's output must exist before it runs)."""
    return ["mkdir", "-p", path]


def build_sbatch_command(*, hold: bool = False, export: Sequence[str] = ()) -> list[str]:
    """Submit the script given on standard input; print ``<id>[;cluster]``. The job's
    environment is exactly the variables named in ``export`` (their values are sbatch's own
    environment: never on a command line, nor in the script) and Slurm's ``SLURM_*``."""
    names = ",".join(sorted(export)) or "NONE"
    return ["sbatch", "--parsable", *(["--hold"] if hold else []), f"--export={names}"]


def build_squeue_json_command(data_parser: str | None = None) -> list[str]:
    """Every job the controller still knows (finished ones for MinJobAge), as JSON in the
    format ``data_parser`` (``v0.0.42``; None: the release's own, before 23.02).

    One query for all watched jobs. 22.05 ignores every filter with ``--json``; from 23.02
    on squeue applies them, and without ``--states=all`` it would leave out finished jobs.
    """
    json = "--json" if data_parser is None else f"--json={data_parser}"
    return ["squeue", "--states=all", json]


def build_json_formats_command() -> list[str]:
    """The JSON formats (data_parser plugins) this build offers, one a line (23.02+)."""
    return ["squeue", "--json=list"]


def build_squeue_name_command(name: str) -> list[str]:
    """Jobs with this exact name, in any state, one ``id|name|state|reason`` line each."""
    return [
        "squeue",
        "--noheader",
        "--states=all",
        f"--name={name}",
        f"--format={SQUEUE_NAME_FORMAT}",
    ]


def build_scontrol_jobs_command(job_id: str | None = None) -> list[str]:
    """``scontrol show job`` one line per job; for Slurm without ``squeue --json``."""
    return ["scontrol", "--oneliner", "show", "job", *([job_id] if job_id else [])]


def build_sacct_command(job_ids: Sequence[str]) -> list[str]:
    """Accounting records (jobs and their steps) of these jobs, ``|``-separated."""
    return [
        "sacct",
        "--parsable2",
        "--noheader",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--jobs={','.join(job_ids)}",
    ]


def build_sacct_name_command(name: str, since: str) -> list[str]:
    """Accounting records of jobs with this name submitted since ``since`` (YYYY-MM-DD)."""
    return [
        "sacct",
        "--parsable2",
        "--noheader",
        "--allocations",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--name={name}",
        f"--starttime={since}",
    ]


def build_jobcomp_command(path: str, job_ids: Sequence[str]) -> list[str]:
    """The ``jobcomp/filetxt`` lines of these jobs."""
    return ["grep", "-E", f"^JobId=({'|'.join(job_ids)}) ", path]


def cancel_comment(actor: str) -> str:
    """The comment dispatch leaves on a job it cancels, naming who asked."""
    cleaned = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in actor.strip())
    return f"{CANCEL_COMMENT}{cleaned[:100] or 'dispatch'}"


def build_comment_command(job_id: str, comment: str) -> list[str]:
    return ["scontrol", "update", f"JobId={job_id}", f"Comment={comment}"]


def build_scancel_command(job_id: str, name: str | None = None) -> list[str]:
    """Cancel ``job_id``; with ``name``, only if the job still has that name (scancel applies
    every filter given: a reused id of another job is left alone)."""
    return ["scancel", *([f"--name={name}"] if name else []), job_id]


def build_hold_command(job_id: str) -> list[str]:
    return ["scontrol", "hold", job_id]


def build_release_command(job_id: str) -> list[str]:
    return ["scontrol", "release", job_id]


def build_read_command(path: str) -> list[str]:
    """Print a file of the cluster (a batch or task output)."""
    return ["cat", "--", path]


def build_version_command() -> list[str]:
    return ["sinfo", "--version"]


def build_config_command() -> list[str]:
    return ["scontrol", "show", "config"]


def build_partitions_command() -> list[str]:
    return ["scontrol", "--oneliner", "show", "partition"]


def build_nodes_command() -> list[str]:
    return ["scontrol", "--oneliner", "show", "node"]
