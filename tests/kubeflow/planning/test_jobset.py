"""Golden tests: the JobSet ``render`` builds matches what Trainer v2.3 builds.

Each case restates one case of Trainer's own tests, in kubeflow/trainer at tag v2.3.0:

* ``pkg/runtime/core/trainingruntime_test.go`` (``TestTrainingRuntimeNewObjects``), whose
  inputs and expected objects use the wrappers of ``pkg/util/testing/wrapper.go``
  (``MakeTrainingRuntimeWrapper``: replicated jobs ``dataset-initializer``,
  ``model-initializer`` and ``node`` with the ancestor labels and ``initializer`` volume);
* ``pkg/runtime/framework/plugins/torch/torch_test.go`` for ``PET_NPROC_PER_NODE`` from CPUs;
* ``pkg/runtime/framework/plugins/jobset/jobset.go`` / ``builder.go`` for owner reference,
  suspend and replicas.

Trainer's tests compare env lists after sorting (``cmpopts.SortSlices``), so env is compared
here by name as well; everything else is compared exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dispatch.adapters.kubeflow.objects import strategic_merge
from dispatch.adapters.kubeflow.planning.jobset import (
    COMPLETION_INDEX_PATH,
    UnsupportedRuntime,
    render,
    render_jobset,
    runtime_snapshot,
)

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RES = {"requests": {"cpu": "1"}}


def _rjob(name: str, step: str, mounts: list[str]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name if step != "trainer" else "node",
        "volumeMounts": [{"name": "initializer", "mountPath": m} for m in mounts],
    }
    return {
        "name": name,
        "groupName": "default",
        "template": {
            "metadata": {"labels": {ANCESTOR: step}},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [container],
                        "volumes": [
                            {
                                "name": "initializer",
                                "persistentVolumeClaim": {"claimName": "initializer"},
                            }
                        ],
                    }
                }
            },
        },
    }


def runtime(ml_policy: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """``MakeTrainingRuntimeWrapper(default, test-runtime)``, with an mlPolicy."""
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "replicatedJobs": [
                    _rjob("dataset-initializer", "dataset-initializer", ["/workspace/dataset"]),
                    _rjob("model-initializer", "model-initializer", ["/workspace/model"]),
                    _rjob("node", "trainer", ["/workspace/dataset", "/workspace/model"]),
                ]
            }
        },
        **extra,
    }
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "test-runtime", "namespace": "default"},
        "spec": spec,
    }


def node_container(rt: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``Container(node, node, image, command, args, res)`` of the wrappers."""
    rjob = rt["spec"]["template"]["spec"]["replicatedJobs"][2]
    container: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container.update(fields)
    return container


def trainjob(trainer: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "runtimeRef": {
            "name": "test-runtime",
            "kind": "TrainingRuntime",
            "apiGroup": "trainer.kubeflow.org",
        },
        **spec,
    }
    if trainer is not None:
        body["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "test-job", "namespace": "default", "uid": "uid"},
        "spec": body,
    }


def expected(rt: dict[str, Any], nodes: int) -> dict[str, Any]:
    """``MakeJobSetWrapper(default, test-job).ControllerReference(...).Replicas(1, ...)
    .Parallelism(1, initializers).Completions(1, initializers).NumNodes(nodes)``."""
    spec = copy.deepcopy(rt["spec"]["template"]["spec"])
    for rjob in spec["replicatedJobs"]:
        rjob["replicas"] = 1
        count = nodes if rjob["name"] == "node" else 1
        rjob["template"]["spec"]["parallelism"] = count
        rjob["template"]["spec"]["completions"] = count
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "test-job",
                    "uid": "uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def pod_spec(jobset: dict[str, Any], rjob: str) -> dict[str, Any]:
    found = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == rjob)
    spec: dict[str, Any] = found["template"]["spec"]["template"]["spec"]
    return spec


