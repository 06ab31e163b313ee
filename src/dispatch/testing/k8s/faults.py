"""Fault injection: make chosen requests fail, hang, slow down, or cut watch streams.

A :class:`FaultRule` matches requests by verb, resource (``pods``, ``pods/status``,
``trainjobs``...), namespace and name; it fires with ``probability`` (drawn from the
injector's seeded random source, so runs are reproducible) and at most ``times`` times. What
it does: respond ``status`` (500, 503, 429 with ``Retry-After``...), ``hang`` (wait that many
real seconds, then drop the connection without a response), add ``latency`` (real seconds),
or, for watches, end the stream after ``drop_after_seconds`` / ``drop_after_events`` or send a
410 Gone ERROR event at once (``watch_gone``). Rules are evaluated in the order added; the
latency of every matching rule adds up, the first failing action wins.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field


@dataclass
class FaultRule:
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    probability: float = 1.0
    times: int | None = None
    status: int | None = None
    retry_after: int = 1
    message: str = ""
    hang: float | None = None
    latency: float = 0.0
    drop_after_seconds: float | None = None
    drop_after_events: int | None = None
    watch_gone: bool = False
    hits: int = field(default=0, init=False)

    def matches(self, verb: str, resource: str, namespace: str, name: str) -> bool:
        return (
            (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
            and (self.namespace is None or self.namespace == namespace)
            and (self.name is None or self.name == name)
            and (self.times is None or self.hits < self.times)
        )


@dataclass
class FaultDecision:
    latency: float = 0.0
    status: int | None = None
    retry_after: int = 1
    message: str = ""
    hang: float | None = None
    drop_after_seconds: float | None = None
    drop_after_events: int | None = None
    watch_gone: bool = False

    @property
    def fails(self) -> bool:
        return self.status is not None or self.hang is not None or self.watch_gone


class FaultInjector:
    def __init__(self, seed: int | None = 0) -> None:
        self._rng = random.Random(seed)
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def decide(self, verb: str, resource: str, namespace: str, name: str) -> FaultDecision:
        decision = FaultDecision()
        with self._lock:
            for rule in self._rules:
                if not rule.matches(verb, resource, namespace, name):
                    continue
                if self._rng.random() >= rule.probability:
                    continue
                rule.hits += 1
                decision.latency += rule.latency
                if decision.fails:
                    continue
                decision.status = rule.status
                decision.retry_after = rule.retry_after
                decision.message = rule.message
                decision.hang = rule.hang
                decision.watch_gone = rule.watch_gone
                decision.drop_after_seconds = decision.drop_after_seconds or rule.drop_after_seconds
                decision.drop_after_events = decision.drop_after_events or rule.drop_after_events
        return decision
