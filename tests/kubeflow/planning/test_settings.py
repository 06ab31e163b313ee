"""Kubeflow cluster settings, parsed from the configuration with clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow.planning.settings import (
    KubeflowSettings,
    PublishVia,
    parse_settings,
    settings_from_mapping,
)
from dispatch.config import ClusterConfig
from dispatch.model import ConfigError


def test_the_design_example() -> None:
    cluster = ClusterConfig(
        name="prod",
        adapter="kubeflow",
        settings={
            "kubeconfig": "~/.kube/config",
            "context": "prod-admin",
            "namespace": "ml-team",
            "runtimes": ["torch-distributed", "dispatch-kind"],
            "allowRankRestart": False,
            "publish": {"via": "env"},
            "queue": "team-a",
        },
    )
    assert parse_settings(cluster) == KubeflowSettings(
        kubeconfig="~/.kube/config",
        context="prod-admin",
        namespace="ml-team",
        runtimes=("torch-distributed", "dispatch-kind"),
        allow_rank_restart=False,
        publish_via=PublishVia.ENV,
        queue="team-a",
    )


def test_defaults() -> None:
    settings = settings_from_mapping({})
    assert settings == KubeflowSettings()
    assert settings.effective_namespace == "default"
    assert settings.allows("ClusterTrainingRuntime", "anything")


def test_init_container_publishing() -> None:
    settings = settings_from_mapping(
        {"publish": {"via": "initContainer", "initContainer": "register"}, "allowRankRestart": True}
    )
    assert settings.publish_via is PublishVia.INIT_CONTAINER
    assert settings.init_container == "register"
    assert settings.allow_rank_restart


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        ({"namespce": "x"}, "did you mean 'namespace'"),
        ({"allowRankRestart": "yes"}, "`allowRankRestart` must be true or false"),
        ({"runtimes": "torch"}, "`runtimes` must be a list"),
        ({"runtimes": ["Deployment/x"]}, "the kind before '/'"),
        ({"publish": "env"}, "`publish` must be a mapping"),
        ({"publish": {"via": "sidecar"}}, "`publish.via` must be env or initContainer"),
        ({"publish": {"via": "initContainer"}}, "`publish.initContainer` must name"),
        ({"publish": {"via": "env", "initContainer": "r"}}, "only read with publish.via"),
        ({"publish": {"via": "initContainer", "initContainer": "node"}}, "may not be 'node'"),
        ({"publish": {"via": "env", "extra": 1}}, "unknown key(s) ['extra']"),
        ({"namespace": "Not_A_Label"}, "`namespace` must be a DNS label"),
        ({"queue": ""}, "`queue` must be a non-empty string"),
        ({"context": 3}, "`context` must be a non-empty string"),
        ("text", "must be a mapping"),
    ],
)
def test_problems_are_named(data: Any, phrase: str) -> None:
    with pytest.raises(ConfigError, match="cluster 'kf'") as caught:
        settings_from_mapping(data, cluster="kf")
    assert phrase in str(caught.value)


def test_every_problem_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({"allowRankRestart": 1, "queue": 2, "bogus": 3}, cluster="kf")
    message = str(caught.value)
    assert "allowRankRestart" in message and "queue" in message and "bogus" in message
