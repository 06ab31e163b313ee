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

Allocation is computed from the stored Services (no allocator state), so a refused or dry-run
write never leaks an address. Addresses are handed out in order from the first one above the
range's reserved lower band (a real allocator picks at random in that band): the emulator's
choices are deterministic, a test must not depend on the value.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from dispatch.adapters.kubeflow.objects import MERGE_KEYS as _BASE_MERGE_KEYS
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import FieldError, FieldErrorType

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


def _allocated(request: AdmissionRequest) -> tuple[set[str], set[int]]:
    """Cluster IPs and node ports held by every stored Service but the one being written."""
    me = request.obj["metadata"]
    key = (me.get("namespace"), me.get("name"))
    ips: set[str] = set()
    ports: set[int] = set()
    for svc in request.store.objects(request.rtype):
        m = svc["metadata"]
        if (m.get("namespace"), m.get("name")) == key:
            continue
        spec = svc.get("spec") or {}
        ips.update(ip for ip in spec.get("clusterIPs") or [] if ip != HEADLESS)
        ports.update(p["nodePort"] for p in spec.get("ports") or [] if p.get("nodePort"))
    return ips, ports


def _next_ip(taken: set[str]) -> str:
    base = int(SERVICE_CIDR.network_address)
    for offset in range(RESERVED, SERVICE_CIDR.num_addresses - 1):
        candidate = str(ipaddress.ip_address(base + offset))
        if candidate not in taken:
            return candidate
    raise RuntimeError("the emulated service CIDR is full")


def _allocate_ip(spec: JsonObj, taken: set[str]) -> list[FieldError]:
    """Fill ``clusterIP``/``clusterIPs`` of a new Service (alloc.go ``allocClusterIPs``)."""
    ips = list(spec.get("clusterIPs") or [])
    ip = spec.get("clusterIP") or (ips[0] if ips else "")
    if ip == HEADLESS:
        spec["clusterIP"], spec["clusterIPs"] = HEADLESS, [HEADLESS]
        return []
    if not ip:
        ip = _next_ip(taken)
    else:
        address = ipaddress.ip_address(ip) if _is_ip(ip) else None
        problem = ""
        if address is None or address not in SERVICE_CIDR:
            problem = (
                f"the provided IP ({ip}) is not in the valid range. "
                f"The range of valid IPs is {SERVICE_CIDR}"
            )
        elif ip in taken:
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


def _node_ports(spec: JsonObj, taken: set[int]) -> None:
    if spec["type"] not in ("NodePort", "LoadBalancer"):
        return
    if spec["type"] == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
        return
    free = (p for p in NODE_PORTS if p not in taken)
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
        ips, ports = _allocated(request)
        if not spec.get("clusterIP") or request.operation == "CREATE":
            found = _allocate_ip(spec, ips)  # an update gets one only from ExternalName
        if not found:
            _families(spec)
            _node_ports(spec, ports)
        return found
