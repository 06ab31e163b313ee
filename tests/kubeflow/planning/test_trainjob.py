"""The objects start creates: names, the lossless runtime copy, the TrainJob's fields."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch.adapters.kubeflow.planning import trainjob as build
from dispatch.adapters.kubeflow.planning.names import is_rfc1035, label_value, trainjob_name
from dispatch.adapters.kubeflow.planning.plan import plan_objects, weakened_identity
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, PublishVia
from dispatch.model import Job, JobSpec, Plan, parse_spec
from tests.kubeflow.helpers import example_runtime

SETTINGS = KubeflowSettings(namespace="ml-team")


def spec(**fields: Any) -> JobSpec:
    base: dict[str, Any] = {
        "name": "train",
        "cluster": "kf",
        "command": ["torchrun", "train.py"],
        "runtime": {"name": "torch-dispatch"},
    }
    return parse_spec({**base, **fields})


def plan(
    job_spec: JobSpec,
    runtime: dict[str, Any] | None = None,
    settings: KubeflowSettings = SETTINGS,
    *,
    attempt: int = 1,
    held: bool = False,
) -> Plan:
    raw = example_runtime("torch") if runtime is None else runtime
    return plan_objects(Job("train-ab12c", job_spec, 0.0), attempt, raw, settings, held=held)


def objects(result: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    assert result.accepted, result.capabilities.refusals
    by_kind = {a.kind: dict(a.content) for a in result.artifacts}
    return by_kind["TrainingRuntime"], by_kind["TrainJob"]


# --- names ---------------------------------------------------------------------------------


def test_trainjob_names_are_deterministic_and_short() -> None:
    assert trainjob_name("train-ab12c", 1) == "train-ab12c-1"
    assert trainjob_name("train-ab12c", 12) == "train-ab12c-12"
    longest_id = "a" * 40 + "-ab12c"
    assert len(trainjob_name(longest_id, 9)) == 48


@given(st.text(min_size=1, max_size=120), st.integers(1, 10_000))
def test_any_job_id_gives_a_valid_stable_name(job_id: str, attempt: int) -> None:
    name = trainjob_name(job_id, attempt)
    assert is_rfc1035(name)
    assert name == trainjob_name(job_id, attempt)
    assert name.endswith(f"-{attempt}")


def test_rewritten_ids_stay_distinct() -> None:
    assert trainjob_name("Train_A", 1) != trainjob_name("train-a", 1)
    assert trainjob_name("x" * 100, 1) != trainjob_name("x" * 101, 1)


@given(st.text(max_size=100))
def test_label_values_are_valid(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert value == label_value(text)


# --- the runtime copy ----------------------------------------------------------------------


def test_the_copy_is_lossless_and_named_for_the_trainjob() -> None:
    raw = example_runtime("torch-register")
    raw["metadata"]["annotations"] = {
        "team": "vision",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    raw["metadata"]["uid"] = "u-1"
    raw["metadata"]["resourceVersion"] = "42"
    raw["status"] = {"whatever": True}
    raw["x-top-level"] = [1, 2]
    original = copy.deepcopy(raw)
    runtime_copy, trainjob = objects(plan(spec(runtime={"name": "torch-register"}), raw))
    assert raw == original  # the input is not modified
    assert runtime_copy["kind"] == "TrainingRuntime"
    assert runtime_copy["spec"] == raw["spec"]  # unknown x-site-notes included
    assert runtime_copy["spec"]["x-site-notes"]
    assert runtime_copy["x-top-level"] == [1, 2]
    assert "status" not in runtime_copy
    meta = runtime_copy["metadata"]
    assert meta["name"] == trainjob["metadata"]["name"] == "train-ab12c-1"
    assert meta["namespace"] == "ml-team"
    assert set(meta) == {"name", "namespace", "labels", "annotations"}
    assert meta["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert meta["annotations"]["team"] == "vision"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in meta["annotations"]
    assert meta["annotations"]["dispatch.dev/runtime"] == "ClusterTrainingRuntime/torch-register"


def test_the_owner_reference_patch() -> None:
    assert build.owner_reference_patch("train-ab12c-1", "uid-7") == {
        "metadata": {
            "labels": {"dispatch.dev/owner-pending": None},  # merge patch: removed
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "train-ab12c-1",
                    "uid": "uid-7",
                }
            ],
        }
    }


# --- the TrainJob ----------------------------------------------------------------------------


def test_every_field_of_section_2() -> None:
    job_spec = spec(
        nodes=3,
        procsPerNode=2,
        image="repo/img:1",
        args=["--lr", "0.1"],
        env={"EPOCHS": "3"},
        resources={"cpu": "4", "memory": "8Gi", "gpu": 2},
        timeLimit="90s",
        queue="team-b",
    )
    runtime_copy, trainjob = objects(plan(job_spec, attempt=2, held=True))
    assert trainjob["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert trainjob["kind"] == "TrainJob"
    body = trainjob["spec"]
    assert body["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "train-ab12c-2",
    }
    trainer = body["trainer"]
    assert trainer["numNodes"] == 3
    assert trainer["numProcPerNode"] == 2
    assert trainer["image"] == "repo/img:1"
    assert trainer["command"] == ["torchrun", "train.py"]
    assert trainer["args"] == ["--lr", "0.1"]
    limits = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}
    assert trainer["resourcesPerNode"] == {"requests": limits, "limits": limits}
    assert trainer["env"] == [
        {"name": "EPOCHS", "value": "3"},
        {"name": "DISPATCH_JOB", "value": "train-ab12c"},
        {"name": "DISPATCH_ATTEMPT", "value": "2"},
        {"name": "DISPATCH_CLUSTER", "value": "kf"},
    ]
    assert body["activeDeadlineSeconds"] == 90
    assert body["suspend"] is True
    (patch,) = body["runtimePatches"]
    assert patch["manager"] == "dispatch.dev/adapter"
    (job_patch,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job_patch["name"] == "node"
    assert job_patch["template"]["spec"]["template"] == {
        "metadata": {"labels": {"dispatch.dev/job": "train-ab12c", "dispatch.dev/attempt": "2"}}
    }
    labels = {
        "dispatch.dev/job": "train-ab12c",
        "dispatch.dev/attempt": "2",
        "dispatch.dev/cluster": "kf",
        "app.kubernetes.io/managed-by": "dispatch",
        "kueue.x-k8s.io/queue-name": "team-b",
    }
    for obj in (trainjob, runtime_copy):
        assert labels.items() <= obj["metadata"]["labels"].items()
        assert obj["metadata"]["annotations"]["dispatch.dev/spec-hash"] == build.spec_hash(job_spec)
        assert "dispatch.dev/weakened-identity" not in obj["metadata"]["annotations"]


def test_optional_fields_are_left_out() -> None:
    _, trainjob = objects(plan(spec()))
    body = trainjob["spec"]
    assert {"activeDeadlineSeconds", "suspend"}.isdisjoint(body)
    assert {"image", "args", "resourcesPerNode", "numProcPerNode"}.isdisjoint(body["trainer"])
    assert "kueue.x-k8s.io/queue-name" not in trainjob["metadata"]["labels"]


def test_the_cluster_queue_is_the_default() -> None:
    settings = KubeflowSettings(queue="team-a")
    _, trainjob = objects(plan(spec(), settings=settings))
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    _, trainjob = objects(plan(spec(queue="mine"), settings=settings))
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "mine"


def test_num_proc_per_node_only_on_torch_runtimes() -> None:
    plain = example_runtime("plain")
    _, trainjob = objects(plan(spec(command=["python", "t.py"]), plain))
    assert "numProcPerNode" not in trainjob["spec"]["trainer"]
    assert trainjob["spec"]["trainer"]["command"] == ["python", "t.py"]


def test_a_plain_command_is_wrapped_in_torchrun_on_torch_runtimes() -> None:
    _, trainjob = objects(plan(spec(command=["python", "t.py"], procsPerNode=4)))
    trainer = trainjob["spec"]["trainer"]
    assert trainer["command"] == ["torchrun", "--no-python", "python", "t.py"]
    assert trainer["numProcPerNode"] == 4
    _, trainjob = objects(plan(spec(command=["python", "t.py"])))
    assert trainjob["spec"]["trainer"]["numProcPerNode"] == 1


def test_init_container_publishing() -> None:
    settings = KubeflowSettings(publish_via=PublishVia.INIT_CONTAINER, init_container="register")
    raw = example_runtime("torch-register")
    _, trainjob = objects(plan(spec(runtime={"name": "torch-register"}), raw, settings))
    (patch,) = trainjob["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    assert pod["spec"]["template"]["spec"]["initContainers"] == [
        {
            "name": "register",
            "env": [
                {"name": "DISPATCH_JOB", "value": "train-ab12c"},
                {"name": "DISPATCH_ATTEMPT", "value": "1"},
                {"name": "DISPATCH_CLUSTER", "value": "kf"},
            ],
        }
    ]


def test_a_weakened_identity_is_annotated_and_ranks_get_their_failure_count() -> None:
    settings = KubeflowSettings(allow_rank_restart=True)
    raw = example_runtime("torch-rank-restart")
    job_spec = spec(runtime={"name": "torch-rank-restart"})
    result = plan(job_spec, raw, settings)
    runtime_copy, trainjob = objects(result)
    reason = weakened_identity(job_spec, raw, settings)
    assert reason and reason == result.capabilities.weakened_identity
    assert result.identity.weakened == reason
    for obj in (trainjob, runtime_copy):
        assert obj["metadata"]["annotations"]["dispatch.dev/weakened-identity"] == reason
    env = {e["name"]: e for e in trainjob["spec"]["trainer"]["env"]}
    assert env["DISPATCH_RANK_FAILURES"]["valueFrom"] == {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
        }
    }
    assert env["DISPATCH_IDENTITY_WEAKENED"]["value"] == reason


def test_no_rank_failures_without_a_weakened_identity() -> None:
    _, trainjob = objects(plan(spec()))
    names = [e["name"] for e in trainjob["spec"]["trainer"]["env"]]
    assert "DISPATCH_RANK_FAILURES" not in names


def test_the_spec_hash_ignores_how_the_spec_was_written() -> None:
    one = parse_spec({"name": "a", "command": ["x"], "env": {"A": "1", "B": "2"}})
    two = parse_spec({"env": {"B": "2", "A": "1"}, "command": ["x"], "name": "a", "nodes": 1})
    assert build.spec_hash(one) == build.spec_hash(two)
    assert build.spec_hash(one) != build.spec_hash(parse_spec({"name": "a", "command": ["y"]}))


def test_the_same_inputs_give_the_same_objects() -> None:
    assert plan(spec()).to_json() == plan(spec()).to_json()


def models_answer(manifest: dict[str, Any]) -> str:
    """What Trainer's models write of ``manifest``, as JSON text (key order included)."""
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    return json.dumps(TrainerV1alpha1TrainJob.from_dict(manifest).to_dict())


