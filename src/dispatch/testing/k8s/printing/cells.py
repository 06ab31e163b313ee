"""Cells of the built-in printers (``pkg/printers/internalversion/printers.go``), one pure
function per resource of the object (wire representation) and the server's ``now``. The server
renders the wide cells too (``GenerateOptions{Wide: true}``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.printing.columns import human_duration, since

JsonObj = dict[str, Any]

# ---------------------------------------------------------------------------- helpers


def _meta(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


def name_of(obj: JsonObj) -> str:
    return str(_meta(obj).get("name", ""))


def age_of(obj: JsonObj, now: float) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _condition(obj: JsonObj, kind: str) -> JsonObj | None:
    for cond in dig(obj, "status", "conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _true(obj: JsonObj, kind: str) -> bool:
    """``hasJobCondition``: the first condition of that type, and it is True."""
    cond = _condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def format_labels(labels: Mapping[str, str] | None) -> str:
    """``labels.FormatLabels``: ``k=v,...`` sorted by key, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector(selector: JsonObj | None) -> str:
    """``metav1.FormatLabelSelector`` for ``matchLabels`` and ``matchExpressions``."""
    if selector is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _containers(template_spec: JsonObj | None) -> list[str]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = (template_spec or {}).get("containers") or []
    return [
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
    ]


# ---------------------------------------------------------------------------- pods


def _restartable_init(container: JsonObj | None) -> bool:
    return bool(container) and (container or {}).get("restartPolicy") == "Always"


