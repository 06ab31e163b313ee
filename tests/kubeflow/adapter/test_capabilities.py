"""Per-cluster capability probing against the emulated API server (answers with reasons)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.adapters.kubeflow.api.probe import (
    KUEUE_MISSING,
    NAMESPACE,
    PERMISSION,
    TRAINER_API,
    TRAINER_TOO_OLD,
)
from dispatch.model import SchedulerUnavailable, Unsupported
from dispatch.testing.k8s import Emulator, FaultRule
from dispatch.testing.k8s.kubeconfig import write_kubeconfig

from .conftest import AdapterFactory, example_spec, job_of, publish_trainer_version, run, stored


def hide_api_group(emu: Emulator, group: str) -> None:
    """Take ``group`` out of discovery (the emulator has no switch for the APIs it serves)."""
    catalog = emu.cluster.catalog

    def drop() -> None:
        catalog.types[:] = [t for t in catalog.types if t.group != group]

    emu.call(drop)


def test_a_full_cluster_answers_every_capability_with_a_reason(
    make_adapter: AdapterFactory,
) -> None:
    report = run(make_adapter().capabilities())
    assert report.accepted
    answers = {a.name: a for a in report.answers}
    assert answers["TrainerAPI"].supported
    assert "trainjobs" in answers["TrainerAPI"].reason
    assert answers["TrainerVersion"].supported
    assert "2.3.0" in answers["TrainerVersion"].reason
    assert "kubeflow-trainer-public" in answers["TrainerVersion"].reason
    assert answers["JobSet"].supported and "v1alpha2" in answers["JobSet"].reason
    assert answers["Kueue"].supported and "v1beta2" in answers["Kueue"].reason
    assert answers["Namespace"].supported
    access = [a for a in report.answers if a.name.startswith("access:")]
    assert "access:create trainjobs.trainer.kubeflow.org" in answers
    assert "access:watch workloads.kueue.x-k8s.io" in answers
    assert "access:get pods/log" in answers
    assert all(a.supported and a.reason == "allowed" for a in access)
    assert report.probed_at is not None


def test_probing_is_cached_per_adapter(emulator: Emulator, make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    run(adapter.capabilities())
    reviews = emulator.requests().count("create", "selfsubjectaccessreviews")
    assert reviews >= 20
    run(adapter.capabilities(example_spec("torch")))
    assert emulator.requests().count("create", "selfsubjectaccessreviews") == reviews


def test_an_older_trainer_is_refused_with_its_version(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    cluster = emulator.cluster
    rtype = cluster.rtype("v1", "ConfigMap")
    emulator.call(lambda: cluster.store.delete(rtype, "kubeflow-system", "kubeflow-trainer-public"))
    publish_trainer_version(emulator, "v2.1.0")
    adapter = make_adapter()
    spec = example_spec("torch")
    report = run(adapter.capabilities(spec))
    [reason] = [r for r in report.refusals if r.rule == TRAINER_TOO_OLD]
    assert "2.1.0" in reason.message and "older than 2.2" in reason.message
    assert not report.answer("TrainerVersion").supported  # type: ignore[union-attr]
    with pytest.raises(Unsupported):
        run(adapter.start(job_of(spec), 1))
    assert stored(emulator, "TrainJob") == []


def test_an_unknown_trainer_version_is_assumed_and_said(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    cluster = emulator.cluster
    rtype = cluster.rtype("v1", "ConfigMap")
    emulator.call(lambda: cluster.store.delete(rtype, "kubeflow-system", "kubeflow-trainer-public"))
    answer = run(make_adapter().capabilities()).answer("TrainerVersion")
    assert answer is not None and answer.supported
    assert answer.reason.startswith("unknown:")
    assert "assumed >= 2.2" in answer.reason


def test_a_cluster_without_trainer_refuses_every_job(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    hide_api_group(emulator, "trainer.kubeflow.org")
    report = run(make_adapter().capabilities(example_spec("torch")))
    assert TRAINER_API in {r.rule for r in report.refusals}
    assert not report.answer("TrainerAPI").supported  # type: ignore[union-attr]


def test_jobset_and_kueue_absent_are_answered_and_a_queue_is_refused(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    hide_api_group(emulator, "kueue.x-k8s.io")
    hide_api_group(emulator, "jobset.x-k8s.io")
    adapter = make_adapter()
    report = run(adapter.capabilities(example_spec("torch")))
    assert report.accepted  # no queue asked: fine without Kueue
    assert not report.answer("Kueue").supported  # type: ignore[union-attr]
    assert not report.answer("JobSet").supported  # type: ignore[union-attr]
    assert report.answer("access:list workloads.kueue.x-k8s.io") is None  # not asked
    queued = run(adapter.capabilities(example_spec("torch", queue="team-a")))
    [reason] = queued.refusals
    assert reason.rule == KUEUE_MISSING and "team-a" in reason.message


def test_a_denied_verb_is_answered_and_refuses_starting(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    emulator.authorizer.deny("create", "trainjobs")
    emulator.authorizer.deny("watch", "pods")
    adapter = make_adapter()
    spec = example_spec("torch")
    report = run(adapter.capabilities(spec))
    create = report.answer("access:create trainjobs.trainer.kubeflow.org")
    assert create is not None and not create.supported
    assert "denied" in create.reason
    watch = report.answer("access:watch pods")
    assert watch is not None and not watch.supported
    [reason] = report.refusals
    assert reason.rule == PERMISSION
    assert "create trainjobs.trainer.kubeflow.org" in reason.message
    assert "watch pods" not in reason.message  # only what starting needs refuses
    with pytest.raises(Unsupported):
        run(adapter.start(job_of(spec), 1))
    assert stored(emulator, "TrainingRuntime") == []


def test_a_missing_namespace_is_refused(make_adapter: AdapterFactory) -> None:
    report = run(make_adapter(namespace="nowhere").capabilities())
    assert [r.rule for r in report.refusals] == [NAMESPACE]
    assert "'nowhere' does not exist" in report.refusals[0].message


def test_the_namespace_defaults_to_the_kubeconfig_context(
    emulator: Emulator, make_adapter: AdapterFactory, tmp_path: Path
) -> None:
    write_kubeconfig(emulator.kubeconfig, emulator.url, namespace="ml-team")
    adapter = make_adapter(namespace=None)
    assert adapter.namespace == "ml-team"
    write_kubeconfig(emulator.kubeconfig, emulator.url)
    assert make_adapter(namespace=None).namespace == "default"


def test_an_unreachable_api_is_a_transient_error(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    emulator.faults.add(FaultRule(verb="get", resource="clustertrainingruntimes", status=503))
    with pytest.raises(SchedulerUnavailable):
        run(make_adapter().capabilities(example_spec("torch")))


def test_probe_requests_that_fail_once_are_tried_again(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    clean = run(make_adapter().capabilities())  # every request answered
    reviews = emulator.requests().count("create", "selfsubjectaccessreviews")
    # one failure of the namespace read and of three access reviews (of about 26)
    emulator.faults.add(FaultRule(verb="get", resource="namespaces", status=503, times=1))
    emulator.faults.add(
        FaultRule(verb="create", resource="selfsubjectaccessreviews", status=500, times=3)
    )
    report = run(make_adapter().capabilities())
    assert report.accepted and report.answers == clean.answers
    requests = emulator.requests()
    assert requests.count("get", "namespaces") == 1 + 2  # the clean probe's, then two
    assert requests.count("create", "selfsubjectaccessreviews") == 2 * reviews + 3


def test_a_probe_request_that_keeps_failing_fails_the_probe(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    emulator.faults.add(FaultRule(verb="get", resource="namespaces", status=503))
    with pytest.raises(SchedulerUnavailable):
        run(make_adapter().capabilities())
    assert emulator.requests().count("get", "namespaces") == 3  # tried, then twice again
