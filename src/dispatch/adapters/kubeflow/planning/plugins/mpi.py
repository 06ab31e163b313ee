"""The MPI plugin (Trainer v2.3.0 ``plugins/mpi/mpi.go``): OpenMPI ranks started over SSH.

``Validate`` (Trainer's admission webhook; refused here as ``BuildRefused`` with its message):
a TrainJob of two or more nodes on a runtime that runs its launcher as a node must find both
jobs ``launcher`` and ``node``; ``trainer.env`` must not set the ``OMPI_MCA_*`` variables the
plugin sets.

``EnforceMLPolicy``:

* the replicated job named ``node`` runs ``trainer.numNodes`` pods, one fewer (at least one)
  when ``runLauncherAsNode``, the launcher being a node too;
* slots per node: ``trainer.numProcPerNode``, else the policy's ``numProcPerNode``, which when
  it is 1 becomes the node's GPU count if that is more than 1 (``trainer.resourcesPerNode``,
  else the runtime's ``node`` container);
* jobs ``launcher`` and ``node`` get the SSH-key volume (Secret ``<trainjob>-mpi-ssh-auth``),
  their containers named ``node`` mount it at ``sshAuthMountPath``; the launcher also gets the
  hostfile volume (ConfigMap ``<trainjob>-mpi-hostfile``) mounted at ``/etc/mpi``, and its
  ``node`` container the ``OMPI_MCA_*`` variables naming the hostfile and the slots.

JobSet builder (``plugins/jobset/builder.go`` ``Trainer``): with ``runLauncherAsNode`` the
job named ``node`` gets ``trainer.env`` even without the trainer ancestor label.

``Build``: the Secret (type ``kubernetes.io/ssh-auth``, immutable) and the hostfile ConfigMap,
one line ``<host> slots=<n>`` per pod of the jobs that run ranks (``node``, and ``launcher``
when it runs as a node), both owned by the TrainJob. Trainer builds the Secret only when it
does not exist yet; creating it only where it is missing is the caller's part.

Trainer generates a new ECDSA P-521 key pair for the Secret. Rendering stays pure: both keys
hold :data:`SSH_KEY_PLACEHOLDER`, which whoever creates the Secret replaces with a real pair
(:func:`has_placeholder_keys`). Implementations other than OpenMPI raise ``UnsupportedRuntime``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import (
    BuildRefused,
    Context,
    Plugin,
    UnsupportedRuntime,
)
from dispatch.adapters.kubeflow.planning.plugins.distributed import gpus_per_node
from dispatch.adapters.kubeflow.planning.plugins.fielderrors import aggregate
from dispatch.adapters.kubeflow.planning.podspec import (
    JsonObj,
    ancestor,
    by_name,
    containers,
    pod_spec,
    upsert,
    upsert_container_env,
)
from dispatch.adapters.kubeflow.planning.runtime import NODE_CONTAINER, TRAINER_STEP

LAUNCHER = "launcher"
OPEN_MPI = "OpenMPI"
DEFAULT_SSH_MOUNT_PATH = "/root/.ssh"
SSH_AUTH_SUFFIX = "-mpi-ssh-auth"
SSH_AUTH_VOLUME = "mpi-ssh-auth"
SSH_AUTH_SECRET_TYPE = "kubernetes.io/ssh-auth"
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"
HOSTFILE_SUFFIX = "-mpi-hostfile"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_KEY = "hostfile"
#: file modes of the mounted keys (Trainer's constants, as the API stores them: decimal)
SSH_DEFAULT_MODE = 0o400
SSH_PRIVATE_KEY_MODE = 0o640
SSH_PUBLIC_KEY_MODE = 0o644
HOSTFILE_MODE = 0o444
ENV_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
ENV_KEEP_FQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"
ENV_SLOTS = "OMPI_MCA_orte_set_default_slots"
ENV_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
RSH_ARGS = "-o ConnectionAttempts=10"
RESERVED_ENV = (ENV_HOSTFILE, ENV_RSH_ARGS, ENV_KEEP_FQDN, ENV_SLOTS)
#: what both keys of a rendered Secret hold until a real pair replaces it (base64, as stored)
SSH_KEY_PLACEHOLDER = base64.b64encode(
    b"dispatch placeholder: the SSH key pair is generated when the Secret is created"
).decode()


def _policy(ctx: Context) -> Mapping[str, Any]:
    found = dig(ctx.runtime, "spec", "mlPolicy", "mpi")
    return found if isinstance(found, Mapping) else {}


def launcher_as_node(ml_policy: Any) -> bool:
    """Whether the MPI policy runs training processes on the launcher too."""
    return bool(dig(ml_policy, "mpi", "runLauncherAsNode"))


def node_as_trainer(ml_policy: Any, rjob: Mapping[str, Any]) -> bool:
    """Whether Trainer gives ``rjob`` the trainer's resources and env without the trainer
    ancestor label: the job named ``node`` when the launcher runs as a node
    (``core/trainingruntime.go`` ``newRuntimeInfo``, ``jobset/builder.go`` ``Trainer``)."""
    return launcher_as_node(ml_policy) and rjob.get("name") == NODE_CONTAINER


def has_placeholder_keys(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a rendered SSH-key Secret whose keys are still the placeholder."""
    data = obj.get("data") or {}
    return obj.get("kind") == "Secret" and SSH_KEY_PLACEHOLDER in (
        data.get(SSH_PRIVATE_KEY),
        data.get(SSH_PUBLIC_KEY),
    )


