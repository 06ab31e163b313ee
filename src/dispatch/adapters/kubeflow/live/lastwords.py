"""Last words: the tail of a failed rank's output, kept in the records as evidence before
Kubernetes deletes the pod with its log (``dispatch logs`` and ``dispatch status`` show it
after the fact; this is where the Python traceback or the NCCL error is).

When an attempt's outcome becomes final (and before dispatch deletes or cancels its
TrainJob: then every rank's pod), the trainer pods that failed (a container terminated with
a non-zero exit code, now or before a restart, or the pod ``Failed``) and the pod of the
first failure are read: the tail (``model.lastwords``: 200 lines, 64 KiB) of the container,
and of the container before its last restart when the kubelet kept it. At most
``MAX_PODS`` pods per attempt. The records are private to their owner (mode 0600).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dispatch.adapters.kubeflow.api.client import Session
from dispatch.adapters.kubeflow.api.logs import read_log
from dispatch.adapters.kubeflow.live.output import (
    container_of,
    newest_per_rank,
    rank_pods,
    restarts,
)
from dispatch.adapters.kubeflow.objects import as_int, as_list, dig, text_of
from dispatch.model import Evidence, Outcome
from dispatch.model.lastwords import TAIL_LINES
from dispatch.model.lastwords import last_words as words

#: at most this many pods' tails per attempt
MAX_PODS = 16


def _failed(pod: Mapping[str, Any]) -> bool:
    if text_of(dig(pod, "status", "phase")) == "Failed":
        return True
    for status in as_list(dig(pod, "status", "containerStatuses")) or []:
        for which in ("state", "lastState"):
            code = as_int(dig(status, which, "terminated", "exitCode"))
            if code:
                return True
    return False


async def last_words(
    session: Session,
    namespace: str,
    trainjob: str,
    outcome: Outcome | None,
    now: float,
    *,
    known: Sequence[Mapping[str, Any]] = (),
) -> list[Evidence]:
    """The kept tails of the attempt's failed ranks (module docstring), as evidence; with no
    ``outcome`` (dispatch is about to cancel the attempt), of every rank. ``known``: the
    attempt's pods as the streams last showed them (its failed ranks are chosen among those
    without a list); when it holds no trainer pod they are listed."""
    pods = newest_per_rank(known)
    if not pods:
        _, pods = await rank_pods(session, namespace, trainjob, count=False)
    first = outcome.first_failure if outcome is not None else None
    chosen = [
        (rank, pod)
        for rank, pod in sorted(pods.items())
        if outcome is None or _failed(pod) or (first is not None and first.rank == rank)
    ][:MAX_PODS]
    found: list[Evidence] = []
    for rank, pod in chosen:
        name = text_of(dig(pod, "metadata", "name"))
        container = container_of(pod)
        for previous in (False, True) if restarts(pod, container) else (False,):
            text = await read_log(
                session, namespace, name, container, tail_lines=TAIL_LINES, previous=previous
            )
            kept = words(
                rank,
                f"pod {name}, container {container}",
                text or "",
                now,
                previous=previous,
                pod=name,
                container=container,
            )
            if kept is not None:
                found.append(kept)
    return found
