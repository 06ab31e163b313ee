"""The built-in resources' printers: columns as ``printers.go``'s ``AddHandlers`` declares them
(descriptions from the types' swagger docs), cells from :mod:`.cells`. Resources without one
get the API server's default table convertor (:func:`dispatch.testing.k8s.printing.printer_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dispatch.testing.k8s.printing import cells as c
from dispatch.testing.k8s.printing.columns import AGE, NAME, NAME_DOC, Cells, Column, Printer

JsonObj = dict[str, Any]


def _cols(
    *spec: tuple[str, str] | tuple[str, str, str] | tuple[str, str, str, int],
) -> tuple[Column, ...]:
    """Columns as printers.go declares them: (name, description[, type[, priority]])."""
    out = [NAME]
    for item in spec:
        name, description = item[0], item[1]
        kind = str(item[2]) if len(item) > 2 else "string"
        priority = int(item[3]) if len(item) > 3 else 0
        out.append(AGE if name == "Age" else Column(name, kind, description, priority))
    return tuple(out)


_TEMPLATE = (
    ("Containers", "Names of each container in the template.", "string", 1),
    ("Images", "Images referenced by each container in the template.", "string", 1),
)


def _simple(*fields: Callable[[JsonObj], Any]) -> Cells:
    """Cells of name, the given fields, then age: the shape of most small printers."""
    return lambda obj, now: [c.name_of(obj), *(f(obj) for f in fields), c.age_of(obj, now)]


_EVENT_COLUMNS = (
    Column(
        "Last Seen",
        description="The time at which the most recent occurrence of this event was recorded.",
    ),
    Column(
        "Type",
        description="Type of this event (Normal, Warning), new types could be added in the future",
    ),
    Column(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    Column("Object", description="The object that this event is about."),
    Column(
        "Subobject",
        priority=1,
        description='If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.',
    ),
    Column(
        "Source",
        priority=1,
        description="The component reporting this event. Should be a short machine understandable string.",
    ),
    Column("Message", description="A human-readable description of the status of this operation."),
    Column(
        "First Seen",
        priority=1,
        description="The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    Column("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", priority=1, format="name", description=NAME_DOC),
)

#: printers by storage key (group, plural), as registered by printers.go's ``AddHandlers``
BUILTIN: dict[tuple[str, str], Printer] = {
    ("", "pods"): Printer(
        _cols(
            ("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            ("Status", "The aggregate status of the containers in this pod."),
            (
                "Restarts",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            ("Age", ""),
            (
                "IP",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                "string",
                1,
            ),
            (
                "Node",
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
                "string",
                1,
            ),
            (
                "Nominated Node",
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
                "string",
                1,
            ),
            (
                "Readiness Gates",
                'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates',
                "string",
                1,
            ),
        ),
        c.pod_cells,
        c.pod_conditions,
    ),
    ("", "nodes"): Printer(
        _cols(
            ("Status", "The status of the node"),
            ("Roles", "The roles of the node"),
            ("Age", ""),
            ("Version", "Kubelet Version reported by the node."),
            (
                "Internal-IP",
                "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).",
                "string",
                1,
            ),
            (
                "External-IP",
                "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).",
                "string",
                1,
            ),
            (
                "OS-Image",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                "string",
                1,
            ),
            (
                "Kernel-Version",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                "string",
                1,
            ),
            (
                "Container-Runtime",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                "string",
                1,
            ),
        ),
        c.node_cells,
    ),
    ("batch", "jobs"): Printer(
        _cols(
            ("Status", "Status of the job."),
            (
                "Completions",
                "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
            ),
            ("Duration", "Time required to complete the job."),
            ("Age", ""),
            *_TEMPLATE,
            (
                "Selector",
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
                "string",
                1,
            ),
        ),
        c.job_cells,
    ),
    ("", "services"): Printer(
        _cols(
            (
                "Type",
                'type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. "NodePort" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. "LoadBalancer" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. "ExternalName" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types',
            ),
            (
                "Cluster-IP",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            (
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            (
                "Port(s)",
                "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
            ),
            ("Age", ""),
            (
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
                "string",
                1,
            ),
        ),
        c.service_cells,
    ),
    ("", "events"): Printer(_EVENT_COLUMNS, c.event_cells),
    ("", "namespaces"): Printer(
        _cols(("Status", "The status of the namespace"), ("Age", "")),
        _simple(lambda o: str(c.dig(o, "status", "phase") or "")),
    ),
    ("", "secrets"): Printer(
        _cols(
            (
                "Type",
                "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
            ),
            (
                "Data",
                "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: str(o.get("type") or ""), lambda o: len(o.get("data") or {})),
    ),
    ("", "configmaps"): Printer(
        _cols(
            (
                "Data",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
    ),
    ("", "serviceaccounts"): Printer(
        _cols(
            (
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: len(o.get("secrets") or [])),
    ),
    ("policy", "poddisruptionbudgets"): Printer(
        _cols(
            ("Min Available", "The minimum number of pods that must be available."),
            ("Max Unavailable", "The maximum number of pods that may be unavailable."),
            (
                "Allowed Disruptions",
                "Calculated number of pods that may be disrupted at this time.",
                "integer",
            ),
            ("Age", ""),
        ),
        c.pdb_cells,
    ),
    ("apps", "deployments"): Printer(
        _cols(
            ("Ready", "Number of the pod with ready state"),
            (
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            (
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            ("Age", ""),
            *_TEMPLATE,
            (
                "Selector",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                "string",
                1,
            ),
        ),
        c.deployment_cells,
    ),
    ("coordination.k8s.io", "leases"): Printer(
        _cols(
            (
                "Holder",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: str(c.dig(o, "spec", "holderIdentity") or "")),
    ),
    **{
        ("rbac.authorization.k8s.io", plural): Printer(
            _cols(
                (
                    "Role",
                    "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
                ),
                ("Age", ""),
                ("Users", f"Users in the {kind}", "string", 1),
                ("Groups", f"Groups in the {kind}", "string", 1),
                ("ServiceAccounts", f"ServiceAccounts in the {kind}", "string", 1),
            ),
            c.binding_cells,
        )
        for plural, kind in (
            ("rolebindings", "roleBinding"),
            ("clusterrolebindings", "clusterRoleBinding"),
        )
    },
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): Printer(
        _cols(
            (
                "Webhooks",
                "Webhooks indicates the number of webhooks registered in this configuration",
                "integer",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: len(o.get("webhooks") or [])),
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): Printer(
        _cols(
            (
                "Validations",
                "Validations indicates the number of validation rules defined in this configuration",
                "integer",
            ),
            (
                "ParamKind",
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: len(c.dig(o, "spec", "validations") or []), c.param_kind),
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): Printer(
        _cols(
            (
                "PolicyName",
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            (
                "ParamRef",
                "ParamRef indicates the param resource which sets the configration param",
            ),
            ("Age", ""),
        ),
        _simple(lambda o: str(c.dig(o, "spec", "policyName") or ""), c.param_ref),
    ),
}