def test_a_manifest_of_a_shape_seen_is_written_as_the_models_write_it() -> None:
    build._SURVIVED.clear()
    resources = {"gpu": 1, "cpu": "4", "memory": "8Gi"}
    _, first = objects(plan(spec(resources=resources, env={"A": "1"})))
    assert len(build._SURVIVED) == 1
    # another job of the same shape (other names, env values and quantities): not sent
    # through the models again, yet written exactly as they write it
    other = plan_objects(
        Job("other-zz99q", spec(resources={**resources, "cpu": "2"}, env={"A": "2"}), 0.0),
        3,
        example_runtime("torch"),
        SETTINGS,
    )
    second = {a.kind: dict(a.content) for a in other.artifacts}["TrainJob"]
    assert len(build._SURVIVED) == 1
    assert second != first
    assert json.dumps(second) == models_answer(second)


def test_a_field_the_models_drop_is_refused_whatever_was_seen_before() -> None:
    build._SURVIVED.clear()
    _, manifest = objects(plan(spec()))
    unknown = copy.deepcopy(manifest)
    unknown["spec"]["trainer"]["notAField"] = "x"
    with pytest.raises(ValueError, match="does not survive"):
        build._through_trainer_models(unknown)
    assert len(build._SURVIVED) == 1


def test_the_shapes_kept_are_bounded() -> None:
    build._SURVIVED.clear()
    _, manifest = objects(plan(spec()))
    for n in range(build.MAX_SHAPES + 10):
        grown = copy.deepcopy(manifest)
        grown["spec"]["trainer"]["args"] = ["x"] * (n + 1)  # another shape each time
        build._through_trainer_models(grown)
    assert len(build._SURVIVED) == build.MAX_SHAPES


