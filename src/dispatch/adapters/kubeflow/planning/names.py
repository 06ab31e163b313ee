"""Names and label values dispatch gives Kubernetes objects, deterministic from (job, attempt).

A TrainJob is named ``<job id>-<attempt>`` (RFC 1035: lowercase letters, digits and '-',
starting with a letter, at most 63 characters). A job id from ``dispatch.clock`` is
``<name>-<5 chars>`` with a name of at most 40 characters, so the TrainJob name of attempts
1-9 is at most 48 characters: exactly what keeps the longest pod name of a 10-node job on a
trainer job called ``node`` within 63 (see ``longest_pod_name``). An id that is not already
a valid name is rewritten and given a hash of the original, so distinct ids stay distinct.
"""

from __future__ import annotations

import hashlib
import re

#: Kubernetes DNS label / RFC 1035 label limits
MAX_NAME = 63
MAX_LABEL_VALUE = 63
#: the suffix JobSet's webhook adds when it checks pod names (5 random characters)
POD_SUFFIX = "-abcde"

_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _digest(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def is_rfc1035(name: str) -> bool:
    return len(name) <= MAX_NAME and bool(_RFC1035.match(name))


def trainjob_name(job_id: str, attempt: int) -> str:
    """The TrainJob (and runtime copy) name of ``attempt`` of ``job_id``: same input, same name."""
    suffix = f"-{attempt}"
    plain = f"{job_id}{suffix}"
    if is_rfc1035(plain):
        return plain
    cleaned = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    cleaned = re.sub(r"-{2,}", "-", cleaned)
    if not cleaned or not cleaned[0].isalpha():
        cleaned = f"j-{cleaned}".rstrip("-")
    tag = f"-{_digest(job_id)}"
    room = MAX_NAME - len(tag) - len(suffix)
    return f"{cleaned[:room].rstrip('-')}{tag}{suffix}"


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value: itself when valid, else a readable hashed form."""
    if len(text) <= MAX_LABEL_VALUE and _LABEL_VALUE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    tag = _digest(text)
    room = MAX_LABEL_VALUE - len(tag) - 1
    head = cleaned[:room].rstrip("-_.")
    return f"{head}-{tag}" if head else tag


def longest_pod_name(trainjob: str, replicated_job: str, replicas: int, pods: int) -> str:
    """The longest pod name JobSet generates for a replicated job, as its webhook checks it.

    Jobs are ``<jobset>-<replicatedJob>-<jobIndex>``, pods ``<job>-<podIndex>-<5 random>``;
    the JobSet is named after the TrainJob. The largest indexes give the longest name.
    """
    return f"{trainjob}-{replicated_job}-{max(replicas, 1) - 1}-{max(pods, 1) - 1}{POD_SUFFIX}"
