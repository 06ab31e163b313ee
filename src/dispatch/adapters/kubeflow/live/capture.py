"""Evidence capture: the facade over the four parts that follow every attempt of a cluster.

``Capture`` runs one list+watch stream per object kind (and namespace) for the namespaces it
is asked to cover and files every object state it sees, the moment it sees it, as evidence
under the TrainJob it concerns. It is made of four parts, each with its own guarantees (read
their module docstrings), which tests drive through their own public calls:

* ``ledger`` (``ledger.Ledger``): the records per TrainJob, de-duplicated by key, handed out
  by ``take`` and dropped by ``release``/``forget``; memory follows the attempts still open;
* ``streams`` (``streams.Streams``): the list+watch streams, resumed by resourceVersion,
  listing again after a 410, skipping kinds the cluster refuses; ``synced`` once each listed;
* ``catch_up`` (``catchup.CatchUp``): ``position``/``caught_up``, proving quiet streams caught
  up with a list of metadata instead of waiting for them, for the waiting TrainJobs alone
  where the labels allow;
* ``loop_lag`` (``dispatch.aio.LoopLag``): how late the event loop runs, so a busy loop is not taken
  for quiet streams.

``changed`` is set whenever a record is filed, a check ends, or a catch-up wait ends: an
outcome waiting on the streams is judged again at that moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.api.kinds import WatchedKind, watched_kinds
from dispatch.adapters.kubeflow.live.attribution import Attribution, TrainJobRef
from dispatch.adapters.kubeflow.live.catchup import CatchUp
from dispatch.adapters.kubeflow.live.ledger import Ledger
from dispatch.adapters.kubeflow.live.streams import Streams
from dispatch.aio import LoopLag, Sleep
from dispatch.clock import Clock
from dispatch.model import Evidence

__all__ = ["Capture", "Sleep"]


class Capture:
    """The evidence streams of one cluster (see the module docstring)."""

    def __init__(
        self,
        connection: Connection,
        cluster: str,
        clock: Clock,
        *,
        sleep: Sleep = asyncio.sleep,
        kinds: tuple[WatchedKind, ...] | None = None,
    ) -> None:
        self.connection = connection
        self.clock = clock
        self.changed = asyncio.Event()
        self.ledger = Ledger(clock, self.changed, claim=self._claim)
        self.streams = Streams(
            connection,
            clock,
            kinds if kinds is not None else watched_kinds(cluster),
            self.ledger.seen,
            sleep=sleep,
        )
        self.loop_lag = LoopLag()
        self.catch_up = CatchUp(self.streams, self.ledger, self.loop_lag, clock, self.changed)

    def _claim(self, ref: TrainJobRef, obj: Mapping[str, Any]) -> None:
        self.streams.claim(ref, obj)

    # --- the ledger -------------------------------------------------------------------------

    @property
    def attribution(self) -> Attribution:
        return self.ledger.attribution

    def seed(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        """Evidence recorded earlier (e.g. by a previous process) for this TrainJob."""
        self.ledger.seed(ref, records)

    def seen(self, obj: Mapping[str, Any], *, deleted: bool = False) -> list[TrainJobRef]:
        """File one observed object state; the TrainJobs it was filed for."""
        return self.ledger.seen(obj, deleted=deleted)

    def records(self, ref: TrainJobRef) -> list[Evidence]:
        return self.ledger.records(ref)

    def take(self, ref: TrainJobRef) -> tuple[Evidence, ...]:
        return self.ledger.take(ref)

    def give_back(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        self.ledger.give_back(ref, records)

    def fresh_refs(self) -> list[TrainJobRef]:
        return self.ledger.fresh_refs()

    def latest_trainjob(self, ref: TrainJobRef) -> tuple[Mapping[str, Any] | None, bool]:
        return self.ledger.latest_trainjob(ref)

    def final_pods(self, ref: TrainJobRef) -> list[Mapping[str, Any]]:
        """The last state of each pod of ``ref`` when its outcome became final (once)."""
        return self.ledger.final_pods(ref)

    def release(self, ref: TrainJobRef) -> None:
        """The attempt of TrainJob ``ref`` has its final outcome: drop the records and last
        states kept for it alone, and stop waiting on the streams for it."""
        self.ledger.release(ref)
        self.catch_up.stop_waiting(ref)
        self.streams.last.release(ref)

    def forget(self, ref: TrainJobRef) -> None:
        """Drop everything kept for a TrainJob dispatch no longer follows."""
        self.ledger.forget(ref)
        self.catch_up.stop_waiting(ref)

    # --- the streams and catching up --------------------------------------------------------

    @property
    def synced(self) -> asyncio.Event:
        """Set once every stream has made its first list (or was skipped)."""
        return self.streams.synced

    def cover(self, namespaces: Iterable[str]) -> None:
        """Make sure the streams of these namespaces run (Nodes once). Call on the loop that
        will consume the capture; the streams live until ``close``."""
        self.loop_lag.start()
        self.streams.cover(namespaces)

    def position(self, ref: TrainJobRef | None = None) -> int | None:
        return self.catch_up.position(ref)

    def caught_up(
        self, position: int, since: float | None = None, ref: TrainJobRef | None = None
    ) -> bool:
        return self.catch_up.caught_up(position, since, ref)

    async def close(self) -> None:
        """Stop every stream and check, and close the session."""
        await self.catch_up.close()
        await self.streams.close()
        await self.loop_lag.close()
