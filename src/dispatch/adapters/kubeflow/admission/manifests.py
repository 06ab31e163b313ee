"""The Kubernetes objects that install the guard's webhook server (pure: options in, dicts out).

``dispatch admission manifests`` prints them; ``kubectl apply -f -`` installs them. They are:

* a ServiceAccount, and a ClusterRole + ClusterRoleBinding granting exactly ``create`` and
  ``patch`` on core ``events``: the server records an Event (``EVENT_RESUME_REFUSED``) on a
  TrainJob whose resume it refused, in that TrainJob's namespace. It reads nothing: every
  object it judges arrives in the AdmissionReview.
* a Service (port 443 to the pods' 8443) and a Deployment of ``dispatch admission serve``
  (two replicas spread across nodes, a PodDisruptionBudget keeping one up during drains,
  non-root, read-only root filesystem, no capabilities). Its certificate and key come from
  the Secret ``<name>-tls`` (type ``kubernetes.io/tls``), made by cert-manager (a Certificate
  with ``secretName: <name>-tls`` and the DNS name ``<name>.<namespace>.svc``) or by
  ``dispatch admission certs``; the server reloads them when the Secret changes.
* the ValidatingWebhookConfiguration, with two webhooks:

  - ``WEBHOOK_IDENTITY``: UPDATE of TrainJobs and TrainingRuntimes carrying the label
    ``dispatch.dev/job`` (the object selector: the API server does not even call the server
    for anything else, so nobody else's objects ever wait on it). It refuses resuming an
    ended TrainJob and changes by anyone but dispatch's identities (rules 1 and 2).
  - ``WEBHOOK_RUNTIMES``: CREATE and UPDATE of TrainingRuntimes and ClusterTrainingRuntimes
    matching the runtime selector (default: the label ``dispatch.dev/checked`` exists);
    unlabelled runtimes are never sent (rule 3).

  Both: ``failurePolicy: Fail`` by default, because a guard that lets requests through while
  it is down guards nothing (a resumed ended TrainJob would run again); the selectors keep
  the blast radius of an outage to dispatch's own objects and checked runtimes.
  ``sideEffects: NoneOnDryRun``: the Event is the only side effect and the server skips it
  on dry-run requests. ``matchPolicy: Equivalent``: a request through another version of
  Trainer's API (if one is ever served) is converted and sent too, so the guard cannot be
  bypassed by choosing a version. A namespace selector is added only when asked (the object
  selector already scopes the webhooks).

The identities default to the in-cluster supervisor that ``deploy/`` installs
(``system:serviceaccount:<namespace>:dispatch-supervisor``), plus any given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.admission.contract import (
    LABEL_CHECKED,
    LABEL_JOB,
    PATH_IDENTITY,
    PATH_RUNTIMES,
    WEBHOOK_IDENTITY,
    WEBHOOK_RUNTIMES,
)

__all__ = [
    "CERT_DIR",
    "FAILURE_POLICIES",
    "NOTES",
    "SERVER_PORT",
    "ManifestOptions",
    "default_image",
    "label_selector",
    "notes",
    "server_args",
    "supervisor_identity",
    "webhook_objects",
]

JsonObj = dict[str, Any]

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
#: the port the server listens on inside its pod (unprivileged: the pod runs as non-root)
SERVER_PORT = 8443
#: where the Secret ``<name>-tls`` is mounted: ``tls.crt`` and ``tls.key``
CERT_DIR = "/tls"
FAILURE_POLICIES = ("Fail", "Ignore")
#: the API server's limits on a webhook's timeoutSeconds
TIMEOUT_RANGE = (1, 30)
#: the supervisor's service account in deploy/base (serviceaccount.yaml)
SUPERVISOR_ACCOUNT = "dispatch-supervisor"
COMPONENT = "admission"
#: a Service's name (DNS-1035 label; the Secret's is the name + ``-tls``) and a namespace's
#: (DNS-1123 label)
_SERVICE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,54}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: the distribution whose version tags the image
DISTRIBUTION = "dispatch-train"

#: what the objects do, printed to stderr by ``dispatch admission manifests`` (``notes()`` fills
#: in the names)
NOTES = """\
# dispatch admission manifests: what the objects do
#
# - The webhook server runs as Deployment {namespace}/{name} (spread across nodes; a
#   PodDisruptionBudget keeps one replica through drains). Its certificate is the Secret
#   {namespace}/{name}-tls (type kubernetes.io/tls) for the DNS name {name}.{namespace}.svc:
#     either cert-manager: a Certificate with secretName {name}-tls, and the annotation
#       cert-manager.io/inject-ca-from: {namespace}/<certificate> on the
#       ValidatingWebhookConfiguration {name} (its cainjector fills in caBundle);
#     or: dispatch admission certs --service {name} --namespace {namespace} --out DIR
#         kubectl -n {namespace} create secret tls {name}-tls \\
#           --cert DIR/tls.crt --key DIR/tls.key
#       and print these objects again with --ca-file DIR/ca.crt (sets caBundle).
# - failurePolicy Fail: while no replica answers, updates of dispatch's TrainJobs and
#   TrainingRuntimes, and writes of checked runtimes, are refused (a guard that lets them
#   through while it is down guards nothing). Nothing else is ever sent to the server:
#   the object selectors choose what is.
# - webhook identity.guard.dispatch.dev: UPDATE of TrainJobs and TrainingRuntimes labelled
#   dispatch.dev/job: refuses resuming an ended TrainJob (anyone, Kueue included), and
#   changes by anyone but dispatch's identities (except spec.suspend and what Kueue writes
#   in its runtimePatches entry).
# - webhook runtimes.guard.dispatch.dev: CREATE and UPDATE of runtimes carrying the runtime
#   selector's labels: refuses a runtime that `dispatch check-runtime` would refuse.
# - dispatch's identities: the supervisor's service account in namespace {namespace}, and every
#   --identity and --group given. Add the users laptops or CI submit as, or their updates
#   of their own TrainJobs are refused. The server itself may only create and patch Events.
# - Without a server: --policy prints ValidatingAdmissionPolicies (Kubernetes >= 1.30)
#   enforcing the first webhook's rules in CEL; runtimes are not checked that way.
"""


def notes(options: ManifestOptions) -> str:
    """``NOTES`` for these options' names."""
    return NOTES.format(name=options.name, namespace=options.namespace)


