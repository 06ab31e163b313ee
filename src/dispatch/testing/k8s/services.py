"""What the API server does to a Service on create and update: defaulting, cluster IP and node
port allocation, and the immutability of an allocated cluster IP.

A real server splits this between ``SetDefaults_Service`` (pkg/apis/core/v1/defaults.go), the
Service REST strategy (pkg/registry/core/service/strategy.go) and the IP/port allocators
(pkg/registry/core/service/storage/alloc.go); here one admission plugin,
:class:`ServiceStrategy`, does all three, so that a client reads back the object a cluster
would have stored:

* ``type: ClusterIP``, ``sessionAffinity: None``, ``internalTrafficPolicy: Cluster``, each
  port's ``protocol: TCP`` and ``targetPort`` = ``port``; ``externalTrafficPolicy: Cluster``
  for externally reachable Services; ``allocateLoadBalancerNodePorts: true`` for LoadBalancers.
* a cluster IP from :data:`SERVICE_CIDR` unless ``clusterIP: None`` (headless) or
  ``ExternalName``; ``clusterIPs``, ``ipFamilies: [IPv4]`` and ``ipFamilyPolicy: SingleStack``
  (a headless Service without selector gets ``RequireDualStack`` and both families, as on a
  single-stack cluster); node ports from 30000-32767 for NodePort and LoadBalancer Services;
  ``status: {loadBalancer: {}}``.
* on update, fields the client left out keep their allocated values, and a changed cluster IP
  is 422 "may not change once set".

Allocation is computed from the stored Services (an index of what each holds, kept from the
store's changes: no allocator state), so a refused or dry-run write never leaks an address. Addresses are handed out in order from the first one above the
range's reserved lower band (a real allocator picks at random in that band): the emulator's
choices are deterministic, a test must not depend on the value.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from dispatch.adapters.kubeflow.objects import MERGE_KEYS as _BASE_MERGE_KEYS
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import FieldError, FieldErrorType

if TYPE_CHECKING:
    from dispatch.testing.k8s.resources import ResourceType
    from dispatch.testing.k8s.store import Store
    from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
SERVICES = ("", "services")
#: the default ``--service-cluster-ip-range`` of kubeadm and kind
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
#: ``--service-node-port-range``
NODE_PORTS = range(30000, 32768)
#: the lower band of the range kept for static addresses (``min(max(16, size/16), 256)``);
#: dynamic allocation starts above it
RESERVED = min(max(16, SERVICE_CIDR.num_addresses // 16), 256)
TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
HEADLESS = "None"
#: the merge keys of a Service: its ``spec.ports`` merge by ``port`` (core/v1 ServiceSpec
#: ``patchMergeKey:"port"``), where a container's ``ports`` merge by ``containerPort``
MERGE_KEYS = {**_BASE_MERGE_KEYS, "ports": "port"}


def _go_strings(values: Iterable[str]) -> str:
    """A ``[]string`` as Go's ``%#v`` prints it in a field error's value."""
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _invalid_ips(path: str, ips: list[str], detail: str) -> FieldError:
    return FieldError(FieldErrorType.INVALID, path, f"{_go_strings(ips)}: {detail}")


def default(spec: JsonObj) -> None:
    """``SetDefaults_Service`` on ``spec``, in place."""
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for port in spec.get("ports") or []:
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    kind = spec["type"]
    external = kind in ("LoadBalancer", "NodePort") or (
        kind == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if external and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and kind != "ExternalName":
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


class _Pool:
    """How many stored Services hold each value of one range (cluster IP offsets or node
    ports), and ``floor``: every value of the range below it is held. ``floor`` moves up past
    held values when asked and back when one is released, so finding a free value is O(1)
    amortized."""

    def __init__(self, values: range) -> None:
        self.values = values
        self.held: dict[int, int] = {}
        self.floor = values.start

    def hold(self, value: int, n: int) -> None:
        count = self.held.get(value, 0) + n
        if count:
            self.held[value] = count
            return
        self.held.pop(value, None)
        if value in self.values and value < self.floor:
            self.floor = value

    def free(self, mine: Collection[int]) -> Iterator[int]:
        """In order, the values no Service holds but the one being written (``mine``: its
        own)."""
        while self.floor < self.values.stop and self.floor in self.held:
            self.floor += 1
        own = [v for v in mine if self.held.get(v) == 1 and v in self.values]
        value = min([self.floor, *own])
        while value < self.values.stop:
            if self.held.get(value, 0) - (value in mine) <= 0:
                yield value
            value += 1


class _Taken:
    """What the other Services hold, as a set: the index's counts minus the writer's own."""

    def __init__(self, held: Counter[str], mine: Collection[str]) -> None:
        self.held = held
        self.mine = mine

    def __contains__(self, value: str) -> bool:
        return self.held.get(value, 0) - (value in self.mine) > 0


def _offset(ip: str) -> int | None:
    """``ip``'s offset in :data:`SERVICE_CIDR` if it is an address of it written as
    allocation writes one, else None."""
    if not _is_ip(ip):
        return None
    address = ipaddress.ip_address(ip)
    if str(address) != ip or address not in SERVICE_CIDR:
        return None
    return int(address) - int(SERVICE_CIDR.network_address)


def _holdings(svc: JsonObj) -> tuple[frozenset[str], frozenset[int]]:
    """The cluster IPs and node ports ``svc`` holds."""
    spec = svc.get("spec") or {}
    ips = frozenset(ip for ip in spec.get("clusterIPs") or [] if ip != HEADLESS)
    ports = frozenset(p["nodePort"] for p in spec.get("ports") or [] if p.get("nodePort"))
    return ips, ports


class Allocations:
    """The cluster IPs and node ports the stored Services hold, kept from the store's changes
    (a refused or dry-run write stores nothing, so it holds nothing)."""

    def __init__(self, store: Store, rtype: ResourceType) -> None:
        self._held: dict[tuple[str, str], tuple[frozenset[str], frozenset[int]]] = {}
        self.ips: Counter[str] = Counter()
        self.ip_pool = _Pool(range(RESERVED, SERVICE_CIDR.num_addresses - 1))
        self.port_pool = _Pool(NODE_PORTS)
        for svc in store.objects(rtype):
            self._hold(svc)
        store.on_change(self._on_change)

    def of(self, key: tuple[str, str]) -> tuple[frozenset[str], frozenset[int]]:
        """What the Service at ``key`` (namespace, name) holds."""
        return self._held.get(key, (frozenset(), frozenset()))

    def _on_change(self, change: Change) -> None:
        if change.rtype.storage != SERVICES:
            return
        self._release((change.namespace, change.name))
        if change.type != "DELETED":
            self._hold(change.obj)

    def _hold(self, svc: JsonObj) -> None:
        m = svc["metadata"]
        held = self._held[(m.get("namespace", ""), m["name"])] = _holdings(svc)
        self._count(*held, 1)

    def _release(self, key: tuple[str, str]) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            self._count(*held, -1)

    def _count(self, ips: frozenset[str], ports: frozenset[int], n: int) -> None:
        for ip in ips:
            self.ips[ip] += n
            if not self.ips[ip]:
                del self.ips[ip]
            offset = _offset(ip)
            if offset is not None:
                self.ip_pool.hold(offset, n)
        for port in ports:
            self.port_pool.hold(port, n)


@dataclass(frozen=True)
class _Free:
    """For the Service being written: the cluster IPs the others hold (``taken_ips``), and
    in order the free cluster IPs (as offsets in :data:`SERVICE_CIDR`) and node ports."""

    taken_ips: _Taken
    ips: Iterator[int]
    ports: Iterator[int]


def _next_ip(free: _Free) -> str:
    offset = next(free.ips, None)
    if offset is None:
        raise RuntimeError("the emulated service CIDR is full")
    return str(ipaddress.ip_address(int(SERVICE_CIDR.network_address) + offset))


def _allocate_ip(spec: JsonObj, free: _Free) -> list[FieldError]:
    """Fill ``clusterIP``/``clusterIPs`` of a new Service (alloc.go ``allocClusterIPs``)."""
    ips = list(spec.get("clusterIPs") or [])
    ip = spec.get("clusterIP") or (ips[0] if ips else "")
    if ip == HEADLESS:
        spec["clusterIP"], spec["clusterIPs"] = HEADLESS, [HEADLESS]
        return []
    if not ip:
        ip = _next_ip(free)
    else:
        address = ipaddress.ip_address(ip) if _is_ip(ip) else None
        problem = ""
        if address is None or address not in SERVICE_CIDR:
            problem = (
                f"the provided IP ({ip}) is not in the valid range. "
                f"The range of valid IPs is {SERVICE_CIDR}"
            )
        elif ip in free.taken_ips:
            problem = "provided IP is already allocated"
        if problem:
            shown = ips or [ip]
            return [
                _invalid_ips("spec.clusterIPs", shown, f"failed to allocate IP {ip}: {problem}")
            ]
    spec["clusterIP"] = ip
    spec["clusterIPs"] = [ip, *ips[1:]]
    return []


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _families(spec: JsonObj) -> None:
    """``ipFamilyPolicy`` and ``ipFamilies`` of a single-stack IPv4 cluster (alloc.go
    ``initIPFamilyFields``)."""
    headless = spec.get("clusterIP") == HEADLESS
    if headless and not spec.get("selector"):
        spec.setdefault("ipFamilyPolicy", "RequireDualStack")
        families = spec.setdefault("ipFamilies", ["IPv4"])
        if len(families) < 2 and spec["ipFamilyPolicy"] != "SingleStack":
            families.append("IPv6" if families[0] == "IPv4" else "IPv4")
        return
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("ipFamilies", ["IPv4"])


def _node_ports(spec: JsonObj, free: Iterator[int]) -> None:
    if spec["type"] not in ("NodePort", "LoadBalancer"):
        return
    if spec["type"] == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
        return
    for port in spec.get("ports") or []:
        if not port.get("nodePort"):
            port["nodePort"] = next(free)


def _keep_allocated(spec: JsonObj, old: JsonObj) -> None:
    """What the client left out of an update keeps its allocated value (``patchAllocatedValues``
    and ``normalizeClusterIPs``): a PUT of the manifest the Service was created from does not
    release its address."""
    if "ExternalName" in (spec["type"], old.get("type")):
        return
    old_ips = list(old.get("clusterIPs") or [])
    if not spec.get("clusterIP"):
        spec["clusterIP"] = old.get("clusterIP", "")
        if not spec.get("clusterIPs") and old_ips:
            spec["clusterIPs"] = old_ips
    elif not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec["clusterIP"] != old.get("clusterIP") and spec["clusterIPs"] == old_ips:
        spec["clusterIPs"] = [spec["clusterIP"], *old_ips[1:]]
    for name in ("ipFamilyPolicy", "ipFamilies"):
        if spec.get(name) is None and old.get(name) is not None:
            spec[name] = old[name]
    if spec["type"] in ("NodePort", "LoadBalancer"):
        held = {p.get("port"): p.get("nodePort") for p in old.get("ports") or []}
        for port in spec.get("ports") or []:
            if not port.get("nodePort") and held.get(port.get("port")):
                port["nodePort"] = held[port.get("port")]


def _changed_ips(spec: JsonObj, old: JsonObj) -> list[FieldError]:
    """``validateUpgradeDowngradeClusterIPs`` for a single-stack cluster."""
    if "ExternalName" in (spec["type"], old.get("type")):
        return []
    if spec.get("clusterIP") == HEADLESS and old.get("clusterIP") == HEADLESS:
        return []
    new_ips, old_ips = list(spec.get("clusterIPs") or []), list(old.get("clusterIPs") or [])
    if len(new_ips) == len(old_ips):
        return [
            _invalid_ips(f"spec.clusterIPs[{i}]", new_ips, "may not change once set")
            for i, ip in enumerate(old_ips)
            if ip != new_ips[i]
        ]
    if not new_ips:
        return [_invalid_ips("spec.clusterIPs[0]", new_ips, "primary clusterIP can not be unset")]
    if old_ips and new_ips[0] != old_ips[0]:
        return [_invalid_ips("spec.clusterIPs[0]", new_ips, "may not change once set")]
    return []


class ServiceStrategy:
    """The admission plugin doing the Service registry's work (see the module docstring)."""

    def __init__(self) -> None:
        self._allocations: WeakKeyDictionary[Store, Allocations] = WeakKeyDictionary()

    def _free(self, request: AdmissionRequest) -> _Free:
        """What the Services but the one being written hold (its own values are free to it),
        from the index of ``request.store`` (built on first use)."""
        index = self._allocations.get(request.store)
        if index is None:
            index = self._allocations[request.store] = Allocations(request.store, request.rtype)
        me = request.obj["metadata"]
        my_ips, my_ports = index.of((me.get("namespace") or "", me.get("name") or ""))
        offsets = {o for o in map(_offset, my_ips) if o is not None}
        return _Free(
            _Taken(index.ips, my_ips), index.ip_pool.free(offsets), index.port_pool.free(my_ports)
        )

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.rtype.storage != SERVICES or request.subresource:
            return []
        obj = request.obj
        spec = obj.setdefault("spec", {})
        default(spec)
        if spec["type"] not in TYPES:
            return [FieldError.not_supported("spec.type", spec["type"], TYPES)]
        found: list[FieldError] = []
        if request.operation == "CREATE":
            obj["status"] = {"loadBalancer": {}}
        else:
            old = (request.old or {}).get("spec") or {}
            _keep_allocated(spec, old)
            found = _changed_ips(spec, old)
        if found or spec["type"] == "ExternalName":
            return found
        free = self._free(request)
        if not spec.get("clusterIP") or request.operation == "CREATE":
            found = _allocate_ip(spec, free)  # an update gets one only from ExternalName
        if not found:
            _families(spec)
            _node_ports(spec, free.ports)
        return found
