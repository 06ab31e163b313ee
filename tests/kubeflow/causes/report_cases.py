"""What `dispatch diagnose` must say of each dump in ``tests/dumps/reports/``.

Each dump there is one workload (TrainJob, JobSet, training-operator v1 job, batch Job) as
``kubectl get -o yaml`` prints it, most modelled on an object pasted in a public bug report
(``source`` names the repository and issue). The tables live in ``cases_*.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    #: the workload diagnosed: its kind and name (``--kind``/``--name`` when the dump holds several)
    kind: str
    name: str
    #: the expected state and cause (None: no cause, e.g. succeeded or still running)
    state: str
    cause: str | None
    #: (rank, exit code) of the first failure, or None when no rank is located
    first: tuple[int, int | None] | None
    #: a few words the one-line summary must contain (case-insensitive)
    says: str
    #: substrings that must appear among the evidence keys (``Kind/name#field``)
    proofs: tuple[str, ...] = ()
    #: "owner/repo#number" of the public report it is modelled on, or "" when it is not
    source: str = ""
    #: why this is the right answer, in one or two sentences
    why: str = ""
    #: extra command-line arguments (``--now``, ``--patience``)
    args: tuple[str, ...] = ()