def env_of(jobset: dict[str, Any], rjob: str = "node") -> dict[str, Any]:
    container = next(c for c in pod_spec(jobset, rjob)["containers"] if c["name"] == "node")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def without_env(jobset: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(jobset)
    for rjob in out["spec"]["replicatedJobs"]:
        for c in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            c.pop("env", None)
    return out


def test_plainml_numnodes_from_trainjob_patch_metadata_and_coscheduling() -> None:
    """Case "succeeded to build PodGroup and JobSet with NumNodes from the TrainJob and
    container from the Runtime." (the JobSet part)."""
    rt = runtime(
        {"numNodes": 100}, podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 120}}
    )
    rt["spec"]["template"]["metadata"] = {
        "labels": {"conflictLabel": "overridden"},
        "annotations": {"conflictAnnotation": "overridden"},
    }
    node_container(rt, image="test:runtime", command=["runtime"], args=["runtime"], resources=RES)
    tj = trainjob(
        {"numNodes": 30},
        suspend=True,
        runtimePatches=[
            {
                "manager": "test.io/manager",
                "trainingRuntimeSpec": {
                    "template": {
                        "metadata": {
                            "labels": {"conflictLabel": "override"},
                            "annotations": {"conflictAnnotation": "override"},
                        }
                    }
                },
            }
        ],
    )
    want = expected(rt, 30)
    want["metadata"]["labels"] = {"conflictLabel": "override"}
    want["metadata"]["annotations"] = {"conflictAnnotation": "override"}
    want["spec"]["suspend"] = True
    for rjob in want["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["metadata"] = {
            "labels": {"scheduling.x-k8s.io/pod-group": "test-job"}
        }
    got = render_jobset(tj, rt)
    assert got == want


def test_plainml_container_and_env_from_trainjob() -> None:
    """Case "succeeded to build JobSet with NumNodes from the Runtime and container from the
    TrainJob.": image/command/args replaced, env upserted (override kept, new appended)."""
    rt = runtime({"numNodes": 100})
    node_container(
        rt,
        image="test:runtime",
        command=["runtime"],
        args=["runtime"],
        resources=RES,
        env=[
            {"name": "TRAIN_JOB", "value": "original"},
            {"name": "RUNTIME", "value": "test:runtime"},
        ],
    )
    tj = trainjob(
        {
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": RES,
            "env": [
                {"name": "TRAIN_JOB", "value": "override"},
                {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
            ],
        }
    )
    got = render_jobset(tj, rt)
    want = expected(rt, 100)
    container = pod_spec(want, "node")["containers"][0]
    container.update(image="test:trainjob", command=["trainjob"], args=["trainjob"])
    assert without_env(got) == without_env(want)
    assert env_of(got) == {
        "TRAIN_JOB": "override",
        "TRAIN_JOB_CUSTOM": "test:trainjob",
        "RUNTIME": "test:runtime",
    }
    names = [e["name"] for e in pod_spec(got, "node")["containers"][0]["env"]]
    assert names == ["TRAIN_JOB", "RUNTIME", "TRAIN_JOB_CUSTOM"]  # upsert order


def test_torch_numprocpernode_set() -> None:
    """Case "succeeded to build JobSet with Torch values from the TrainJob"."""
    rt = runtime({"numNodes": 100, "torch": {}})
    node_container(rt, image="test:runtime", command=["runtime"], args=["runtime"], resources=RES)
    got = render_jobset(trainjob({"numNodes": 30, "numProcPerNode": 3}), rt)
    want = expected(rt, 30)
    pod_spec(want, "node")["containers"][0]["ports"] = [{"containerPort": 29500}]
    assert without_env(got) == without_env(want)
    assert env_of(got) == {
        "PET_NNODES": "30",
        "PET_NPROC_PER_NODE": "3",
        "PET_NODE_RANK": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}},
        "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
        "PET_MASTER_PORT": "29500",
    }