def pod_cells(pod: JsonObj, now: float) -> list[Any]:
    """``printPod``: READY counts ready running containers, STATUS is the phase refined by the
    containers' waiting/terminated reasons (init containers first), RESTARTS adds the time of
    the last restart."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    restarts = sidecar_restarts = ready = 0
    total = len(spec.get("containers") or [])
    last_restart = sidecar_last = ""
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    inits = {c.get("name"): c for c in spec.get("initContainers") or []}
    total += sum(1 for c in inits.values() if _restartable_init(c))
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        finished = dig(cs, "lastState", "terminated", "finishedAt") or ""
        last_restart = max(last_restart, finished)
        sidecar = _restartable_init(inits.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            sidecar_last = max(sidecar_last, finished)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = max(last_restart, dig(cs, "lastState", "terminated", "finishedAt") or "")
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _true(pod, "Ready") else "NotReady"
    deleting = _meta(pod).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown = str(restarts)
    if restarts and last_restart:
        shown = f"{restarts} ({since(last_restart, now)} ago)"
    ips = status.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gated = "<none>"
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        met = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gated = f"{met}/{len(gates)}"
    return [
        name_of(pod),
        f"{ready}/{total}",
        reason,
        shown,
        age_of(pod, now),
        ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gated,
    ]


def pod_conditions(pod: JsonObj) -> list[JsonObj]:
    """Row conditions: a finished pod's row is ``Completed`` (kubectl's ``--show-all`` era)."""
    phase = dig(pod, "status", "phase")
    if phase == "Succeeded":
        message = "The pod has completed successfully."
    elif phase == "Failed":
        message = "The pod failed."
    else:
        return []
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


# ---------------------------------------------------------------------------- workloads


def job_cells(job: JsonObj, now: float) -> list[Any]:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    started, finished = status.get("startTime"), status.get("completionTime")
    if not started:
        took = ""
    elif not finished:
        took = since(started, now)
    else:
        took = human_duration(parse_rfc3339(finished) - parse_rfc3339(started))
    if _true(job, "Complete"):
        state = "Complete"
    elif _true(job, "Failed"):
        state = "Failed"
    elif _meta(job).get("deletionTimestamp"):
        state = "Terminating"
    elif _true(job, "Suspended"):
        state = "Suspended"
    elif _true(job, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = _containers(dig(job, "spec", "template", "spec"))
    return [
        name_of(job),
        state,
        completions,
        took,
        age_of(job, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def deployment_cells(obj: JsonObj, now: float) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas", 1)
    names, images = _containers(dig(obj, "spec", "template", "spec"))
    return [
        name_of(obj),
        f"{int(status.get('readyReplicas') or 0)}/{int(desired or 0)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        age_of(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


def pdb_cells(obj: JsonObj, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [
        name_of(obj),
        "N/A" if low is None else str(low),
        "N/A" if high is None else str(high),
        int(dig(obj, "status", "disruptionsAllowed") or 0),
        age_of(obj, now),
    ]


# ---------------------------------------------------------------------------- core objects


def node_cells(node: JsonObj, now: float) -> list[Any]:
    ready = _condition(node, "Ready")
    states = [] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if dig(node, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/":
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = dig(node, "status", "nodeInfo") or {}
    addresses = dig(node, "status", "addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        name_of(node),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        age_of(node, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def service_cells(svc: JsonObj, now: float) -> list[Any]:
    spec = svc.get("spec") or {}
    kind = spec.get("type") or ""
    external = spec.get("externalIPs") or []
    if kind in ("ClusterIP", "NodePort"):
        shown = ",".join(external) or "<none>"
    elif kind == "LoadBalancer":
        ingress = dig(svc, "status", "loadBalancer", "ingress") or []
        lb = sorted({i.get("ip") or i.get("hostname") for i in ingress} - {None, ""})
        shown = ",".join([*lb, *external]) if external else (",".join(lb) or "<pending>")
        if not external and len(shown) > 16 and lb:
            shown = shown[:13] + "..."
    elif kind == "ExternalName":
        shown = spec.get("externalName", "")
    else:
        shown = "<unknown>"
    ports = ",".join(
        f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort")
        else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    cluster_ips = spec.get("clusterIPs") or []
    return [
        name_of(svc),
        kind,
        cluster_ips[0] if cluster_ips else "<none>",
        shown,
        ports or "<none>",
        age_of(svc, now),
        format_labels(spec.get("selector")),
    ]


def event_cells(event: JsonObj, now: float) -> list[Any]:
    """``printEvent`` over either representation (core ``v1`` or ``events.k8s.io/v1``)."""
    first = event.get("firstTimestamp") or event.get("deprecatedFirstTimestamp")
    last = event.get("lastTimestamp") or event.get("deprecatedLastTimestamp")
    first_seen = since(first, now) if first else since(event.get("eventTime"), now)
    last_seen = since(last, now) if last else first_seen
    count = event.get("count") or event.get("deprecatedCount") or 0
    series = event.get("series")
    if series:
        last_seen = since(series.get("lastObservedTime"), now)
        count = series.get("count", 0)
    elif not count:
        count = 1  # singleton events of the new API carry no count
    regarding = event.get("involvedObject") or event.get("regarding") or {}
    kind, name = str(regarding.get("kind", "")).lower(), regarding.get("name")
    source = event.get("source") or event.get("deprecatedSource") or {}
    component = source.get("component") or event.get("reportingController") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    message = event.get("message") if "message" in event else event.get("note")
    return [
        last_seen,
        event.get("type", ""),
        event.get("reason", ""),
        f"{kind}/{name}" if name else kind,
        regarding.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        str(message or "").strip(),
        first_seen,
        int(count),
        name_of(event),
    ]


def binding_cells(obj: JsonObj, now: float) -> list[Any]:
    ref = obj.get("roleRef") or {}
    subjects = obj.get("subjects") or []

    def named(kind: str) -> str:
        return ", ".join(s.get("name", "") for s in subjects if s.get("kind") == kind)

    accounts = ", ".join(
        f"{s.get('namespace', '')}/{s.get('name', '')}"
        for s in subjects
        if s.get("kind") == "ServiceAccount"
    )
    return [
        name_of(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        age_of(obj, now),
        named("User"),
        named("Group"),
        accounts,
    ]


def param_kind(policy: JsonObj) -> str:
    """A ValidatingAdmissionPolicy's ``ParamKind`` cell (``<unset>`` without one)."""
    kind = dig(policy, "spec", "paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def param_ref(binding: JsonObj) -> str:
    """A ValidatingAdmissionPolicyBinding's ``ParamRef`` cell: ``namespace/name``, ``*/name``
    for a cluster-wide or namespace-less reference, ``<unset>`` without one."""
    ref = dig(binding, "spec", "paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    name = ref.get("name") or "*"
    return f"{ref['namespace']}/{name}" if ref.get("namespace") else f"*/{name}"
