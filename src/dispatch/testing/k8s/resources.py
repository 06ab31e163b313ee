"""The resource types the emulator serves, as discovery describes them.

A :class:`ResourceType` is one REST resource at one group/version. Several versions (or groups)
of one resource share one *storage* (``storage`` key): Kueue Workloads at ``v1beta1`` and
``v1beta2``, core ``v1`` Events and ``events.k8s.io/v1`` Events. The store keeps one copy of
each object, in the representation of the resource type whose ``storage_version`` is true, and
converts on the way in and out (:mod:`dispatch.testing.k8s.conversion`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, wraps
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)


@dataclass(frozen=True)
class ResourceType:
    """One resource at one group/version, with the semantics the store needs."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status: bool = False  # has a /status subresource
    subresources: tuple[str, ...] = ()  # other subresources (``log``)
    verbs: tuple[str, ...] = ALL_VERBS
    builtin: bool = True  # built-in types; custom resources (CRDs) behave slightly differently
    storage_version: bool = True
    default_propagation: str = "Background"  # batch/v1 Jobs orphan by default
    categories: tuple[str, ...] = ()
    has_generation: bool = True
    #: DELETE answers with the object, not a Status (the registry's ``ReturnDeletedObject``)
    return_deleted: bool = False

    # cached: the fields are frozen, and the store asks these on every operation
    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def storage(self) -> tuple[str, str]:
        """Key shared by every version of the same stored resource."""
        return (_STORAGE_GROUP.get((self.group, self.plural), self.group), self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# events.k8s.io Events live in core Events' storage.
_STORAGE_GROUP = {("events.k8s.io", "events"): ""}


def _crd(
    group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: Any
) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, builtin=False, **kw)


