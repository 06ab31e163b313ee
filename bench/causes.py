"""Cause accuracy: the dumps in tests/dumps diagnosed by dispatch, next to what the Kubeflow
SDK would report for the same TrainJobs; and the report corpus (tests/dumps/reports: every
workload kind, modelled on public bug reports) next to what the workload's own status says
(``kubectl get KIND NAME -o yaml``: its terminal condition's type and reason).

* dispatch: ``dispatch diagnose FILE --output json`` (run in-process through the CLI), against
  the expected state and cause of each dump (``tests/kubeflow/causes/test_dumps.py``, CASES).
  A second column diagnoses the same dump with every ``Event`` removed (events expire after
  an hour on a real cluster): robustness to evidence deleted early.
* noise: the number of failed pods in each dump. Where it is above one, peers crashed after
  the first failure (their rendezvous broke) or all were stopped together, so the cause has
  to be told apart from the peers' exits; the summary gives dispatch's share right over those
  dumps.
* the SDK: its status string, from the SDK's own status logic restated over the dump's
  objects (:func:`sdk_status`). Source: kubeflow/sdk
  ``kubeflow/trainer/backends/kubernetes/backend.py``, ``KubernetesBackend.__get_trainjob_from_cr``
  (kubeflow 0.5.0 on PyPI, the version the SDK venv pins): the status is ``Created``; a
  TrainJob condition ``Complete`` or ``Failed`` with status True sets it to that type (the
  last such condition wins); when the TrainJob has no conditions at all, it is ``Running``
  once the newest pod of every ``node`` step is Running or Succeeded and their number equals
  the TrainJob's ``numNodes``. The SDK reports no cause: it can be right only about the
  coarse state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dispatch.adapters.kubeflow.causes.dump import parse_dump
from dispatch.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "tests" / "dumps"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
#: the SDK's status strings as coarse states (what a user of the SDK can conclude)
SDK_STATE = {"Complete": "succeeded", "Failed": "failed", "Running": "running", "Created": None}


def expected_cases() -> dict[str, tuple[str, str | None]]:
    """{dump file name: (state, cause)} as the dump tests assert them."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.kubeflow.causes.test_dumps import CASES

    return {name: (case.state, case.cause) for name, case in CASES.items()}


def sdk_status(objects: list[dict[str, Any]]) -> str:
    """The status string ``TrainerClient.get_job`` would give the dump's TrainJob."""
    trainjob = next(o for o in objects if o.get("kind") == "TrainJob")
    name = trainjob["metadata"]["name"]
    status = "Created"
    conditions = (trainjob.get("status") or {}).get("conditions") or []
    if conditions:
        for c in conditions:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                status = c["type"]
        return status
    pods = [
        o
        for o in objects
        if o.get("kind") == "Pod"
        and (o["metadata"].get("labels") or {}).get(JOBSET_NAME) == name
        and (o["metadata"].get("labels") or {}).get(REPLICATED_JOB)
        in ("dataset-initializer", "model-initializer", "launcher", "node")
    ]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
    newest: dict[str, str | None] = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        key = f"{labels[REPLICATED_JOB]}-{labels.get(JOB_INDEX)}"
        newest.setdefault(key, (pod.get("status") or {}).get("phase"))
    running = sum(
        1
        for k, phase in newest.items()
        if k.startswith("node") and phase in ("Running", "Succeeded")
    )
    nodes = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes")
    if nodes == running:
        status = "Running"
    return status


def failed_pods(objects: list[dict[str, Any]]) -> int:
    """Pods of the dump that ended failed: the first failure and the peers that followed it."""
    return sum(
        1
        for o in objects
        if o.get("kind") == "Pod" and (o.get("status") or {}).get("phase") == "Failed"
    )


def dispatch_diagnosis(text: str, name: str, *args: str) -> dict[str, Any]:
    """``dispatch diagnose`` on a dump given as text (written to a temporary file)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=Path(name).suffix, delete=False) as f:
        f.write(text)
    try:
        result = CliRunner().invoke(cli, ["diagnose", f.name, *args, "--output", "json"])
    finally:
        Path(f.name).unlink()
    if result.exit_code != 0:
        return {"state": None, "cause": None, "error": result.output.strip()[-300:]}
    data: dict[str, Any] = json.loads(result.output)
    return data


def without_events(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"kind": "List", "items": [o for o in objects if o.get("kind") != "Event"]})


#: what a terminal condition's reason alone says of the cause (the rest name none)
REASON_CAUSES = {"DeadlineExceeded": "timeout"}


def report_cases() -> dict[str, Any]:
    """{dump file name: Case} of the report corpus (tests/dumps/reports)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.kubeflow.causes.test_report_dumps import CASES

    return dict(CASES)