@pytest.mark.parametrize(
    ("runtime_res", "per_node", "nproc"),
    [
        # torch_test.go: "numProcPerNode unset, CPU requests in resourcesPerNode" -> CPUs
        (None, {"requests": {"cpu": "4"}}, "4"),
        # limits only -> the CPU limit; fractional CPUs round up (Quantity.Value)
        (None, {"limits": {"cpu": "1500m"}}, "2"),
        # a GPU anywhere -> "auto" (torchrun counts the GPUs)
        (None, {"limits": {"nvidia.com/gpu": "2"}}, "auto"),
        # nothing in the TrainJob -> the runtime node container's resources
        ({"requests": {"cpu": "6"}}, None, "6"),
        # no resources at all -> 1
        (None, None, "1"),
    ],
)
def test_torch_numprocpernode_unset(
    runtime_res: dict[str, Any] | None, per_node: dict[str, Any] | None, nproc: str
) -> None:
    rt = runtime({"numNodes": 2, "torch": {}})
    if runtime_res:
        node_container(rt, resources=runtime_res)
    trainer: dict[str, Any] = {"numNodes": 2}
    if per_node:
        trainer["resourcesPerNode"] = per_node
    got = render_jobset(trainjob(trainer), rt)
    assert env_of(got)["PET_NPROC_PER_NODE"] == nproc
    assert env_of(got)["PET_NNODES"] == "2"


def test_resources_per_node_merged_over_runtime() -> None:
    """Case "merged resourcesPerNode keeps runtime resources when trainjob sets gpu only"
    (v2.3: merged, not replaced)."""
    rt = runtime({"numNodes": 1})
    node_container(rt, resources={"requests": {"cpu": "1", "memory": "2Gi"}})
    tj = trainjob({"resourcesPerNode": {"requests": {"example.com/gpu": "1"}}})
    got = render_jobset(tj, rt)
    assert pod_spec(got, "node")["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi", "example.com/gpu": "1"}
    }