def default_image() -> str:
    """``dispatch:<installed version>``: the image the repository's Dockerfile builds, tagged
    as deploy/base tags it (overlays replace it with their registry's). The version is read
    as ``dispatch.__version__`` reads it; importing that package would import the API layer
    into the adapter's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"dispatch:{version(DISTRIBUTION)}"
    except PackageNotFoundError:  # a source tree that is not installed
        return "dispatch:latest"


def supervisor_identity(namespace: str) -> str:
    """The user the in-cluster supervisor (deploy/) writes as, in ``namespace``."""
    return f"system:serviceaccount:{namespace}:{SUPERVISOR_ACCOUNT}"


@dataclass(frozen=True)
class ManifestOptions:
    """What the generated objects are made of. ``ValueError`` on values the API would refuse."""

    namespace: str = "dispatch"
    #: the name of every object (the Secret is ``<name>-tls``)
    name: str = "dispatch-admission"
    #: None: ``default_image()``
    image: str | None = None
    replicas: int = 2
    #: users whose writes are dispatch's, besides the supervisor's service account
    identities: tuple[str, ...] = ()
    #: groups whose members' writes are dispatch's
    groups: tuple[str, ...] = ()
    #: the labels selecting the checked runtimes: key -> value, or key -> None ("exists")
    runtime_selector: Mapping[str, str | None] = field(
        default_factory=lambda: {LABEL_CHECKED: None}
    )
    #: the CA that signed the server's certificate (base64 of its PEM); None: not set
    ca_bundle: str | None = None
    failure_policy: str = "Fail"
    timeout_seconds: int = 5
    #: only namespaces with these labels (key -> value, or key -> None); None: every namespace
    namespace_selector: Mapping[str, str | None] | None = None
    #: the runtime rules' settings the server applies (None: its defaults)
    allow_rank_restart: bool | None = None
    publish_init_container: str | None = None

    def __post_init__(self) -> None:
        if not _SERVICE_NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r}: lower-case letters, digits and '-', starting with a "
                "letter, at most 56 characters (it names a Service)"
            )
        if not _NAMESPACE.match(self.namespace):
            raise ValueError(f"namespace {self.namespace!r}: not a valid namespace name")
        if self.failure_policy not in FAILURE_POLICIES:
            raise ValueError(
                f"failure policy {self.failure_policy!r}: expected one of "
                f"{', '.join(FAILURE_POLICIES)}"
            )
        low, high = TIMEOUT_RANGE
        if not low <= self.timeout_seconds <= high:
            raise ValueError(
                f"timeout {self.timeout_seconds} s: a webhook's timeout is {low} to {high} s"
            )
        if self.replicas < 1:
            raise ValueError(f"replicas {self.replicas}: at least 1")
        if not self.runtime_selector:
            raise ValueError("the runtime selector is empty: it would check every runtime")

    @property
    def all_identities(self) -> tuple[str, ...]:
        """The supervisor's service account, then the given identities (no duplicates)."""
        return tuple(dict.fromkeys((supervisor_identity(self.namespace), *self.identities)))

    @property
    def secret_name(self) -> str:
        return f"{self.name}-tls"

    @property
    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": "dispatch", "app.kubernetes.io/component": COMPONENT}


