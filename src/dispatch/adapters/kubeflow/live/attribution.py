"""Which TrainJob an observed object is evidence for (in memory, no I/O).

The watches see every object of a kind in a namespace; ``Attribution.assign(obj)`` answers
the TrainJobs (``(namespace, name)``) it concerns, learning as it goes:

* a TrainJob is its own; a JobSet belongs to the TrainJob of the same name;
* Jobs and Pods by their ``jobset.sigs.k8s.io/jobset-name`` (or Trainer's
  ``trainer.kubeflow.org/trainjob-name``) label; a Pod's node is remembered;
* a Workload by ``kueue.x-k8s.io/job-uid`` (the TrainJob's uid) or its owner reference;
* a PodGroup (scheduler-plugins', Volcano's) by its owner reference, else by name (Trainer
  names it after the TrainJob);
* an Event by the object it is about: a known object, else a name JobSet/Kueue derives from the
  TrainJob's (``<trainjob>-...`` for Jobs and Pods, ``trainjob-<trainjob>-...`` for Workloads);
* a Node by the pods known to run on it (``nodes_of``/``trainjobs_on``).

An object (or Event) whose TrainJob is not known yet is kept (its latest state, bounded) and
handed out again by ``adopt_orphans`` once a new TrainJob is known: the streams of different
kinds are not ordered with each other, so a JobSet may be seen before its TrainJob. Nothing here raises on malformed objects.

Every answer costs what one object names, not what is followed: a name prefix is looked up
once per ``-`` in the name, orphans are indexed by the TrainJob names and uids they could
belong to (a new TrainJob looks only at its own), and what is learnt about a TrainJob is
indexed by it, so ``forget`` drops it alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.kinds import JOBSET_NAME, WORKLOAD_JOB_UID
from dispatch.adapters.kubeflow.causes.evidence import event_subject, object_kind
from dispatch.adapters.kubeflow.objects import as_list, dig, text_of

TrainJobRef = tuple[str, str]  # (namespace, name)
#: events about unknown objects kept for later attribution
MAX_ORPHANS = 5000
TRAINJOB_NAME = "trainer.kubeflow.org/trainjob-name"


def _labels(obj: Any) -> Mapping[str, Any]:
    labels = dig(obj, "metadata", "labels")
    return labels if isinstance(labels, Mapping) else {}


def _ns(obj: Any) -> str:
    return text_of(dig(obj, "metadata", "namespace"))


def _name(obj: Any) -> str:
    return text_of(dig(obj, "metadata", "name"))


#: the claim of orphan Events about Nodes: looked at whenever a TrainJob is new
ANY_NODE = "node:*"


def _by_name(namespace: str, name: str) -> str:
    return f"name:{namespace}/{name}"


def _prefixes(name: str, prefix: str = "") -> list[str]:
    """Every TrainJob name ``name`` could start with (``<trainjob>-...`` after ``prefix``)."""
    if not name.startswith(prefix):
        return []
    rest = name[len(prefix) :]
    return [rest[:i] for i, c in enumerate(rest) if c == "-" and i > 0]


def _claims(kind: str, obj: Mapping[str, Any]) -> frozenset[str]:
    """What an orphan could belong to: ``name:<ns>/<trainjob>`` for each TrainJob name it
    names or starts with, ``uid:<uid>`` for a TrainJob uid it names, ``ANY_NODE`` for an Event
    about a Node (the ways ``Attribution.assign`` attributes it)."""
    namespace, name = _ns(obj), _name(obj)
    names: set[str] = set()
    uids: set[str] = set()
    owners = [
        text_of(dig(o, "name"))
        for o in as_list(dig(obj, "metadata", "ownerReferences")) or []
        if dig(o, "kind") == "TrainJob"
    ]
    if kind == "JobSet":
        names.add(name)
    elif kind in ("Job", "Pod"):
        labels = _labels(obj)
        names.update(text_of(labels.get(key)) for key in (JOBSET_NAME, TRAINJOB_NAME))
    elif kind == "Workload":
        uids.add(text_of(_labels(obj).get(WORKLOAD_JOB_UID)))
        names.update(owners)
    elif kind == "PodGroup":
        names.update((*owners, name))
    elif kind == "Event":
        subject = event_subject(obj)
        if subject is not None:
            about = dig(obj, "involvedObject") or dig(obj, "regarding")
            namespace = text_of(dig(about, "namespace")) or namespace
            what, called = subject
            if what == "Node":
                return frozenset({ANY_NODE})
            if what in ("TrainJob", "JobSet"):
                names.add(called)
            elif what in ("Job", "Pod"):
                names.update(_prefixes(called))
            elif what == "Workload":
                names.update(_prefixes(called, "trainjob-"))
    claims = {_by_name(namespace, n) for n in names if n}
    claims.update(f"uid:{u}" for u in uids if u)
    return frozenset(claims)


class Attribution:
    """The index from objects to the TrainJobs they are evidence for."""

    def __init__(self) -> None:
        self.trainjobs: dict[TrainJobRef, str] = {}  # -> uid ("" when not known)
        self._by_uid: dict[str, TrainJobRef] = {}
        self._owned: dict[tuple[str, str, str], TrainJobRef] = {}  # (kind, ns, name) -> tj
        self._learnt: dict[TrainJobRef, set[tuple[str, str, str]]] = {}  # tj -> its _owned
        self._pods_on: dict[str, set[TrainJobRef]] = {}  # node -> trainjobs
        self._orphans: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        #: orphans by what they could belong to (``_claims``), and each orphan's claims
        self._claimed_by: dict[str, set[str]] = {}
        self._claims_of: dict[str, frozenset[str]] = {}
        #: the last ``assign`` learnt a TrainJob not known before (then ``adopt_orphans``)
        self.new_trainjob = False
        self._new: TrainJobRef | None = None

    # --- learning ---------------------------------------------------------------------------

    def _remember(self, kind: str, namespace: str, name: str, owner: TrainJobRef) -> None:
        self._owned[(kind, namespace, name)] = owner
        self._learnt.setdefault(owner, set()).add((kind, namespace, name))

    def _prefixed(self, namespace: str, name: str, prefix: str = "") -> TrainJobRef | None:
        """The known TrainJob whose name (after ``prefix``) starts ``name`` followed by a
        ``-``, the longest such name first."""
        if not name.startswith(prefix):
            return None
        end = len(name)
        while (end := name.rfind("-", len(prefix), end)) > len(prefix):
            ref = (namespace, name[len(prefix) : end])
            if ref in self.trainjobs:
                return ref
        return None

    def assign(self, obj: Mapping[str, Any]) -> list[TrainJobRef]:
        """The TrainJobs ``obj`` is evidence for (empty when none is known yet)."""
        kind, namespace, name = object_kind(obj), _ns(obj), _name(obj)
        self.new_trainjob = False
        if not name:
            return []
        if kind == "TrainJob":
            ref = (namespace, name)
            self.new_trainjob = ref not in self.trainjobs
            self._new = ref if self.new_trainjob else None
            uid = text_of(dig(obj, "metadata", "uid"))
            self.trainjobs[ref] = uid or self.trainjobs.get(ref, "")
            if uid:
                self._by_uid[uid] = ref
            return [ref]
        if kind == "JobSet":
            ref = (namespace, name)
            return [ref] if ref in self.trainjobs else []
        if kind in ("Job", "Pod"):
            return self._job_or_pod(kind, namespace, name, obj)
        if kind == "Workload":
            return self._workload(namespace, name, obj)
        if kind == "PodGroup":
            return self._pod_group(namespace, name, obj)
        if kind == "Event":
            return self._event(obj)
        if kind == "Node":
            return sorted(self._pods_on.get(name, ()))
        return []

    def _job_or_pod(
        self, kind: str, namespace: str, name: str, obj: Mapping[str, Any]
    ) -> list[TrainJobRef]:
        labels = _labels(obj)
        for key in (JOBSET_NAME, TRAINJOB_NAME):
            owner = text_of(labels.get(key))
            if owner and (namespace, owner) in self.trainjobs:
                ref = (namespace, owner)
                self._remember(kind, namespace, name, ref)
                node = text_of(dig(obj, "spec", "nodeName"))
                if kind == "Pod" and node:
                    self._pods_on.setdefault(node, set()).add(ref)
                return [ref]
        return []

    def _workload(self, namespace: str, name: str, obj: Mapping[str, Any]) -> list[TrainJobRef]:
        ref = self._by_uid.get(text_of(_labels(obj).get(WORKLOAD_JOB_UID)))
        if ref is None:
            for owner in as_list(dig(obj, "metadata", "ownerReferences")) or []:
                candidate = (namespace, text_of(dig(owner, "name")))
                if dig(owner, "kind") == "TrainJob" and candidate in self.trainjobs:
                    ref = candidate
        if ref is None:
            return []
        self._remember("Workload", namespace, name, ref)
        return [ref]

    def _pod_group(self, namespace: str, name: str, obj: Mapping[str, Any]) -> list[TrainJobRef]:
        ref: TrainJobRef | None = None
        for owner in as_list(dig(obj, "metadata", "ownerReferences")) or []:
            candidate = (namespace, text_of(dig(owner, "name")))
            if dig(owner, "kind") == "TrainJob" and candidate in self.trainjobs:
                ref = candidate
        if ref is None and (namespace, name) in self.trainjobs:
            ref = (namespace, name)
        if ref is None:
            return []
        self._remember("PodGroup", namespace, name, ref)
        return [ref]

    def _event(self, event: Mapping[str, Any]) -> list[TrainJobRef]:
        subject = event_subject(event)
        found: list[TrainJobRef] = []
        if subject is not None:
            kind, name = subject
            about = dig(event, "involvedObject") or dig(event, "regarding")
            namespace = text_of(dig(about, "namespace")) or _ns(event)
            if kind in ("TrainJob", "JobSet"):
                if (namespace, name) in self.trainjobs:
                    found = [(namespace, name)]
            elif kind == "Node":
                found = sorted(self._pods_on.get(name, ()))
            else:
                known = self._owned.get((kind, namespace, name))
                if known is None and kind in ("Job", "Pod"):
                    known = self._prefixed(namespace, name)
                if known is None and kind == "Workload":
                    known = self._prefixed(namespace, name, "trainjob-")
                found = [known] if known is not None else []
        return found

    def keep_orphan(self, obj: Mapping[str, Any]) -> None:
        """Keep an object no TrainJob claims yet (its latest state; the oldest go first)."""
        kind = object_kind(obj)
        if kind in ("Node", "TrainJob"):
            return
        key = f"{kind}/{_ns(obj)}/{_name(obj)}"
        self._drop_orphan(key)
        self._orphans[key] = obj
        claims = _claims(kind, obj)
        self._claims_of[key] = claims
        for claim in claims:
            self._claimed_by.setdefault(claim, set()).add(key)
        while len(self._orphans) > MAX_ORPHANS:
            self._drop_orphan(next(iter(self._orphans)))

    def _drop_orphan(self, key: str) -> None:
        self._orphans.pop(key, None)
        for claim in self._claims_of.pop(key, frozenset()):
            keys = self._claimed_by.get(claim)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._claimed_by[claim]

    def adopt_orphans(self) -> list[tuple[TrainJobRef, Mapping[str, Any]]]:
        """Kept objects that can now be attributed to the TrainJob the last ``assign`` learnt
        (each handed out once), oldest first; Events about Nodes are looked at again too, after
        the rest (a node is known by the pods on it, learnt since)."""
        ref, self._new = self._new, None
        if ref is None:
            return []
        uid = self.trainjobs.get(ref, "")
        wanted = (_by_name(*ref), ANY_NODE, *((f"uid:{uid}",) if uid else ()))
        keys = set().union(*(self._claimed_by.get(claim, set()) for claim in wanted))
        adopted: list[tuple[TrainJobRef, Mapping[str, Any]]] = []
        # oldest first; Events about Nodes last, so that the pods adopted now place them
        ordered = [k for k in self._orphans if k in keys] if keys else []
        ordered.sort(key=lambda k: ANY_NODE in self._claims_of.get(k, ()))
        for key in ordered:
            obj = self._orphans[key]
            refs = self.assign(obj)
            if refs:
                self._drop_orphan(key)
                adopted.extend((found, obj) for found in refs)
        return adopted

    # --- queries ----------------------------------------------------------------------------

    def nodes_of(self, ref: TrainJobRef) -> list[str]:
        return sorted(node for node, refs in self._pods_on.items() if ref in refs)

    def forget(self, ref: TrainJobRef) -> None:
        """Drop what was learnt about a TrainJob no longer followed."""
        uid = self.trainjobs.pop(ref, "")
        if uid and self._by_uid.get(uid) == ref:
            del self._by_uid[uid]
        for key in self._learnt.pop(ref, set()):
            if self._owned.get(key) == ref:
                del self._owned[key]
        for node in [n for n, refs in self._pods_on.items() if ref in refs]:
            self._pods_on[node].discard(ref)
            if not self._pods_on[node]:
                del self._pods_on[node]