def test_runtime_patches_strategic_merge() -> None:
    """Case "succeeded to build JobSet with TrainJob's RuntimePatches.": init container env
    and volume mounts merged by name/mountPath, affinity and tolerations set, order kept."""
    rt = runtime({"numNodes": 100})
    ds = pod_spec({"spec": rt["spec"]["template"]["spec"]}, "dataset-initializer")
    ds["initContainers"] = [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            "env": [
                {"name": "INIT_ENV", "value": "original_init"},
                {"name": "DATASET_PATH", "value": "runtime"},
            ],
        }
    ]
    patch = {
        "manager": "manager-1",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "dataset-initializer",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "initContainers": [
                                                {
                                                    "name": "override-init-container",
                                                    "env": [
                                                        {"name": "INIT_ENV", "value": "override_init"},
                                                        {"name": "NEW_VALUE", "value": "from_overrides"},
                                                    ],
                                                }
                                            ],
                                            "containers": [
                                                {
                                                    "name": "dataset-initializer",
                                                    "volumeMounts": [
                                                        {"name": "initializer_secret", "mountPath": "initializer_secret_mount_path"},
                                                    ],
                                                }
                                            ],
                                            "tolerations": [{"key": "example.com/gpu", "operator": "Exists"}],
                                            "nodeSelector": {"accelerator": "nvidia-tesla-k80"},
                                        }
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }  # fmt: skip
    got = render_jobset(trainjob(None, runtimePatches=[patch]), rt)
    assert [r["name"] for r in got["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]
    ds_got = pod_spec(got, "dataset-initializer")
    assert ds_got["initContainers"] == [
        {
            "name": "override-init-container",
            "image": "test:runtime",
            # the order apimachinery's strategic merge gives (Trainer merges runtimePatches
            # with it; the Go test sorts env and mounts before comparing): the patch's items in
            # its order, an item it adds before the runtime's items that came after the ones
            # it patched
            "env": [
                {"name": "INIT_ENV", "value": "override_init"},
                {"name": "NEW_VALUE", "value": "from_overrides"},
                {"name": "DATASET_PATH", "value": "runtime"},
            ],
        }
    ]
    assert ds_got["containers"][0]["volumeMounts"] == [
        {"name": "initializer_secret", "mountPath": "initializer_secret_mount_path"},
        {"name": "initializer", "mountPath": "/workspace/dataset"},
    ]
    assert ds_got["tolerations"] == [{"key": "example.com/gpu", "operator": "Exists"}]
    assert ds_got["nodeSelector"] == {"accelerator": "nvidia-tesla-k80"}


def test_later_patches_win_and_null_deletes() -> None:
    """Case "succeeded to build JobSet with TrainJob's RuntimePatches targeting the same job
    with different values": patches apply in list order."""
    base = {"a": {"b": 1, "c": 2}, "env": [{"name": "X", "value": "1"}]}
    merged = strategic_merge(base, {"a": {"b": None}, "env": [{"name": "X", "value": "2"}]})
    assert merged == {"a": {"c": 2}, "env": [{"name": "X", "value": "2"}]}
    assert base["a"] == {"b": 1, "c": 2}  # the input is not changed


def test_dispatch_trainjob_shape_renders() -> None:
    """A TrainJob as dispatch builds it: runtimePatch manager dispatch.dev/adapter with pod
    labels, suspend for a held job; pod sets as Kueue counts them."""
    rt = runtime({"numNodes": 1, "torch": {}})
    patch = {
        "manager": "dispatch.dev/adapter",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {"metadata": {"labels": {"dispatch.dev/job": "j"}}}
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    tj = trainjob({"numNodes": 4, "numProcPerNode": 1}, runtimePatches=[patch], suspend=True)
    jobset, pod_sets = render(tj, rt)
    assert jobset["spec"]["suspend"] is True
    node = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")
    assert node["template"]["spec"]["template"]["metadata"]["labels"] == {"dispatch.dev/job": "j"}
    assert [(p.name, p.pods) for p in pod_sets] == [
        ("dataset-initializer", 1),
        ("model-initializer", 1),
        ("node", 4),
    ]


def test_snapshot_and_unsupported() -> None:
    rt = runtime({"numNodes": 1})
    cm = runtime_snapshot(trainjob({}), rt)
    assert cm["metadata"]["name"] == "test-job-runtime-snapshot"
    assert cm["metadata"]["ownerReferences"][0]["controller"] is True
    assert '"name": "test-runtime"' in cm["data"]["runtime"]
    with pytest.raises(UnsupportedRuntime):
        render_jobset(trainjob({}), runtime({"mpi": {"mpiImplementation": ""}}))


@pytest.mark.parametrize(
    ("original", "patch", "merged"),
    [
        # worked by hand through apimachinery's mergeSlice / normalizeElementOrder /
        # mergeSortedSlice (server-only items go first only when both are in the original
        # and theirs came earlier): a new item goes before the original's others
        (["a", "b"], ["c"], ["c", "a", "b"]),
        (["a", "b"], ["b", "c"], ["a", "b", "c"]),
        # the patch's order wins among its own items: b (earlier than c) first, then c, a
        (["a", "b", "c"], ["c", "a"], ["b", "c", "a"]),
        (["a", "b", "c", "d"], ["d", "x", "b"], ["a", "c", "d", "x", "b"]),
    ],
)
def test_lists_merged_by_key_are_ordered_as_a_strategic_merge_orders_them(
    original: list[str], patch: list[str], merged: list[str]
) -> None:
    base = {"env": [{"name": n, "value": "old"} for n in original]}
    change = {"env": [{"name": n, "value": "new"} for n in patch]}
    got = strategic_merge(base, change)
    assert [e["name"] for e in got["env"]] == merged
    assert all(e["value"] == ("new" if e["name"] in patch else "old") for e in got["env"])
