"""Cause accuracy: the dumps in tests/dumps diagnosed by dispatch, next to what the Kubeflow
SDK would report for the same TrainJobs.

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


def dispatch_diagnosis(text: str, name: str) -> dict[str, Any]:
    """``dispatch diagnose`` on a dump given as text (written to a temporary file)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=Path(name).suffix, delete=False) as f:
        f.write(text)
    try:
        result = CliRunner().invoke(cli, ["diagnose", f.name, "--output", "json"])
    finally:
        Path(f.name).unlink()
    if result.exit_code != 0:
        return {"state": None, "cause": None, "error": result.output.strip()[-300:]}
    data: dict[str, Any] = json.loads(result.output)
    return data


def without_events(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"kind": "List", "items": [o for o in objects if o.get("kind") != "Event"]})


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
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
