"""Facts read from training-operator v1 jobs: PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob,
JAXJob (kubeflow/training-operator before Trainer v2, and the MPI operator).

Their status is ``conditions`` of types ``Created``, ``Running``, ``Restarting``,
``Succeeded``, ``Failed`` (reasons ``<Kind>Created``, ``<Kind>Running``, ...) and
``replicaStatuses.<Type>.{active, succeeded, failed}``. The operator says *that* the job
failed, rarely *why* (``Job x has failed because it has reached the specified backoff
limit``, ``... 1 Worker replica(s) failed``): the why is on the pods it owns, which
``pods`` and ``events`` read like any other. What is read here:

* ``Succeeded`` -> the workload completed; ``Failed`` -> it ended, ``timeout`` when the message
  says the job ``was active longer than specified deadline`` (``runPolicy.activeDeadlineSeconds``).
* ``Restarting`` -> the operator re-ran pods, as the replica's ``restartPolicy``
  (``OnFailure``, ``Always``, ``ExitCode``) asks: planned.
* ``Running`` and non-zero ``replicaStatuses`` counts -> pods ran, whether or not they are
  still in the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.causes.evidence import ObjectHistory
from dispatch.adapters.kubeflow.causes.facts import Fact, Facts, add_once, one_line, proof
from dispatch.adapters.kubeflow.causes.workloads import restart_policies
from dispatch.adapters.kubeflow.objects import as_int, conditions, dig, text_of, when
from dispatch.model import Cause

#: the message the operator writes when ``runPolicy.activeDeadlineSeconds`` ran out
DEADLINE_WORDS = ("active longer than specified deadline", "DeadlineExceeded")


def read_operator_job(history: ObjectHistory, facts: Facts) -> None:
    """Completion, failure (deadline), restarts and proof that pods ran (module docstring)."""
    ref = history.ref
    for obj in history.objects():
        _counts(history, obj, facts)
        for cond in conditions(obj):
            at = when(cond)
            facts.saw(at)
            if cond.get("status") != "True":
                continue
            kind, reason = text_of(cond.get("type")), text_of(cond.get("reason"))
            message = one_line(text_of(cond.get("message")))
            path = f"status.conditions[{kind}]"
            detail = f"({reason})" + (f": {message}" if message else "")
            if kind == "Succeeded":
                summary = f"the {ref.kind} succeeded {detail}"
                fact = Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),))
                add_once(facts.successes, fact)
            elif kind == "Failed":
                summary = f"the {ref.kind} failed {detail}"
                deadline = any(w in message or w in reason for w in DEADLINE_WORDS)
                cause = Cause.TIMEOUT if deadline else Cause.UNKNOWN
                fact = Fact(cause, at, summary, (proof(ref, obj, path, cond, at, summary),))
                add_once(facts.failures if deadline else facts.ends, fact)
            elif kind == "Restarting":
                policies = restart_policies(obj)
                asked = ", ".join(f"{t} {p}" for t, p in policies.items() if p != "Never")
                summary = f"the {ref.kind} restarted replicas {detail}"
                fact = Fact(
                    Cause.UNPLANNED_RECOVERY,
                    at,
                    summary,
                    (proof(ref, obj, path, cond, at, summary),),
                    planned=f"restartPolicy ({asked}) of {ref.kind} {ref.name}" if asked else "",
                )
                add_once(facts.recoveries, fact)
            elif kind == "Running":
                summary = f"the {ref.kind} was running {detail}"
                fact = Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),))
                add_once(facts.starts, fact)
                add_once(facts.ran_proofs, fact)


def _counts(history: ObjectHistory, obj: Any, facts: Facts) -> None:
    statuses = dig(obj, "status", "replicaStatuses")
    if not isinstance(statuses, Mapping):
        return
    counted = {
        f"{replica}.{key}": as_int(dig(status, key)) or 0
        for replica, status in statuses.items()
        for key in ("succeeded", "failed")
    }
    ran = {k: v for k, v in counted.items() if v > 0}
    if not ran:
        return
    shown = ", ".join(f"{k} {v}" for k, v in ran.items())
    summary = f"the {history.ref.kind} counted replicas that ran ({shown})"
    fact = Fact(
        Cause.UNKNOWN,
        None,
        summary,
        (proof(history.ref, obj, "status.replicaStatuses", statuses, None, summary),),
    )
    add_once(facts.ran_proofs, fact)
