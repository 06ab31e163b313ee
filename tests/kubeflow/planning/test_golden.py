"""Golden files: the plan (and objects) ``dispatch plan`` renders for each example job.

Regenerate after an intended change with ``DISPATCH_UPDATE_GOLDEN=1 pytest tests/kubeflow``
and review the diff: these files are the exact objects ``start`` creates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from dispatch.adapters.kubeflow.planning.plan import plan_objects, with_jobset
from dispatch.model import Job, Plan, load_spec
from tests.kubeflow.helpers import JOBS, cluster_settings, example_runtimes

GOLDEN = Path(__file__).parent / "golden"
#: the JobSet Trainer would build from each accepted plan (``dispatch plan --show-jobset``)
JOBSETS = GOLDEN / "jobset"
UPDATE = os.environ.get("DISPATCH_UPDATE_GOLDEN") == "1"
#: example jobs planned as held (`dispatch submit --hold`)
HELD = {"hold"}
CASES = sorted(path.stem for path in JOBS.glob("*.yaml"))


def render(stem: str) -> Plan:
    spec = load_spec(JOBS / f"{stem}.yaml")
    runtime = (
        example_runtimes().get((spec.runtime.kind.value, spec.runtime.name))
        if spec.runtime
        else None
    )
    job = Job(id=f"{spec.name}-x7k2p", spec=spec, created_at=0.0)
    return plan_objects(job, 1, runtime, cluster_settings(spec.cluster), held=stem in HELD)


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2) + "\n"


def objects_yaml(plan: Plan) -> str:
    return yaml.safe_dump_all(
        [artifact.to_json()["content"] for artifact in plan.artifacts], sort_keys=False
    )


def compare(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path.name} is missing; run with DISPATCH_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from what dispatch renders; if the change is intended, "
        "regenerate with DISPATCH_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("stem", CASES)
def test_plan_matches_golden(stem: str) -> None:
    plan = render(stem)
    compare(GOLDEN / f"{stem}.json", plan_json(plan))
    objects = GOLDEN / f"{stem}.yaml"
    if plan.accepted:
        compare(objects, objects_yaml(plan))
    else:
        assert not plan.artifacts
        assert not objects.exists() or UPDATE


@pytest.mark.parametrize("stem", CASES)
def test_the_jobset_trainer_would_build_matches_golden(stem: str) -> None:
    """The JobSet, then every other object Trainer's plugins create (a PodGroup, MPI's Secret
    and hostfile ConfigMap), in one file."""
    planned = render(stem)
    plan = with_jobset(planned)
    shown = [a.content for a in plan.artifacts[len(planned.artifacts) :]]
    jobsets = [a.content for a in plan.artifacts if a.kind == "JobSet"]
    path = JOBSETS / f"{stem}.yaml"
    if not plan.accepted:
        assert jobsets == [] and (not path.exists() or UPDATE)
        return
    [jobset] = jobsets
    if UPDATE:
        JOBSETS.mkdir(exist_ok=True)
    assert shown[0] is jobset
    compare(path, yaml.safe_dump_all(shown, sort_keys=False))
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert jobset["spec"]["suspend"] is (stem in HELD)  # the TrainJob's, defaulted false


def test_every_golden_file_has_an_example() -> None:
    assert {path.stem for path in JOBSETS.iterdir()} <= set(CASES)
    stems = {path.stem for path in GOLDEN.iterdir() if path.is_file()}
    assert stems <= set(CASES)
    assert set(CASES) <= stems


def test_examples_cover_the_issue() -> None:
    """Torch and plain runtimes, queue, hold, deadline, init-container publishing."""
    plans = {stem: render(stem) for stem in CASES}
    kinds = {stem: plan.to_json() for stem, plan in plans.items()}
    trainjobs = {
        stem: next(a.content for a in plan.artifacts if a.kind == "TrainJob")
        for stem, plan in plans.items()
        if plan.accepted
    }
    assert "numProcPerNode" in trainjobs["torch"]["spec"]["trainer"]
    assert "numProcPerNode" not in trainjobs["plain"]["spec"]["trainer"]
    assert trainjobs["queue"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert trainjobs["hold"]["spec"]["suspend"] is True
    assert trainjobs["deadline"]["spec"]["activeDeadlineSeconds"] == 5400
    patch = trainjobs["init-container"]["spec"]["runtimePatches"][0]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    assert pod["spec"]["template"]["spec"]["initContainers"][0]["name"] == "register"
    assert kinds["rank-restart"]["weakenedIdentity"]
    assert not kinds["refused"]["accepted"]
