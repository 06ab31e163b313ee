"""API faults during ``start``: transient errors, unknown outcomes, and a retried start adopting."""

from __future__ import annotations

import pytest

from dispatch.model import OutcomeUnknown, SchedulerUnavailable, Unsupported
from dispatch.testing.k8s import Emulator, FaultRule

from .conftest import AdapterFactory, example_spec, job_of, names, run, start_drained, stored


def test_a_500_on_creating_the_trainjob_is_unknown_and_a_retry_adopts_the_copy(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    emulator.faults.add(FaultRule(verb="create", resource="trainjobs", status=500, times=1))
    with pytest.raises(OutcomeUnknown):
        run(make_adapter().start(job, 1))
    assert names(emulator, "TrainingRuntime") == [f"{job.id}-1"]  # left for the retry
    assert stored(emulator, "TrainJob") == []
    handle = run(start_drained(make_adapter(), job, 1))
    [trainjob] = stored(emulator, "TrainJob")
    [copy] = stored(emulator, "TrainingRuntime")
    assert copy["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
    assert handle.data["uid"] == trainjob["metadata"]["uid"]


def test_a_429_is_waited_out_and_the_start_creates_each_object_once(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    emulator.faults.add(
        FaultRule(verb="create", resource="trainingruntimes", status=429, retry_after=1, times=1)
    )
    adapter = make_adapter()
    run(adapter.start(job, 1))
    assert len(stored(emulator, "TrainingRuntime")) == len(stored(emulator, "TrainJob")) == 1
    # the throttled create was sent again after the server's Retry-After, and only once
    assert emulator.requests().count("create", "trainingruntimes") == 2
    assert adapter.connection.throttle.stats.throttled == 1


def test_a_429_that_lasts_is_a_transient_error_with_the_delay_and_creates_nothing(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    rule = FaultRule(verb="create", resource="trainingruntimes", status=429, retry_after=0)
    emulator.faults.add(rule)
    with pytest.raises(SchedulerUnavailable) as throttled:
        run(make_adapter().start(job, 1))
    assert throttled.value.delay == 0
    assert stored(emulator, "TrainingRuntime") == stored(emulator, "TrainJob") == []
    rule.times = rule.hits  # the server is no longer overloaded
    run(make_adapter().start(job, 1))
    assert len(stored(emulator, "TrainJob")) == 1


def test_a_hanging_create_times_out_as_unknown(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    emulator.faults.add(FaultRule(verb="create", resource="trainjobs", hang=5, times=1))
    with pytest.raises(OutcomeUnknown):
        run(make_adapter(request_timeout=1.0).start(job, 1))
    run(make_adapter().start(job, 1))
    assert len(stored(emulator, "TrainJob")) == len(stored(emulator, "TrainingRuntime")) == 1


def test_a_trainjob_the_server_rejects_removes_the_copy(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    emulator.faults.add(
        FaultRule(verb="create", resource="trainjobs", status=422, message="denied by a webhook")
    )
    with pytest.raises(Unsupported) as refused:
        run(make_adapter().start(job, 1))
    assert refused.value.rules == ("api-rejected",)
    assert stored(emulator, "TrainingRuntime") == stored(emulator, "TrainJob") == []
