"""The adapter's pure parts: version parsing, CRD reading, state table, error translation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from dispatch.adapters.kubeflow.api.errors import AlreadyExists, ApiRejected, Conflict, translate
from dispatch.adapters.kubeflow.api.probe import parse_version, version_from_crd
from dispatch.adapters.kubeflow.causes.coarse import trainjob_outcome
from dispatch.adapters.kubeflow.planning.rules import weakened_identity_text
from dispatch.model import (
    Cause,
    Forbidden,
    NotFound,
    OutcomeUnknown,
    SchedulerUnavailable,
    State,
)
from dispatch.testing.k8s import Emulator

from .conftest import AdapterFactory, example_spec, job_of, run, stored


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v2.2.0", (2, 2, 0)),
        ("2.3.1", (2, 3, 1)),
        ("v2.2", (2, 2, 0)),
        ("v2.3.0-rc.1", (2, 3, 0)),
        ("latest", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_version(text: Any, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


def _crd(*fields: str) -> dict[str, Any]:
    properties = {f: {"type": "object"} for f in fields}
    schema = {"openAPIV3Schema": {"properties": {"spec": {"properties": properties}}}}
    return {"spec": {"versions": [{"name": "v1alpha1", "schema": schema}]}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (("trainer", "runtimePatches"), (2, 2, 0)),
        (("trainer", "podTemplateOverrides"), (2, 1, 0)),
        (("trainer", "podSpecOverrides"), (2, 0, 0)),
        (("trainer",), None),
    ],
)
def test_version_from_the_trainjob_crd(
    fields: tuple[str, ...], expected: tuple[int, int, int] | None
) -> None:
    assert version_from_crd(_crd(*fields)) == expected
    assert version_from_crd({"spec": "garbage"}) is None


def _trainjob(**parts: Any) -> dict[str, Any]:
    return {"metadata": {"name": "tj", "labels": parts.pop("labels", {})}, **parts}


@pytest.mark.parametrize(
    ("trainjob", "state", "cause"),
    [
        (_trainjob(), State.QUEUED, None),
        (_trainjob(spec={"suspend": True}), State.HELD, None),
        (
            _trainjob(spec={"suspend": True}, labels={"kueue.x-k8s.io/queue-name": "q"}),
            State.QUEUED,
            None,
        ),
        (_trainjob(status={"jobsStatus": [{"name": "node", "ready": 2}]}), State.RUNNING, None),
        (
            _trainjob(status={"conditions": [{"type": "Complete", "status": "True"}]}),
            State.SUCCEEDED,
            None,
        ),
        (
            _trainjob(status={"conditions": [{"type": "Failed", "status": "True"}]}),
            State.FAILED,
            Cause.UNKNOWN,
        ),
        (
            _trainjob(status={"conditions": [{"type": "Failed", "status": "False"}]}),
            State.QUEUED,
            None,
        ),
        ({"status": "garbage", "spec": []}, State.QUEUED, None),
    ],
)
def test_the_coarse_state_table(
    trainjob: dict[str, Any], state: State, cause: Cause | None
) -> None:
    outcome = trainjob_outcome(trainjob, 1.0)
    assert (outcome.state, outcome.cause) == (state, cause)


def test_an_ended_trainjob_is_not_relabelled_cancelled() -> None:
    trainjob = _trainjob(status={"conditions": [{"type": "Complete", "status": "True"}]})
    trainjob["metadata"]["annotations"] = {"dispatch.dev/cancelled-by": "bob"}
    assert trainjob_outcome(trainjob, 1.0).state is State.SUCCEEDED


def _api_error(
    status: int, reason: str = "", headers: dict[str, str] | None = None
) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "reason": reason, "message": f"{reason} happened"})
    error.headers = headers or {}
    return error


@pytest.mark.parametrize(
    ("status", "reason", "write", "expected"),
    [
        (404, "NotFound", False, NotFound),
        (403, "Forbidden", True, Forbidden),
        (409, "AlreadyExists", True, AlreadyExists),
        (409, "Conflict", True, Conflict),
        (422, "Invalid", True, ApiRejected),
        (429, "TooManyRequests", True, SchedulerUnavailable),
        (500, "InternalError", False, SchedulerUnavailable),
        (500, "InternalError", True, OutcomeUnknown),
        (504, "Timeout", True, OutcomeUnknown),
    ],
)
def test_api_errors_are_translated(status: int, reason: str, write: bool, expected: type) -> None:
    error = translate(_api_error(status, reason), "create TrainJob ns/x", write=write)
    assert type(error) is expected
    assert "create TrainJob ns/x" in str(error) and f"{reason} happened" in str(error)


def test_a_429_carries_retry_after() -> None:
    error = translate(_api_error(429, "TooManyRequests", {"Retry-After": "4"}), "x", write=True)
    assert isinstance(error, SchedulerUnavailable) and error.delay == 4


def test_a_timeout_is_unknown_for_writes_only() -> None:
    assert isinstance(translate(TimeoutError(), "create x", write=True), OutcomeUnknown)
    assert isinstance(translate(TimeoutError(), "read x"), SchedulerUnavailable)


def test_weakened_identity_is_answered_from_the_runtime_read(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter(name="kf-rank-restart", allowRankRestart=True)
    spec = example_spec("rank-restart", cluster="kf-rank-restart")
    before = adapter.weakened_identity(spec)
    assert before is not None and "has not been read yet" in before
    expected = weakened_identity_text(ignore_rule=True, per_index=True)
    assert run(adapter.capabilities(spec)).weakened_identity == expected
    assert adapter.weakened_identity(spec) == expected
    assert make_adapter().weakened_identity(example_spec("torch")) is None  # not allowed here
    handle = run(adapter.start(job_of(spec), 1))
    [trainjob] = stored(emulator, "TrainJob")
    assert trainjob["metadata"]["annotations"]["dispatch.dev/weakened-identity"] == expected
    env = {e["name"] for e in trainjob["spec"]["trainer"]["env"]}
    assert {"DISPATCH_IDENTITY_WEAKENED", "DISPATCH_RANK_FAILURES"} <= env
    assert handle.native == trainjob["metadata"]["name"]
