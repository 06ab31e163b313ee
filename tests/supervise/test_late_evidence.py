"""Evidence an adapter finds about attempts already over (``LateEvidence``): recorded to those
attempts under the job's lease, never changing their outcome; skipped for jobs the store does
not hold; kept for later while another supervisor holds the job."""

from __future__ import annotations

from pathlib import Path

from dispatch.adapters.base import Adapter, AdapterContext, LateEvidence
from dispatch.adapters.memory import MemoryAdapter
from dispatch.model import Cause, Evidence, State
from dispatch.supervise import Supervisor
from tests.supervise.world import World, run


class Reporting(MemoryAdapter):
    """The memory adapter, with evidence found late queued by the test."""

    found: list[tuple[str, int, tuple[Evidence, ...]]]

    def late_evidence(self) -> list[tuple[str, int, tuple[Evidence, ...]]]:
        taken, self.found = self.found, []
        return taken


def _refusal(key: str) -> Evidence:
    return Evidence(kind="guard", key=key, observed_at=0.0, summary="resume refused", data={})


def _supervisor(world: World, adapter: Reporting, owner: str = "s1") -> Supervisor:
    def adapters(cluster: str) -> Adapter:
        return adapter

    return Supervisor(world.store, adapters, world.clock, owner, lease_ttl=30.0)


def test_late_evidence_joins_an_ended_attempt_without_changing_its_outcome() -> None:
    world = World(evidenceTTL=6)
    adapter = Reporting(
        world.cluster, AdapterContext(Path("."), world.clock), scheduler=world.scheduler
    )
    adapter.found = []
    assert isinstance(adapter, LateEvidence)
    job = world.submit("preempted@30; succeeded@60", image="img")
    supervisor = _supervisor(world, adapter)
    run(supervisor.drive(job))
    first = world.store.attempts(job)[0]
    assert first.outcome is not None and first.outcome.cause is Cause.PREEMPTED
    adapter.found = [
        (job, 1, (_refusal("guard/x/resume-refused/e1"),)),
        ("no-such-job", 1, (_refusal("guard/y/resume-refused/e1"),)),
    ]
    run(supervisor.step())
    keys = {e.key for e in world.store.evidence(job, 1)}
    assert "guard/x/resume-refused/e1" in keys
    again = world.store.attempts(job)[0]
    assert again.outcome is not None and again.outcome.cause is Cause.PREEMPTED
    assert world.store.get_job(job).state is State.SUCCEEDED


def test_late_evidence_waits_while_another_supervisor_holds_the_job() -> None:
    world = World()
    adapter = Reporting(
        world.cluster, AdapterContext(Path("."), world.clock), scheduler=world.scheduler
    )
    adapter.found = []
    job = world.submit("succeeded@600", image="img")
    other = world.store.acquire_lease(job, "s2", 30.0)
    assert other is not None
    supervisor = _supervisor(world, adapter)
    adapter.found = [(job, 1, (_refusal("guard/x/resume-refused/e2"),))]
    run(supervisor.step())
    assert world.store.evidence(job, 1) == [] or all(
        e.key != "guard/x/resume-refused/e2" for e in world.store.evidence(job, 1)
    )
    world.store.release_lease(job, "s2")
    run(supervisor.step())
    assert "guard/x/resume-refused/e2" in {e.key for e in world.store.evidence(job, 1)}
