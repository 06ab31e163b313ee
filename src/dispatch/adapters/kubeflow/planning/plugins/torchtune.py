"""Torch's torchtune mode (``plugins/torch/torchtune.go``): ``tune run`` gets its recipe.

Follows Trainer v2.3.0 ``torch.go`` ``EnforceMLPolicy`` and ``torchtune.go``. A TrainJob
whose ``trainer.command`` is exactly ``["tune", "run"]`` on a torch runtime is torchtune's:
its ``node`` container gets ``PET_NNODES``, ``PET_NPROC_PER_NODE`` and ``PET_NODE_RANK`` but
no master address or port (``envInjection`` targets still get them), and its command becomes

``tune run [--rdzv_endpoint=<rank-0 host>:29500] <recipe> --config <model><suffix> <overrides>``

* the rendezvous endpoint when there is more than one node, more than one process per node,
  or ``auto`` processes with more than one GPU;
* recipe and config from the node count, processes per node, GPUs per node and whether the
  args ask for LoRA (``model.lora_attn_modules``) or QLoRA (``model.quantize_base=True``
  without ``model.use_dora=True``);
* the model from the runtime's name, ``torchtune-<model>-<size>`` (``llama3.2``, ``1b`` ->
  ``llama3_2/1B``);
* the overrides: every ``output_dir=``, ``tokenizer.path=``, ``tokenizer.merges_file=`` and
  ``checkpointer.checkpoint_dir=`` item of the runtime's own trainer ``node`` command.

The TrainJob's args stay its args. Trainer's admission webhook also checks such a TrainJob
(``validateTorchTune``: a supported model, one node unless 70B, the LoRA and QLoRA limits, no
runtime-owned config in the args); the renderer does not, as Trainer's build does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context
from dispatch.adapters.kubeflow.planning.plugins.distributed import (
    TRAINER_PORT,
    gpus_per_node,
    rank0_host,
    resources_per_node,
)
from dispatch.adapters.kubeflow.planning.podspec import JsonObj, ancestor, containers
from dispatch.adapters.kubeflow.planning.runtime import NODE_CONTAINER, TRAINER_STEP

ENTRYPOINT = ("tune", "run")
#: the torchrun variables torchtune does not get on the trainer (it has the endpoint arg)
MASTER_ENV = ("PET_MASTER_ADDR", "PET_MASTER_PORT")
#: config items the runtime owns (its command sets them; the TrainJob must not)
IMMUTABLE_CONFIGS = frozenset(
    {"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}
)
LORA_ATTN_MODULES = "model.lora_attn_modules"
QUANTIZE_BASE = "model.quantize_base"
USE_DORA = "model.use_dora"

#: (recipe, config suffix) of each way to fine-tune
FULL_SINGLE_DEVICE = ("full_finetune_single_device", "_full_single_device")
LORA_SINGLE_DEVICE = ("lora_finetune_single_device", "_lora_single_device")
QLORA_SINGLE_DEVICE = ("lora_finetune_single_device", "_qlora_single_device")
FULL_MULTI_DEVICE = ("full_finetune_distributed", "_full")
FULL_MULTI_NODE = ("full_finetune_distributed", "_full_multinode")
LORA_DISTRIBUTED = ("lora_finetune_distributed", "_lora")
QLORA_DISTRIBUTED = ("lora_finetune_distributed", "_qlora")


def applies(trainer: Mapping[str, Any] | None) -> bool:
    """Whether the TrainJob's trainer runs torchtune (its command is ``tune run``)."""
    command = (trainer or {}).get("command")
    return isinstance(command, list) and tuple(command) == ENTRYPOINT


def model_from_runtime_ref(runtime_name: str) -> str:
    """``getModelFromRuntimeRef``: ``torchtune-llama3.2-1b`` -> ``llama3_2/1B``; "" unless
    the name has exactly three ``-`` separated parts."""
    parts = runtime_name.split("-")
    if len(parts) != 3:
        return ""
    return f"{parts[1].replace('.', '_')}/{parts[2].upper()}"


def lora_enabled(args: Sequence[str]) -> bool:
    """``isLoraConfigEnabled``: some arg mentions ``model.lora_attn_modules``."""
    return any(LORA_ATTN_MODULES in arg for arg in args)


def _bool_arg(args: Sequence[str], item: str) -> bool:
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and item in key and value.strip().lower() == "true":
            return True
    return False


def qlora_enabled(args: Sequence[str]) -> bool:
    """``isUseQLoraFinetune``: ``model.quantize_base=True`` unless ``model.use_dora=True``."""
    return not _bool_arg(args, USE_DORA) and _bool_arg(args, QUANTIZE_BASE)


def recipe_and_config(
    nodes: int, procs: int | str, gpus: int, runtime_name: str, args: Sequence[str]
) -> tuple[str, str]:
    """``getRecipeAndConfig``: ``procs`` is the processes per node, a number or ``"auto"``."""
    recipe, suffix = _way(nodes, procs, gpus, args)
    return recipe, f"{model_from_runtime_ref(runtime_name)}{suffix}"


def _way(nodes: int, procs: int | str, gpus: int, args: Sequence[str]) -> tuple[str, str]:
    if nodes == 1 and (procs == 1 or gpus == 1):
        if qlora_enabled(args):
            return QLORA_SINGLE_DEVICE
        return LORA_SINGLE_DEVICE if lora_enabled(args) else FULL_SINGLE_DEVICE
    if nodes == 1 and qlora_enabled(args):
        return QLORA_DISTRIBUTED
    if nodes == 1 and lora_enabled(args):
        return LORA_DISTRIBUTED
    return FULL_MULTI_NODE if nodes > 1 else FULL_MULTI_DEVICE


def runtime_overrides(spec: Mapping[str, Any]) -> list[str]:
    """``extractOverridesFromRuntime``: the immutable config items of the ``node`` commands of
    the runtime's trainer jobs, in order."""
    found: list[str] = []
    for rjob in spec.get("replicatedJobs") or []:
        if ancestor(rjob) != TRAINER_STEP:
            continue
        for container in containers(rjob):
            if container.get("name") == NODE_CONTAINER:
                command = container.get("command") or []
                found += [
                    item
                    for item in command
                    if isinstance(item, str) and item.split("=")[0] in IMMUTABLE_CONFIGS
                ]
    return found


def procs_per_node(nproc: str) -> int | str:
    """The renderer's ``PET_NPROC_PER_NODE`` value as Trainer's ``IntOrString``."""
    return nproc if nproc == "auto" else int(nproc)


def command(ctx: Context, nodes: int, nproc: str) -> list[str]:
    """The torchtune trainer's command: the TrainJob's ``tune run`` and what Trainer adds."""
    trainer = ctx.trainer or {}
    procs = procs_per_node(nproc)
    gpus = gpus_per_node(resources_per_node(ctx))
    added: list[str] = []
    if nodes > 1 or (isinstance(procs, int) and procs > 1) or (procs == "auto" and gpus > 1):
        added.append(f"--rdzv_endpoint={rank0_host(ctx.name)}:{TRAINER_PORT}")
    runtime_name = str(dig(ctx.trainjob, "spec", "runtimeRef", "name") or "")
    args = [str(arg) for arg in trainer.get("args") or []]
    recipe, config = recipe_and_config(nodes, procs, gpus, runtime_name, args)
    added += [recipe, "--config", config, *runtime_overrides(ctx.spec)]
    return [*trainer.get("command", []), *added]


def without_master(env: list[JsonObj]) -> list[JsonObj]:
    """The torchrun variables a torchtune trainer gets."""
    return [var for var in env if var.get("name") not in MASTER_ENV]
