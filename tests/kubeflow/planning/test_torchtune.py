"""torchtune's helpers, case by case after Trainer v2.3.0
``pkg/runtime/framework/plugins/torch/torchtune_test.go`` (each id is the Go case's name).

What they make of a whole TrainJob is in the golden cases (``golden/cases/torchtune``); these
pin the pieces the Go file tests one by one.
"""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow.planning.plugins.torchtune import (
    lora_enabled,
    model_from_runtime_ref,
    qlora_enabled,
    recipe_and_config,
    runtime_overrides,
)

MODEL = "llama3_2/1B"
RUNTIME = "torchtune-llama3.2-1b"
LORA = ["model.lora_attn_modules=['q_proj']"]
QLORA = ["model.quantize_base=True"]
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


@pytest.mark.parametrize(
    ("runtime_name", "want"),
    [
        pytest.param("torchtune-llama3.2-1b", "llama3_2/1B", id="llama3.2 1B is normalized"),
        pytest.param("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B", id="qwen2.5 1.5B is normalized"),
        pytest.param("torchtune-llama3.2", "", id="fewer than three parts returns empty"),
        pytest.param("torchtune-llama3.2-1b-extra", "", id="more than three parts returns empty"),
        pytest.param("", "", id="empty name returns empty"),
    ],
)
def test_model_from_runtime_ref(runtime_name: str, want: str) -> None:
    assert model_from_runtime_ref(runtime_name) == want


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            ["batch_size=32", "model.lora_attn_modules=['q_proj','v_proj']"],
            True,
            id="lora attn modules present",
        ),
        pytest.param(["batch_size=32", "epochs=10"], False, id="no lora args"),
        pytest.param([], False, id="empty args"),
    ],
)
def test_lora_enabled(args: list[str], want: bool) -> None:
    assert lora_enabled(args) is want


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(["model.quantize_base=True"], True, id="quantize base enabled"),
        pytest.param(["model.quantize_base=False"], False, id="quantize base explicitly disabled"),
        pytest.param(
            ["model.quantize_base=True", "model.use_dora=True"],
            False,
            id="dora short-circuits even when quantize base is set",
        ),
        pytest.param(
            ["model.quantize_base=True", "model.use_dora=False"],
            True,
            id="dora explicitly disabled with quantize base set",
        ),
        pytest.param(["batch_size=32"], False, id="neither quantize base nor dora"),
        pytest.param([], False, id="empty args"),
    ],
)
def test_qlora_enabled(args: list[str], want: bool) -> None:
    assert qlora_enabled(args) is want


@pytest.mark.parametrize(
    ("nodes", "procs", "gpus", "args", "recipe", "suffix"),
    [
        pytest.param(
            1, "auto", 1, [], "full_finetune_single_device", "_full_single_device",
            id="single device full",
        ),
        pytest.param(
            1, "auto", 1, LORA, "lora_finetune_single_device", "_lora_single_device",
            id="single device lora",
        ),
        pytest.param(
            1, "auto", 1, QLORA, "lora_finetune_single_device", "_qlora_single_device",
            id="single device qlora",
        ),
        pytest.param(
            1, "auto", 4, [], "full_finetune_distributed", "_full",
            id="single node multi-gpu full",
        ),
        pytest.param(
            1, "auto", 4, LORA, "lora_finetune_distributed", "_lora",
            id="single node multi-gpu lora",
        ),
        pytest.param(
            1, "auto", 4, QLORA, "lora_finetune_distributed", "_qlora",
            id="single node multi-gpu qlora",
        ),
        pytest.param(
            2, "auto", 8, [], "full_finetune_distributed", "_full_multinode",
            id="multi-node full",
        ),
        pytest.param(
            1, 1, 4, [], "full_finetune_single_device", "_full_single_device",
            id="numProcPerNode=1 forces single device even with multiple gpus",
        ),
        pytest.param(
            1, 4, 4, [], "full_finetune_distributed", "_full",
            id="numProcPerNode>1 uses distributed",
        ),
    ],
)  # fmt: skip
def test_recipe_and_config(
    nodes: int, procs: int | str, gpus: int, args: list[str], recipe: str, suffix: str
) -> None:
    assert recipe_and_config(nodes, procs, gpus, RUNTIME, args) == (recipe, MODEL + suffix)


def _spec(step: str, container: str, command: list[str]) -> dict[str, Any]:
    pod = {"containers": [{"name": container, "command": command}]}
    rjob = {
        "template": {"metadata": {"labels": {ANCESTOR: step}}, "spec": {"template": {"spec": pod}}}
    }
    return {"replicatedJobs": [rjob]}


COMMANDS = ["output_dir=/out", "tokenizer.path=/tok", "batch_size=32"]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({}, [], id="no jobset template"),
        pytest.param(
            _spec("trainer", "node", COMMANDS),
            ["output_dir=/out", "tokenizer.path=/tok"],
            id="trainer node container returns only immutable configs",
        ),
        pytest.param(_spec("other", "node", COMMANDS), [], id="non-trainer ancestor is ignored"),
        pytest.param(_spec("trainer", "sidecar", COMMANDS), [], id="non-node container is ignored"),
    ],
)
def test_runtime_overrides(spec: dict[str, Any], want: list[str]) -> None:
    assert runtime_overrides(spec) == want