def label_selector(labels: Mapping[str, str | None]) -> JsonObj:
    """A LabelSelector: ``key=value`` as matchLabels, ``key`` alone as ``Exists``."""
    selector: JsonObj = {}
    valued = {k: v for k, v in labels.items() if v is not None}
    exists = [k for k, v in labels.items() if v is None]
    if valued:
        selector["matchLabels"] = valued
    if exists:
        selector["matchExpressions"] = [{"key": k, "operator": "Exists"} for k in exists]
    return selector


def webhook_objects(options: ManifestOptions) -> list[JsonObj]:
    """Every object, in the order ``kubectl apply`` should create them."""
    return [
        _service_account(options),
        _cluster_role(options),
        _cluster_role_binding(options),
        _service(options),
        _deployment(options),
        _disruption_budget(options),
        _webhook_configuration(options),
    ]


def _metadata(options: ManifestOptions, *, namespaced: bool = True) -> JsonObj:
    metadata: JsonObj = {"name": options.name, "labels": dict(options.labels)}
    if namespaced:
        metadata["namespace"] = options.namespace
    return metadata


def _service_account(options: ManifestOptions) -> JsonObj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(options)}


def _cluster_role(options: ManifestOptions) -> JsonObj:
    # Events on refused resumes, in the TrainJob's namespace (any): nothing else
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _metadata(options, namespaced=False),
        "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}],
    }


def _cluster_role_binding(options: ManifestOptions) -> JsonObj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(options, namespaced=False),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": options.name,
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": options.name, "namespace": options.namespace}
        ],
    }


def _service(options: ManifestOptions) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(options),
        "spec": {
            "selector": dict(options.labels),
            "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
        },
    }


