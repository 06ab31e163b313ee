"""The emulator refuses writes aimed at an object by uid once the name holds another object,
as the API server does: a delete whose ``preconditions.uid`` differs is 409 Conflict, and a
patch that names another ``metadata.uid`` is 422 Invalid (uid is immutable)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("kubernetes")
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from dispatch.testing.k8s import Emulator

from .conftest import trainjob

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


@pytest.fixture
def custom(emulator: Emulator) -> Iterator[client.CustomObjectsApi]:
    api = config.new_client_from_config(str(emulator.kubeconfig))
    yield client.CustomObjectsApi(api)
    api.close()


def _replaced(custom: client.CustomObjectsApi) -> tuple[str, str]:
    """(the first uid of TrainJob ``own``, the uid of the one now under that name)."""
    first = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("own")
    )
    custom.delete_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    second = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("own")
    )
    return first["metadata"]["uid"], second["metadata"]["uid"]


def test_delete_with_another_uid_in_preconditions_is_409(custom: client.CustomObjectsApi) -> None:
    old, new = _replaced(custom)
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=old))
    with pytest.raises(ApiException) as exc:
        custom.delete_namespaced_custom_object(
            *TRAINER, "default", "trainjobs", "own", body=options
        )
    assert exc.value.status == 409
    message = json.loads(exc.value.body)["message"]
    assert f"UID in precondition: {old}" in message and new in message
    kept = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    assert kept["metadata"]["uid"] == new and not kept["metadata"].get("deletionTimestamp")
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=new))
    custom.delete_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own", body=options)


def test_patch_naming_another_uid_is_422_and_changes_nothing(
    custom: client.CustomObjectsApi,
) -> None:
    old, new = _replaced(custom)
    note = {"metadata": {"uid": old, "annotations": {"example.com/note": "x"}}}
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own", note)
    assert exc.value.status == 422
    assert "metadata.uid" in json.loads(exc.value.body)["message"]
    kept = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    assert kept["metadata"]["uid"] == new and not kept["metadata"].get("annotations")
    note["metadata"]["uid"] = new
    patched = custom.patch_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own", note)
    assert patched["metadata"]["annotations"] == {"example.com/note": "x"}
