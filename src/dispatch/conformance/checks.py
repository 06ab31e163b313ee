"""The checks every adapter must pass, as plain async functions of an ``AdapterFixture``.

Each raises ``ConformanceFailure`` when the adapter breaks the contract of
``dispatch.adapters.base`` and ``Skip`` when a check does not apply (an optional part the
adapter does not have, or something the fixture does not describe), with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.base import (
    Adapter,
    EvidenceSeeder,
    HeldStarter,
    Holder,
    IdentityWeakener,
    OutputReader,
)
from dispatch.conformance.fixture import AdapterFixture, ConformanceFailure, Skip, require
from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    NotFound,
    Observation,
    State,
    Unsupported,
)

#: what the suite names itself as when it cancels
ACTOR, REASON = "conformance", "checking cancel"


@dataclass(frozen=True, slots=True)
class Check:
    """One conformance check: a name, the promise it checks, and the check itself."""

    name: str
    promise: str
    run: Callable[[AdapterFixture], Coroutine[Any, Any, None]]


def _same_attempt(a: AttemptHandle, b: AttemptHandle) -> bool:
    return (a.job_id, a.attempt, a.cluster, a.native) == (b.job_id, b.attempt, b.cluster, b.native)


def _another(fx: AdapterFixture, handle: AttemptHandle, seen: Observation) -> Adapter:
    """A new instance of the adapter, as another process makes it; one that takes recorded
    evidence back (``EvidenceSeeder``) is handed what was seen of the attempt, as the
    supervisor hands it what its records kept, since the cluster may have deleted it since."""
    adapter = fx.make_adapter()
    if isinstance(adapter, EvidenceSeeder):
        adapter.seed_evidence(handle, _recorded(seen))
    return adapter


def _recorded(seen: Observation) -> list[Evidence]:
    """What the supervisor's records keep of an observation: its evidence and its outcome's."""
    return [*seen.evidence, *seen.outcome.evidence]


async def _started(fx: AdapterFixture, adapter: Adapter, label: str) -> AttemptHandle:
    return await adapter.start(fx.job(fx.runs_long, label), 1)


async def _stop(adapter: Adapter, handle: AttemptHandle) -> None:
    """Clean up after a check (a failure here is not the check's business)."""
    with contextlib.suppress(Exception):
        await adapter.cancel(handle, ACTOR, "conformance clean-up")


# --- capabilities and plan ------------------------------------------------------------------


async def capabilities(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    report = await adapter.capabilities()
    require(report.cluster == adapter.cluster.name, f"report names cluster {report.cluster!r}")
    require(report.adapter == adapter.kind, f"report names adapter {report.adapter!r}")
    require(bool(report.answers), "capabilities() answers nothing")
    for answer in report.answers:
        require(bool(answer.reason), f"capability {answer.name!r} has no reason")
    require(not report.refusals, f"refusals without a spec: {report.refusals}")
    again = await adapter.capabilities()
    require(again.answers == report.answers, "a second call answers differently")
    for spec in (fx.succeeds, fx.fails, fx.runs_long):
        refused = (await adapter.capabilities(spec)).refusals
        require(not refused, f"the fixture's spec {spec.name!r} is refused: {refused}")


async def plan_creates_nothing(fx: AdapterFixture) -> None:
    if fx.footprint is None:
        raise Skip("the fixture gives no footprint of the scheduler to compare")
    adapter, before = fx.make_adapter(), fx.footprint()
    job = fx.job(fx.succeeds, "plan")
    plan = await adapter.plan(job, 1)
    require(plan.identity.job_id == job.id, "the plan's identity names another job")
    require(plan.identity.attempt == 1, "the plan's identity names another attempt")
    require(plan.adapter == adapter.kind, f"the plan names adapter {plan.adapter!r}")
    require(bool(plan.artifacts), "the plan shows nothing that start would create")
    await adapter.capabilities(job.spec)
    require(fx.footprint() == before, "plan() or capabilities() created something")


async def refusal(fx: AdapterFixture) -> None:
    if fx.refused is None:
        raise Skip("the fixture gives no spec this cluster refuses")
    adapter = fx.make_adapter()
    report = await adapter.capabilities(fx.refused)
    require(bool(report.refusals), "capabilities(spec) finds nothing to refuse")
    before = fx.footprint() if fx.footprint is not None else None
    try:
        await adapter.start(fx.job(fx.refused, "refused"), 1)
    except Unsupported as exc:
        require(
            set(exc.rules) >= {r.rule for r in report.refusals},
            f"start refused with {exc.rules}, capabilities said {report.refusals}",
        )
    else:
        raise AssertionError("start() accepted a spec that capabilities() refuses")
    if fx.footprint is not None:
        require(fx.footprint() == before, "a refused start left something behind")


# --- start, observe -------------------------------------------------------------------------


async def start_is_idempotent(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    job = fx.job(fx.succeeds, "idem")
    first = await adapter.start(job, 1)
    require((first.job_id, first.attempt) == (job.id, 1), f"handle {first} names another attempt")
    require(first.cluster == adapter.cluster.name, f"handle names cluster {first.cluster!r}")
    after_first = fx.footprint() if fx.footprint is not None else None
    again = await adapter.start(job, 1)
    other = await fx.make_adapter().start(job, 1)  # as another process would
    require(_same_attempt(first, again), f"a second start returned {again}, not {first}")
    require(_same_attempt(first, other), f"start from a new instance returned {other}")
    if fx.footprint is not None:
        require(fx.footprint() == after_first, "a repeated start created something more")
    end = await fx.wait_end(adapter, first)
    require(end.state is State.SUCCEEDED, f"the quick job ended {end.state.value}")
    require(end.outcome.cause is None, f"a success with cause {end.outcome.cause}")
    late = await adapter.start(job, 1)
    require(_same_attempt(first, late), "start after the end did not adopt the ended attempt")
    require((await adapter.observe(late)).state is State.SUCCEEDED, "it ran again")


async def failure_has_cause(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    handle = await adapter.start(fx.job(fx.fails, "fails"), 1)
    end = await fx.wait_end(adapter, handle)
    outcome = end.outcome
    require(end.state is State.FAILED, f"the failing job ended {end.state.value}")
    require(outcome.cause is Cause.APP_ERROR, f"cause {outcome.cause}, not app_error")
    failure = outcome.first_failure
    require(failure is not None, "an app_error without firstFailure")
    if failure is not None:
        require(bool(failure.exit_code), f"firstFailure has exit code {failure.exit_code}")
    require(bool(outcome.summary), "a failure without a summary")


async def observe_is_stable(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    handle = await adapter.start(fx.job(fx.fails, "stable"), 1)
    end = await fx.wait_end(adapter, handle)
    for viewer in (adapter, _another(fx, handle, end)):
        seen = await viewer.observe(handle)
        require(
            (seen.state, seen.outcome.cause) == (end.state, end.outcome.cause),
            f"observed {seen.state.value}/{seen.outcome.cause} after {end.state.value}",
        )
        require(seen.handle.job_id == handle.job_id, "an observation of another attempt")


async def unknown_attempt_is_gone(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    ghost = fx.job(fx.succeeds, "ghost")
    handle = AttemptHandle(ghost.id, 1, adapter.cluster.name, f"{ghost.id}-never-started")
    seen = await adapter.observe(handle)
    require(seen.gone, f"an attempt never started is not gone: {seen.state.value}")
    require(seen.state is State.FAILED, f"a gone attempt is {seen.state.value}, not failed")
    require(seen.outcome.cause is Cause.UNKNOWN, f"a gone attempt has cause {seen.outcome.cause}")
    await adapter.cancel(handle, ACTOR, REASON)  # cancelling the unknown is not an error


async def watch_agrees_with_observe(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    quick = await adapter.start(fx.job(fx.succeeds, "watch"), 1)
    slow = await _started(fx, adapter, "watch-long")
    seen: dict[str, Observation] = {}
    stream = adapter.watch([quick, slow])

    async def consume() -> None:
        async for observation in stream:
            seen[observation.handle.job_id] = observation
            if len(seen) == 2 and seen[quick.job_id].outcome.is_terminal:
                return

    try:
        await asyncio.wait_for(consume(), timeout=fx.real_timeout)
    except TimeoutError:
        states = {k: v.state.value for k, v in seen.items()}
        raise AssertionError(f"watch did not report both attempts and the end: {states}") from None
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
        await _stop(adapter, slow)
    observed = await adapter.observe(quick)
    watched = seen[quick.job_id]
    require(
        (watched.state, watched.outcome.cause) == (observed.state, observed.outcome.cause),
        f"watch says {watched.state.value}, observe says {observed.state.value}",
    )


# --- cancel ---------------------------------------------------------------------------------


async def cancel_stops_and_names_the_actor(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    handle = await _started(fx, adapter, "cancel")
    await fx.wait_for(adapter, handle, lambda o: o.state is State.RUNNING, "running")
    await adapter.cancel(handle, ACTOR, REASON)
    end = await fx.wait_end(adapter, handle)
    require(end.state is State.CANCELLED, f"a cancelled attempt ended {end.state.value}")
    require(end.outcome.cause is Cause.CANCELLED, f"cause {end.outcome.cause}")
    said = " ".join(
        [end.outcome.summary, *(e.summary for e in (*end.evidence, *end.outcome.evidence))]
    )
    require(ACTOR in said, f"the outcome does not name who cancelled: {end.outcome.summary!r}")
    await adapter.cancel(handle, ACTOR, REASON)  # idempotent
    again = await _another(fx, handle, end).observe(handle)
    require(again.state is State.CANCELLED, f"after a second cancel: {again.state.value}")


async def cancel_after_the_end_changes_nothing(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    handle = await adapter.start(fx.job(fx.succeeds, "late-cancel"), 1)
    await fx.wait_end(adapter, handle)
    await adapter.cancel(handle, ACTOR, REASON)
    seen = await adapter.observe(handle)
    require(seen.state is State.SUCCEEDED, f"cancel after success made it {seen.state.value}")


# --- optional parts -------------------------------------------------------------------------


async def output_reader(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    if not isinstance(adapter, OutputReader):
        raise Skip(f"{adapter.kind} has no OutputReader (read_output)")
    handle = await adapter.start(fx.job(fx.succeeds, "output"), 1)
    await fx.wait_end(adapter, handle)
    lines = [line async for line in adapter.read_output(handle)]
    require(bool(lines), "read_output of an ended attempt yields nothing")
    require(all("\n" not in line for line in lines), "lines keep their newline")
    ranks = [line async for line in adapter.read_output(handle, rank=0)]
    require(bool(ranks), "read_output(rank=0) yields nothing")
    try:
        async for _ in adapter.read_output(handle, rank=10_000):
            break
    except NotFound:
        return
    raise AssertionError("read_output of a rank the attempt does not have is not NotFound")


async def holder(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    if not isinstance(adapter, Holder):
        raise Skip(f"{adapter.kind} has no Holder (hold/release)")
    handle = await _started(fx, adapter, "hold")
    try:
        await fx.wait_for(adapter, handle, lambda o: o.state is State.RUNNING, "running")
        try:
            await adapter.hold(handle)
        except Unsupported as exc:
            require("hold-running" in exc.rules, f"hold of a running attempt: {exc.rules}")
        else:
            raise AssertionError("hold of a running attempt was not refused (hold-running)")
        await adapter.release(handle)  # idempotent: nothing is held
        seen = await adapter.observe(handle)
        require(seen.state is State.RUNNING, f"after release: {seen.state.value}")
    finally:
        await _stop(adapter, handle)
    await fx.wait_end(adapter, handle)
    await adapter.hold(handle)  # an ended attempt: idempotent, no error


async def held_starter(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    if not isinstance(adapter, HeldStarter):
        raise Skip(f"{adapter.kind} has no HeldStarter: it cannot create an attempt held")
    job = fx.job(fx.succeeds, "held")
    plan = await adapter.plan(job, 1, held=True)
    require(plan.accepted, f"the held plan is refused: {plan.capabilities.refusals}")
    handle = await adapter.start(job, 1, held=True)
    try:
        second = fx.make_adapter()
        if not isinstance(second, HeldStarter):
            raise ConformanceFailure("a second instance of the adapter is not a HeldStarter")
        again = await second.start(job, 1, held=True)
        require(_same_attempt(handle, again), "a second held start did not adopt the first")
        waited = 0.0
        while waited < fx.patience / 4:  # long enough for a started attempt to run or end
            seen = await adapter.observe(handle)
            require(
                seen.state in (State.HELD, State.QUEUED),
                f"a held attempt is {seen.state.value}, not held or queued",
            )
            await fx.advance(fx.poll)
            waited += fx.poll
    finally:
        await _stop(adapter, handle)
    end = await fx.wait_end(adapter, handle)
    require(end.state is State.CANCELLED, f"a cancelled held attempt ended {end.state.value}")


async def evidence_seeder(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    if not isinstance(adapter, EvidenceSeeder):
        raise Skip(f"{adapter.kind} has no EvidenceSeeder: it needs no recorded evidence back")
    handle = await adapter.start(fx.job(fx.fails, "seed"), 1)
    ended = await fx.wait_end(adapter, handle)
    fresh = fx.make_adapter()
    if not isinstance(fresh, EvidenceSeeder):
        raise ConformanceFailure("a second instance of the adapter is not an EvidenceSeeder")
    fresh.seed_evidence(handle, _recorded(ended))
    fresh.seed_evidence(handle, _recorded(ended))  # idempotent
    seen = await fresh.observe(handle)
    require(
        (seen.state, seen.outcome.cause) == (ended.state, ended.outcome.cause),
        f"seeded, the attempt reads {seen.state.value}/{seen.outcome.cause}, "
        f"not {ended.state.value}/{ended.outcome.cause}",
    )


async def identity_weakener(fx: AdapterFixture) -> None:
    adapter = fx.make_adapter()
    if not isinstance(adapter, IdentityWeakener):
        raise Skip(f"{adapter.kind} has no IdentityWeakener: ranks never re-run in an attempt")
    for spec in (fx.succeeds, fx.runs_long):
        reason = adapter.weakened_identity(spec)
        require(reason is None or bool(reason.strip()), "a weakened identity without a reason")


CHECKS: tuple[Check, ...] = (
    Check("capabilities", "answers with reasons, cached, no refusal of the fixture", capabilities),
    Check("plan_creates_nothing", "plan and capabilities create nothing", plan_creates_nothing),
    Check("refusal", "start refuses what capabilities refuses, leaving nothing", refusal),
    Check("start_is_idempotent", "start twice (any instance) adopts", start_is_idempotent),
    Check("failure_has_cause", "an app failure is app_error with firstFailure", failure_has_cause),
    Check(
        "observe_is_stable", "an ended attempt reads the same from any instance", observe_is_stable
    ),
    Check("unknown_attempt_is_gone", "an unknown attempt is gone", unknown_attempt_is_gone),
    Check(
        "watch_agrees_with_observe", "watch reports what observe sees", watch_agrees_with_observe
    ),
    Check(
        "cancel", "cancel stops, names the actor, is idempotent", cancel_stops_and_names_the_actor
    ),
    Check(
        "cancel_after_end",
        "cancel after the end changes nothing",
        cancel_after_the_end_changes_nothing,
    ),
    Check("output_reader", "optional: per-rank output, NotFound for unknown ranks", output_reader),
    Check("holder", "optional: hold refuses running attempts; idempotent", holder),
    Check("held_starter", "optional: a held start runs nothing until released", held_starter),
    Check("evidence_seeder", "optional: seeded evidence reads the same end", evidence_seeder),
    Check("identity_weakener", "optional: a weakened identity has a reason", identity_weakener),
)