def server_args(options: ManifestOptions) -> list[str]:
    """The container's arguments (the image's entrypoint is ``dispatch``)."""
    args = [
        "admission",
        "serve",
        "--port",
        str(SERVER_PORT),
        "--cert-file",
        f"{CERT_DIR}/tls.crt",
        "--key-file",
        f"{CERT_DIR}/tls.key",
    ]
    for identity in options.all_identities:
        args += ["--identity", identity]
    for group in options.groups:
        args += ["--group", group]
    for key, value in options.runtime_selector.items():
        args += ["--runtime-selector", key if value is None else f"{key}={value}"]
    if options.allow_rank_restart is not None:
        args.append(
            "--allow-rank-restart" if options.allow_rank_restart else "--no-allow-rank-restart"
        )
    if options.publish_init_container is not None:
        args += ["--publish-init-container", options.publish_init_container]
    return args


def _probe(path: str, period: int, failures: int) -> JsonObj:
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def _deployment(options: ManifestOptions) -> JsonObj:
    labels = dict(options.labels)
    container: JsonObj = {
        "name": "server",
        "image": options.image or default_image(),
        "args": server_args(options),
        "ports": [{"name": "https", "containerPort": SERVER_PORT, "protocol": "TCP"}],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "readinessProbe": _probe("/readyz", period=5, failures=2),
        "livenessProbe": _probe("/healthz", period=10, failures=3),
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "tls", "mountPath": CERT_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod_spec: JsonObj = {
        "serviceAccountName": options.name,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,  # the Dockerfile's user
            "runAsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # one replica per node where possible: a node's loss leaves the other answering
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": labels},
            }
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": labels},
                        },
                    }
                ]
            }
        },
        "containers": [container],
        "volumes": [
            {"name": "tls", "secret": {"secretName": options.secret_name}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(options),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _disruption_budget(options: ManifestOptions) -> JsonObj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(options),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(options.labels)}},
    }


def _client_config(options: ManifestOptions, path: str) -> JsonObj:
    config: JsonObj = {
        "service": {
            "namespace": options.namespace,
            "name": options.name,
            "path": path,
            "port": 443,
        }
    }
    if options.ca_bundle is not None:
        config["caBundle"] = options.ca_bundle
    return config


def _webhook(options: ManifestOptions, name: str, path: str) -> JsonObj:
    webhook: JsonObj = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "matchPolicy": "Equivalent",
        "failurePolicy": options.failure_policy,
        "timeoutSeconds": options.timeout_seconds,
        "clientConfig": _client_config(options, path),
    }
    if options.namespace_selector is not None:
        webhook["namespaceSelector"] = label_selector(options.namespace_selector)
    return webhook


def _identity_webhook(options: ManifestOptions) -> JsonObj:
    webhook = _webhook(options, WEBHOOK_IDENTITY, PATH_IDENTITY)
    webhook["rules"] = [
        {
            "apiGroups": [TRAINER_GROUP],
            "apiVersions": [TRAINER_VERSION],
            "operations": ["UPDATE"],
            # the objects themselves: status is the controllers', never guarded
            "resources": ["trainjobs", "trainingruntimes"],
            "scope": "Namespaced",
        }
    ]
    webhook["objectSelector"] = label_selector({LABEL_JOB: None})
    return webhook


def _runtimes_webhook(options: ManifestOptions) -> JsonObj:
    webhook = _webhook(options, WEBHOOK_RUNTIMES, PATH_RUNTIMES)
    webhook["rules"] = [
        {
            "apiGroups": [TRAINER_GROUP],
            "apiVersions": [TRAINER_VERSION],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["trainingruntimes", "clustertrainingruntimes"],
            "scope": "*",
        }
    ]
    selector = label_selector(options.runtime_selector)
    # dispatch's runtime copies keep the labels of the runtime they copy: they are dispatch's
    # objects (the identity webhook guards them), and submitting a job must not depend on
    # this webhook answering
    copies = {"key": LABEL_JOB, "operator": "DoesNotExist"}
    selector["matchExpressions"] = [*selector.get("matchExpressions", []), copies]
    webhook["objectSelector"] = selector
    return webhook


def _webhook_configuration(options: ManifestOptions) -> JsonObj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": _metadata(options, namespaced=False),
        "webhooks": [_identity_webhook(options), _runtimes_webhook(options)],
    }