# --- refusals --------------------------------------------------------------------------------


def test_a_refused_plan_has_every_reason_and_no_objects() -> None:
    raw = example_runtime("plain")
    raw["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].pop("backoffLimit")
    result = plan(spec(procsPerNode=2, env={"PET_NNODES": "3"}), raw)
    assert not result.accepted
    assert [r.rule for r in result.capabilities.refusals] == [
        "backoff-limit",
        "procs-per-node",
        "reserved-env",
    ]
    assert result.artifacts == ()
    assert result.to_json()["objects"] == []


def test_a_missing_runtime_is_not_found() -> None:
    result = plan_objects(Job("train-ab12c", spec(), 0.0), 1, None, SETTINGS)
    assert [r.rule for r in result.capabilities.refusals] == ["not-found"]


def test_a_job_without_a_runtime_is_refused() -> None:
    job_spec = parse_spec({"name": "a", "cluster": "kf", "command": ["x"]})
    result = plan(job_spec)
    assert [r.rule for r in result.capabilities.refusals] == ["not-found"]
    assert "names no runtime" in result.capabilities.refusals[0].message


@pytest.mark.parametrize("gpu", [0, 1, 8])
def test_gpu_means_nvidia(gpu: int) -> None:
    _, trainjob = objects(plan(spec(resources={"gpu": gpu})))
    resources = trainjob["spec"]["trainer"].get("resourcesPerNode")
    if gpu:
        assert resources["limits"] == {"nvidia.com/gpu": str(gpu)}
    else:
        assert resources is None


# --- the environment (docs/reference/job-spec.md, "Environment") ---------------------------


def test_inherited_variables_captured_at_submit_go_into_the_trainer_env() -> None:
    job_spec = spec(env={"EPOCHS": "3"}, inheritEnv=["WANDB_MODE"])
    captured = {"PATH": "/submitter/bin", "HOME": "/home/me", "WANDB_MODE": "offline"}
    job = Job("train-ab12c", job_spec, 0.0, environment=captured)
    _, trainjob = objects(plan_objects(job, 1, example_runtime("torch"), SETTINGS))
    env = {e["name"]: e.get("value") for e in trainjob["spec"]["trainer"]["env"]}
    assert (env["WANDB_MODE"], env["EPOCHS"]) == ("offline", "3")
    # the base of a container's environment is its image's, not the submitter's machine's
    assert "PATH" not in env and "HOME" not in env


def test_secret_env_is_a_secret_reference_and_the_plan_hides_the_values() -> None:
    job_spec = spec(secretEnv={"TOKEN": {"fromEnv": "MY_TOKEN"}})
    result = plan(job_spec)
    assert result.accepted, result.capabilities.refusals
    by_kind = {a.kind: a.content for a in result.artifacts}
    trainjob, secret = by_kind["TrainJob"], by_kind["Secret"]
    name = trainjob["metadata"]["name"]
    env = {e["name"]: e for e in trainjob["spec"]["trainer"]["env"]}
    assert env["TOKEN"] == {
        "name": "TOKEN",
        "valueFrom": {"secretKeyRef": {"name": f"{name}-env", "key": "TOKEN"}},
    }
    assert secret["metadata"]["name"] == f"{name}-env"
    assert secret["stringData"] == {"TOKEN": "(secret)"}
    assert secret["metadata"]["labels"]["dispatch.dev/job"] == "train-ab12c"