# ---------------------------------------------------------------------- Validate


def _invalid(path: str, value: Any, detail: str) -> str:
    """``field.Invalid``'s message; a value other than a number shown as JSON (Trainer's is
    Go's ``%#v`` of it)."""
    shown = json.dumps(value, separators=(",", ":")) if not isinstance(value, int) else value
    return f"{path}: Invalid value: {shown}: {detail}"


def _validate(ctx: Context) -> None:
    """``MPI.Validate``: Trainer's errors, in its order, as one refusal."""
    trainer = ctx.trainer
    if trainer is None:
        return
    errors = []
    num_nodes = trainer.get("numNodes")
    several = int(num_nodes if num_nodes is not None else 1) >= 2
    missing = ctx.rjob(LAUNCHER) is None or ctx.rjob(NODE_CONTAINER) is None
    if several and launcher_as_node(ctx.ml_policy) and missing:
        errors.append(
            _invalid(
                "spec.trainer.numNodes",
                num_nodes,
                "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does "
                "not have either launcher and node",
            )
        )
    env = list(trainer.get("env") or [])
    reserved = sorted({e.get("name") for e in env} & set(RESERVED_ENV))
    if reserved:
        errors.append(
            _invalid(
                "spec.trainer.env",
                env,
                f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
            )
        )
    if errors:
        raise BuildRefused(aggregate(errors))


# ---------------------------------------------------------------------- EnforceMLPolicy


def _runtime_resources(ctx: Context) -> Mapping[str, Any]:
    """``runtime.ExtractResourcePerNodeFromRuntime``: the resources of the first container
    ``node`` that has them, in the job named ``node`` or the trainer job."""
    for rjob in ctx.rjobs:
        if rjob.get("name") == NODE_CONTAINER or ancestor(rjob) == TRAINER_STEP:
            for container in containers(rjob):
                if container.get("name") == NODE_CONTAINER and container.get("resources"):
                    found: Mapping[str, Any] = container["resources"]
                    return found
    return {}


def _slots(ctx: Context) -> int:
    """Processes per node: the TrainJob's, else the policy's (1 becoming the GPU count)."""
    explicit = dig(ctx.trainer, "numProcPerNode")
    if explicit is not None:
        return int(explicit)
    slots = int(_policy(ctx).get("numProcPerNode") or 1)
    if slots == 1:
        per_node = dig(ctx.trainer, "resourcesPerNode")
        resources = per_node if isinstance(per_node, Mapping) else _runtime_resources(ctx)
        gpus = gpus_per_node(resources)
        if gpus > 1:
            return gpus
    return slots


