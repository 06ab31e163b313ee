"""Custom resources' printer columns: the ``additionalPrinterColumns`` their CRDs declare,
evaluated as ``apiextensions-apiserver``'s ``tableconvertor`` does, by a simple JSONPath."""

from __future__ import annotations

import json
import re
from typing import Any

from dispatch.testing.k8s.printing.columns import Column, since

JsonObj = dict[str, Any]


def crd_cell(column: Column, obj: JsonObj, now: float) -> Any:
    """One cell as ``apiextensions-apiserver``'s ``tableconvertor`` renders it: the first value
    the path finds (None when it finds none); a ``string`` column prints it as kubectl's
    JSONPath printer would (maps and lists as JSON); other types keep a value of their type."""
    found = jsonpath(obj, column.path)
    if not found:
        return None
    value = found[0]
    if value is None:
        return None
    if column.type == "string":
        return print_value(value)
    if column.type == "integer":
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if column.type == "number":
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "date":
        return since(value, now) if isinstance(value, str) else None
    return None


def print_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[([^\]]*)\]")
_FILTER = re.compile(r"""\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*["']([^"']*)["']\)""")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Values at a printer column's JSONPath: ``.a.b``, ``[N]``, ``[-1:]`` (slices) and
    ``[?(@.field=="value")]`` filters, the forms CRDs' printer columns use. A step that finds
    nothing drops that branch."""
    current = [obj]
    for match in _STEP.finditer(path):
        field, index = match.groups()
        nxt: list[Any] = []
        for value in current:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    nxt.append(value[field])
            elif isinstance(value, list):
                nxt.extend(_index(value, index))
        current = nxt
    return current


def _index(items: list[Any], spec: str) -> list[Any]:
    spec = spec.strip()
    if spec in ("*", ""):
        return list(items)
    filtered = _FILTER.fullmatch(spec)
    if filtered:
        field, wanted = filtered.groups()
        return [i for i in items if print_value(_dig(i, field.split("."))) == wanted]
    if ":" in spec:
        start, _, end = spec.partition(":")
        return items[int(start) if start else None : int(end) if end else None]
    try:
        return [items[int(spec)]]
    except (ValueError, IndexError):
        return []


def _dig(obj: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _crd(
    *columns: tuple[str, str, str, str] | tuple[str, str, str, str, int],
) -> tuple[Column, ...]:
    """Columns as written in a CRD: (name, type, jsonPath, description[, priority])."""
    out = []
    for spec in columns:
        name, kind, path, description = spec[:4]
        priority = spec[4] if len(spec) > 4 else 0
        out.append(Column(name, kind, description, int(priority), path=path))
    return tuple(out)


_AGE_PATH = ".metadata.creationTimestamp"
_STATE = ("State", "string", ".status.conditions[-1:].type", "")
_WORKLOAD = _crd(
    ("Queue", "string", ".spec.queueName", "Name of the queue this workload was submitted to"),
    (
        "Reserved in",
        "string",
        ".status.admission.clusterQueue",
        "Name of the ClusterQueue where the workload is reserving quota",
    ),
    ("Admitted", "string", ".status.conditions[?(@.type=='Admitted')].status", "Admission status"),
    ("Finished", "string", ".status.conditions[?(@.type=='Finished')].status", "Workload finished"),
    ("Age", "date", _AGE_PATH, "Time this workload was created"),
)


def _cluster_queue(cohort_path: str) -> tuple[Column, ...]:
    return _crd(
        ("Cohort", "string", cohort_path, "Cohort that this ClusterQueue belongs to"),
        (
            "Strategy",
            "string",
            ".spec.queueingStrategy",
            "The queueing strategy used to prioritize workloads",
            1,
        ),
        ("Pending Workloads", "integer", ".status.pendingWorkloads", "Number of pending workloads"),
        (
            "Admitted Workloads",
            "integer",
            ".status.admittedWorkloads",
            "Number of admitted workloads that haven't finished yet",
            1,
        ),
    )


_LOCAL_QUEUE = _crd(
    ("ClusterQueue", "string", ".spec.clusterQueue", "Backing ClusterQueue"),
    ("Pending Workloads", "integer", ".status.pendingWorkloads", "Number of pending workloads"),
    (
        "Admitted Workloads",
        "integer",
        ".status.admittedWorkloads",
        "Number of admitted workloads that haven't finished yet.",
    ),
)
_PRIORITY_CLASS = _crd(
    ("Value", "integer", ".value", "Value of workloadPriorityClass's Priority"),
)

#: ``additionalPrinterColumns`` by (group, version, plural), from the CRD manifests of
#: Trainer v2.3 (manifests/base/crds), JobSet v0.12 (config/components/crd/bases), Kueue v0.17
#: (config/components/crd/bases), scheduler-plugins (config/crd/bases), Volcano and
#: training-operator v1.9; a served CRD missing here declares none (``Age`` only)
CRD_COLUMNS: dict[tuple[str, str, str], tuple[Column, ...]] = {
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"): _crd(_STATE, ("Age", "date", _AGE_PATH, "")),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets"): _crd(
        ("TerminalState", "string", ".status.terminalState", "Final state of JobSet"),
        ("Restarts", "string", ".status.restarts", "Number of restarts"),
        ("Completed", "string", '.status.conditions[?(@.type=="Completed")].status', ""),
        ("Suspended", "string", ".spec.suspend", "JobSet suspended"),
        ("Age", "date", _AGE_PATH, "Time this JobSet was created"),
    ),
    ("kueue.x-k8s.io", "v1beta2", "workloads"): _WORKLOAD,
    ("kueue.x-k8s.io", "v1beta1", "workloads"): _WORKLOAD,
    ("kueue.x-k8s.io", "v1beta2", "clusterqueues"): _cluster_queue(".spec.cohortName"),
    ("kueue.x-k8s.io", "v1beta1", "clusterqueues"): _cluster_queue(".spec.cohort"),
    ("kueue.x-k8s.io", "v1beta2", "localqueues"): _LOCAL_QUEUE,
    ("kueue.x-k8s.io", "v1beta1", "localqueues"): _LOCAL_QUEUE,
    ("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses"): _PRIORITY_CLASS,
    ("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses"): _PRIORITY_CLASS,
    ("scheduling.x-k8s.io", "v1alpha1", "podgroups"): _crd(
        ("Phase", "string", ".status.phase", "Current phase of PodGroup."),
        (
            "MinMember",
            "integer",
            ".spec.minMember",
            "MinMember defines the minimal number of members/tasks to run the pod group.",
        ),
        ("Running", "integer", ".status.running", "The number of actively running pods."),
        (
            "Succeeded",
            "integer",
            ".status.succeeded",
            "The number of pods which reached phase Succeeded.",
        ),
        ("Failed", "integer", ".status.failed", "The number of pods which reached phase Failed."),
        ("Age", "date", _AGE_PATH, "Age is the time PodGroup was created."),
    ),
    ("scheduling.volcano.sh", "v1beta1", "podgroups"): _crd(
        ("STATUS", "string", ".status.phase", ""),
        ("minMember", "integer", ".spec.minMember", ""),
        ("RUNNINGS", "integer", ".status.running", ""),
        ("AGE", "date", _AGE_PATH, ""),
        ("QUEUE", "string", ".spec.queue", "", 1),
    ),
    **{
        ("kubeflow.org", "v1", plural): _crd(_STATE, ("Age", "date", _AGE_PATH, ""))
        for plural in ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs")
    },
}