def report_text(name: str) -> str:
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.kubeflow.causes.test_report_dumps import report_path

    return report_path(name).read_text()


def kubectl_status(objects: list[dict[str, Any]], kind: str, name: str) -> tuple[str, str | None]:
    """What ``kubectl get KIND NAME -o yaml`` tells a user of the workload itself: its last
    true terminal condition as ``Type/Reason`` (JobSet, Job, training-operator jobs and
    TrainJobs all write one), or ``-`` when none is true; and the coarse state it implies."""
    workload = next(
        (o for o in objects if o.get("kind") == kind and o["metadata"].get("name") == name),
        None,
    )
    if workload is None:
        return "(not in dump)", None
    found, state = "-", None
    terminal = {
        "Complete": "succeeded",
        "Completed": "succeeded",
        "Succeeded": "succeeded",
        "Failed": "failed",
    }
    for c in (workload.get("status") or {}).get("conditions") or []:
        if c.get("type") in terminal and c.get("status") == "True":
            found, state = f"{c['type']}/{c.get('reason') or '-'}", terminal[c["type"]]
    if state is None and (workload.get("spec") or {}).get("suspend") is True:
        state = "queued"
    return found, state


def run_reports() -> dict[str, Any]:
    """The report corpus: dispatch against the workload's own status (what kubectl shows)."""
    rows = []
    for name, case in sorted(report_cases().items()):
        text = report_text(name)
        objects = parse_dump(text)
        found = dispatch_diagnosis(text, name, "--kind", case.kind, "--name", case.name)
        status, state = kubectl_status(objects, case.kind, case.name)
        reason = status.partition("/")[2]
        rows.append(
            {
                "dump": name,
                "kind": case.kind,
                "source": case.source,
                "expectedState": case.state,
                "expectedCause": case.cause,
                "dispatchState": found.get("state"),
                "dispatchCause": found.get("cause"),
                "dispatchCorrect": (found.get("state"), found.get("cause"))
                == (case.state, case.cause),
                "kubectlStatus": status,
                "kubectlStateCorrect": state == case.state,
                # right only with the state: a cause of None is right only for a success
                "kubectlCauseCorrect": state == case.state
                and REASON_CAUSES.get(reason) == case.cause,
            }
        )
    return {
        "rows": rows,
        "dumps": len(rows),
        "kinds": sorted({r["kind"] for r in rows}),
        "dispatchCorrect": sum(r["dispatchCorrect"] for r in rows),
        "kubectlStateCorrect": sum(r["kubectlStateCorrect"] for r in rows),
        "kubectlCauseCorrect": sum(r["kubectlCauseCorrect"] for r in rows),
    }


def run() -> dict[str, Any]:
    cases = expected_cases()
    rows = []
    for name in sorted(cases):
        state, cause = cases[name]
        text = (DUMPS / name).read_text()
        objects = parse_dump(text)
        found = dispatch_diagnosis(text, name)
        stripped = dispatch_diagnosis(without_events(objects), "stripped.json")
        sdk = sdk_status(objects)
        rows.append(
            {
                "dump": name,
                "expectedState": state,
                "expectedCause": cause,
                "dispatchState": found.get("state"),
                "dispatchCause": found.get("cause"),
                "dispatchCorrect": (found.get("state"), found.get("cause")) == (state, cause),
                "failedPods": failed_pods(objects),
                "eventsRemovedCause": stripped.get("cause"),
                "eventsRemovedCorrect": stripped.get("cause") == cause,
                "sdkStatus": sdk,
                "sdkStateCorrect": SDK_STATE[sdk] == state,
                # the SDK names no cause: right only when there is none (a success)
                "sdkCauseCorrect": cause is None and SDK_STATE[sdk] == state,
            }
        )
    total = len(rows)
    noisy = [r for r in rows if r["failedPods"] > 1]
    return {
        "rows": rows,
        "dumps": total,
        "dispatchCorrect": sum(r["dispatchCorrect"] for r in rows),
        "peersFailedDumps": len(noisy),
        "peersFailedCorrect": sum(r["dispatchCorrect"] for r in noisy),
        "eventsRemovedCorrect": sum(r["eventsRemovedCorrect"] for r in rows),
        "sdkStateCorrect": sum(r["sdkStateCorrect"] for r in rows),
        "sdkCauseCorrect": sum(r["sdkCauseCorrect"] for r in rows),
        "reports": run_reports(),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