def _ssh_volume(name: str) -> JsonObj:
    return {
        "name": SSH_AUTH_VOLUME,
        "secret": {
            "secretName": f"{name}{SSH_AUTH_SUFFIX}",
            "defaultMode": SSH_DEFAULT_MODE,
            "items": [
                {"key": SSH_PRIVATE_KEY, "path": "id_rsa", "mode": SSH_PRIVATE_KEY_MODE},
                {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub", "mode": SSH_PUBLIC_KEY_MODE},
                {"key": SSH_PUBLIC_KEY, "path": "authorized_keys", "mode": SSH_PUBLIC_KEY_MODE},
            ],
        },
    }


def _hostfile_volume(name: str) -> JsonObj:
    return {
        "name": HOSTFILE_VOLUME,
        "configMap": {
            "name": f"{name}{HOSTFILE_SUFFIX}",
            "items": [{"key": HOSTFILE_KEY, "path": HOSTFILE_KEY, "mode": HOSTFILE_MODE}],
        },
    }


def _same_mount_path(a: JsonObj, b: JsonObj) -> bool:
    """Trainer's ``byVolumeMountPath``."""
    return a.get("mountPath") == b.get("mountPath")


def _open_mpi_env(slots: int) -> list[JsonObj]:
    return [
        {"name": ENV_HOSTFILE, "value": f"{HOSTFILE_DIR}/{HOSTFILE_KEY}"},
        {"name": ENV_KEEP_FQDN, "value": "true"},
        {"name": ENV_SLOTS, "value": str(slots)},
        {"name": ENV_RSH_ARGS, "value": RSH_ARGS},
    ]


def _mount_and_env(ctx: Context, rjob: JsonObj, slots: int) -> None:
    """Volumes of ``launcher`` / ``node``; mounts (and the launcher's env) of their containers
    named ``node``."""
    launcher = rjob.get("name") == LAUNCHER
    volumes = pod_spec(rjob).setdefault("volumes", [])
    upsert(volumes, _ssh_volume(ctx.name), by_name)
    if launcher:
        upsert(volumes, _hostfile_volume(ctx.name), by_name)
    mount_path = _policy(ctx).get("sshAuthMountPath") or DEFAULT_SSH_MOUNT_PATH
    for container in containers(rjob):
        if container.get("name") != NODE_CONTAINER:
            continue
        mounts = container.setdefault("volumeMounts", [])
        upsert(mounts, {"name": SSH_AUTH_VOLUME, "mountPath": mount_path}, _same_mount_path)
        if launcher:
            upsert(mounts, {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR}, _same_mount_path)
            upsert_container_env(container, _open_mpi_env(slots))


def _count_nodes(ctx: Context) -> None:
    """The job named ``node`` runs ``trainer.numNodes`` pods, less the launcher when it is
    a node too (at least one)."""
    num_nodes = dig(ctx.trainer, "numNodes")
    at = next((i for i, rj in enumerate(ctx.rjobs) if rj.get("name") == NODE_CONTAINER), None)
    if num_nodes is not None and at is not None:
        as_node = launcher_as_node(ctx.ml_policy)
        ctx.counts[at] = max(int(num_nodes) - 1, 1) if as_node else int(num_nodes)


def _trainer_env(ctx: Context, rjob: JsonObj) -> None:
    """The JobSet builder's ``trainer.env`` for the job named ``node`` without the trainer
    label (it comes after its template's env, as the builder runs after this plugin)."""
    for container in containers(rjob):
        if container.get("name") == NODE_CONTAINER:
            upsert_container_env(container, list(dig(ctx.trainer, "env") or []))


# ---------------------------------------------------------------------- Build


def _hostfile(ctx: Context, slots: int) -> str:
    """One ``<host> slots=<n>`` line per pod of the jobs that run ranks, in job order."""
    as_node = launcher_as_node(ctx.ml_policy)
    lines = []
    for rjob in ctx.rjobs:
        job = rjob.get("name")
        if job == NODE_CONTAINER or (as_node and job == LAUNCHER):
            lines += [f"{host} slots={slots}\n" for host in ctx.endpoints.get(str(job), [])]
    return "".join(lines)


class MPI(Plugin):
    name = "MPI"

    def applies(self, ctx: Context) -> bool:
        return dig(ctx.ml_policy, "mpi") is not None

    def ml_policy(self, ctx: Context) -> None:
        implementation = _policy(ctx).get("mpiImplementation", OPEN_MPI)
        if implementation != OPEN_MPI:
            raise UnsupportedRuntime(
                f"mlPolicy.mpi.mpiImplementation {implementation!r} is not rendered"
            )
        _validate(ctx)
        _count_nodes(ctx)
        slots = _slots(ctx)
        for rjob in ctx.rjobs:
            if rjob.get("name") in (NODE_CONTAINER, LAUNCHER):
                _mount_and_env(ctx, rjob, slots)
            if node_as_trainer(ctx.ml_policy, rjob) and ancestor(rjob) != TRAINER_STEP:
                _trainer_env(ctx, rjob)

    def objects(self, ctx: Context) -> list[JsonObj]:
        secret: JsonObj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{ctx.name}{SSH_AUTH_SUFFIX}"},
            "type": SSH_AUTH_SECRET_TYPE,
            "immutable": True,
            "data": {SSH_PRIVATE_KEY: SSH_KEY_PLACEHOLDER, SSH_PUBLIC_KEY: SSH_KEY_PLACEHOLDER},
        }
        hostfile: JsonObj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{ctx.name}{HOSTFILE_SUFFIX}"},
            "data": {HOSTFILE_KEY: _hostfile(ctx, _slots(ctx))},
        }
        return [ctx.owned(secret), ctx.owned(hostfile)]
