"""Scenarios as data: how each pod behaves (by replicated job, rank and attempt) and cluster
events on a timeline. All times are emulated seconds (scale them with ``time_scale``).

A scenario is built in Python or read from YAML/JSON (camelCase keys)::

    pods:
      - {index: 1, attempt: 1, runFor: 5, exitCode: 3}     # rank 1 exits 3 at t=5s, once
      - {index: 0, oomKilled: true}
      - {replicatedJob: node, imagePullError: true}
      - {index: 2, initExitCode: 1}                        # its first init container fails
    default: {startAfter: 1, runFor: 10}
    events:
      - {at: 30, action: nodeNotReady, node: node-1}
      - {at: 40, action: preemptPod, pod: myjob-node-0-0-abcde}
      - {at: 50, action: drainNode, node: node-2}          # or evictPod, shutdownNode

A pod can also carry its own scenario: a container env var ``EMULATOR_SCENARIO`` holding the
same YAML/JSON (only ``pods`` and ``default`` are read from it), so a test of the Kubeflow
adapter can ask for "rank 1 exits 3 at t=5s" through the job spec's ``env``.

``attempt`` counts the runs of one rank within one JobSet (or bare Job), 1-based: container
restarts in place and replacement pods both start a new attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

ENV_VAR = "EMULATOR_SCENARIO"


@dataclass(frozen=True)
class PodBehaviour:
    start_after: float = 1.0  # from binding to Running
    run_for: float | None = 5.0  # Running to exit; None = runs until deleted
    exit_code: int = 0
    oom_killed: bool = False  # exit 137, reason OOMKilled
    image_pull_error: bool = False  # waiting ErrImagePull, then ImagePullBackOff; never runs
    init_exit_code: int = 0  # the first init container exits with it; the main ones never run
    logs: tuple[str, ...] = ()  # lines written once Running

    @property
    def failed(self) -> bool:
        return self.oom_killed or self.exit_code != 0


@dataclass(frozen=True)
class PodRule:
    """Behaviour for the pods it matches (None matches anything)."""

    behaviour: PodBehaviour
    replicated_job: str | None = None
    index: int | None = None
    attempt: int | None = None
    namespace: str | None = None
    jobset: str | None = None

    def matches(self, pod: PodFacts) -> bool:
        return (
            (self.replicated_job is None or self.replicated_job == pod.replicated_job)
            and (self.index is None or self.index == pod.index)
            and (self.attempt is None or self.attempt == pod.attempt)
            and (self.namespace is None or self.namespace == pod.namespace)
            and (self.jobset is None or self.jobset == pod.jobset)
        )


@dataclass(frozen=True)
class PodFacts:
    namespace: str
    jobset: str
    replicated_job: str
    index: int
    attempt: int


@dataclass(frozen=True)
class ClusterEvent:
    """At emulated second ``at`` (from cluster start): ``nodeNotReady``, ``nodeReady``,
    ``deleteNode``, ``addNode``, ``drainNode``, ``shutdownNode`` (a ``node``), ``preemptPod``,
    ``evictPod``, ``pressureEvictPod`` (a ``pod`` name or ``pod_selector`` labels, in
    ``namespace``)."""

    at: float
    action: str
    node: str | None = None
    pod: str | None = None
    namespace: str = "default"
    pod_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    pods: tuple[PodRule, ...] = ()
    default: PodBehaviour = PodBehaviour()
    events: tuple[ClusterEvent, ...] = ()

    def behaviour(self, pod: PodFacts) -> PodBehaviour:
        return next((r.behaviour for r in self.pods if r.matches(pod)), self.default)

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Scenario:
        data = data or {}
        rules = tuple(_rule(item) for item in data.get("pods") or [])
        events = tuple(_event(item) for item in data.get("events") or [])
        return cls(rules, _behaviour(data.get("default") or {}), events)

    @classmethod
    def from_text(cls, text: str) -> Scenario:
        """YAML or JSON text; raises ``ValueError`` for anything but a mapping."""
        data = yaml.safe_load(text) if text.strip() else {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{ENV_VAR} must be a mapping, got {type(data).__name__}")
        return cls.from_data(data)


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


_ALIASES = {"oomkilled": "oom_killed", "oom": "oom_killed"}


def _kwargs(data: Mapping[str, Any], names: set[str]) -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        name = _ALIASES.get(key.lower(), _snake(key))
        if name not in names:
            raise ValueError(f"unknown scenario key {key!r}")
        out[name] = value
    return out


def _behaviour(data: Mapping[str, Any]) -> PodBehaviour:
    kw = _kwargs(data, {f.name for f in fields(PodBehaviour)})
    if "logs" in kw:
        kw["logs"] = tuple(str(line) for line in kw["logs"])
    return PodBehaviour(**kw)


def _rule(data: Mapping[str, Any]) -> PodRule:
    match_keys = {"replicated_job", "index", "attempt", "namespace", "jobset"}
    kw = _kwargs(data, match_keys | {f.name for f in fields(PodBehaviour)})
    match = {k: kw.pop(k) for k in list(kw) if k in match_keys}
    return PodRule(
        _behaviour({k: v for k, v in data.items() if _snake(k) in kw or k.lower() in _ALIASES}),
        **match,
    )


def _event(data: Mapping[str, Any]) -> ClusterEvent:
    kw = _kwargs(data, {f.name for f in fields(ClusterEvent)})
    return ClusterEvent(**kw)