DEFAULT_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        status=True,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        has_generation=False,
        return_deleted=True,
    ),
    ResourceType(
        "", "v1", "nodes", "Node", False, short_names=("no",), status=True, has_generation=False
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        short_names=("po",),
        status=True,
        subresources=("log", "eviction"),
        categories=("all",),
        return_deleted=True,
    ),
    ResourceType("", "v1", "events", "Event", True, short_names=("ev",), has_generation=False),
    ResourceType(
        "", "v1", "configmaps", "ConfigMap", True, short_names=("cm",), has_generation=False
    ),
    ResourceType("", "v1", "secrets", "Secret", True, has_generation=False),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        True,
        short_names=("svc",),
        status=True,
        categories=("all",),
        has_generation=False,
        return_deleted=True,
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        short_names=("sa",),
        subresources=("token",),
        has_generation=False,
        return_deleted=True,
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        short_names=("ev",),
        storage_version=False,
        has_generation=False,
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        status=True,
        categories=("all",),
        default_propagation="Orphan",
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        short_names=("deploy",),
        status=True,
        categories=("all",),
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        status=True,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, has_generation=False),
    *(
        ResourceType(
            "rbac.authorization.k8s.io", "v1", plural, kind, namespaced, has_generation=False
        )
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        False,
        verbs=CREATE_ONLY,
        has_generation=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=CREATE_ONLY,
        has_generation=False,
    ),
    *(
        ResourceType(
            "admissionregistration.k8s.io",
            "v1",
            plural,
            kind,
            False,
            status=status,
            categories=("api-extensions",),
        )
        for plural, kind, status in (
            ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
            ("validatingadmissionpolicies", "ValidatingAdmissionPolicy", True),
            ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
        )
    ),
    _crd("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True, status=True),
    _crd("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True, status=True),
    _crd("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", True),
    _crd(
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        False,
    ),
    _crd(
        "kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True, status=True, short_names=("wl",)
    ),
    _crd(
        "kueue.x-k8s.io",
        "v1beta1",
        "workloads",
        "Workload",
        True,
        status=True,
        short_names=("wl",),
        storage_version=False,
    ),
    _crd(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "ClusterQueue",
        False,
        status=True,
        short_names=("cq",),
    ),
    _crd(
        "kueue.x-k8s.io",
        "v1beta2",
        "localqueues",
        "LocalQueue",
        True,
        status=True,
        short_names=("lq",),
    ),
    _crd(
        "kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False, short_names=("rf",)
    ),
    _crd("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", False),
    _crd(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "podgroups",
        "PodGroup",
        True,
        status=True,
        short_names=("pg",),
    ),
    _crd(
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        "PodGroup",
        True,
        status=True,
        short_names=("pg", "podgroup-v1beta1"),
    ),
)


#: training-operator v1 jobs, served as stored objects with no controller (``ClusterConfig.
#: extra_resources``): a test writes their status as the operator would
TRAINING_OPERATOR_RESOURCES: tuple[ResourceType, ...] = tuple(
    _crd("kubeflow.org", version, plural, kind, True, status=True)
    for version, plural, kind in (
        ("v1", "pytorchjobs", "PyTorchJob"),
        ("v1", "tfjobs", "TFJob"),
        ("v1", "xgboostjobs", "XGBoostJob"),
        ("v1", "paddlejobs", "PaddleJob"),
        ("v1", "jaxjobs", "JAXJob"),
        ("v2beta1", "mpijobs", "MPIJob"),
    )
)


class _Types(list[ResourceType]):
    """The catalog's list of types, counting its changes (``version``) so that lookups can
    be memoized: a test may change ``types`` in place to hide a group."""

    version = 0


def _counting(method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    def changing(self: _Types, *args: Any, **kwargs: Any) -> Any:
        self.version += 1
        return method(self, *args, **kwargs)

    return changing


for _name in (
    "__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop",
    "remove", "clear", "sort", "reverse",
):  # fmt: skip
    setattr(_Types, _name, _counting(getattr(list, _name)))


@dataclass
class ResourceCatalog:
    """Lookup of resource types by (group, version, plural) and by storage key.

    ``by_kind`` and ``storage_type`` are memoized until ``types`` changes (through
    :meth:`add` or in place)."""

    types: list[ResourceType] = field(default_factory=lambda: list(DEFAULT_RESOURCES))

    def __post_init__(self) -> None:
        self.types = _Types(self.types)
        self._index = {(t.group, t.version, t.plural): t for t in self.types}
        self._memo_stamp: tuple[int, int] = (0, -1)
        self._kinds: dict[tuple[str, str], ResourceType | None] = {}
        self._storages: dict[tuple[str, str], ResourceType | None] = {}

    def _memo(self) -> bool:
        """Whether the memos may be used (emptied first if ``types`` changed since)."""
        types = self.types
        if not isinstance(types, _Types):  # replaced by a plain list: no memo
            return False
        stamp = (id(types), types.version)
        if stamp != self._memo_stamp:
            self._memo_stamp = stamp
            self._kinds.clear()
            self._storages.clear()
        return True

    def add(self, rtype: ResourceType) -> None:
        self.types.append(rtype)
        self._index[(rtype.group, rtype.version, rtype.plural)] = rtype

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self.types)

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._index.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        if not self._memo():
            return self._by_kind(api_version, kind)
        key = (api_version, kind)
        if key not in self._kinds:
            self._kinds[key] = self._by_kind(api_version, kind)
        return self._kinds[key]

    def _by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for t in self.types:
            if t.api_version == api_version and t.kind == kind:
                return t
        return None

    def storage_type(self, rtype: ResourceType) -> ResourceType:
        """The version whose representation the store keeps for ``rtype``'s storage."""
        if not self._memo():
            return self._storage_type(rtype.storage) or rtype
        key = rtype.storage
        if key not in self._storages:
            self._storages[key] = self._storage_type(key)
        return self._storages[key] or rtype

    def _storage_type(self, storage: tuple[str, str]) -> ResourceType | None:
        for t in self.types:
            if t.storage == storage and t.storage_version:
                return t
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions, in registration order (core group under ``""``)."""
        out: dict[str, list[str]] = {}
        for t in self.types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> Iterable[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]

    def resolve(self, name: str) -> ResourceType | None:
        """A resource by plural, singular, short name or ``plural.group`` (as kubectl names)."""
        plural, _, group = name.partition(".")
        for t in self.types:
            if group and t.group != group:
                continue
            if plural in (t.plural, t.singular_name, *t.short_names) and t.storage_version:
                return t
        return None
