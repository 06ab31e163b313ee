"""`dispatch emulator`: an emulated Kubernetes cluster with Kubeflow Trainer, JobSet and
optionally Kueue, in the foreground, for trying Kubeflow (with kubectl, the Kubeflow SDK or
dispatch) without a cluster.

The command builds the cluster (:func:`dispatch.testing.k8s.kubeflow.kubeflow_cluster_config`),
installs Trainer's default runtimes, writes a kubeconfig (0600) and prints how to point each
client at it, then serves until SIGINT or SIGTERM: it stops the controllers and the server,
removes the kubeconfig it wrote and exits 0. Nothing is persisted: every start is an empty
cluster. The kubeconfig carries the port, so the default port is any free one.
"""

from __future__ import annotations

import asyncio
import errno
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from dispatch.cli.common import EXIT_USAGE, emit_json, fail, output_option

if TYPE_CHECKING:
    from dispatch.testing.k8s.cluster import Cluster, ClusterConfig

#: an emulated node: a training node of a GPU cluster (the tutorial's job asks 8 CPUs, 32Gi
#: and 2 GPUs on each of 4 nodes)
NODE_CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "110"}
VERSIONS = "Kubeflow Trainer v2.3, JobSet v0.12"
KUEUE_VERSION = "Kueue v0.17"


def default_kubeconfig() -> Path:
    """Under dispatch's state directory, next to its records (``$DISPATCH_STATE_DIR``)."""
    from dispatch.config import state_dir

    return state_dir() / "emulator" / "kubeconfig"


def describe(
    *,
    url: str,
    kubeconfig: Path,
    config: ClusterConfig,
    runtimes: list[str],
    kueue: bool,
    namespace: str,
    dispatch_config: Path,
) -> dict[str, Any]:
    """What is running and how to reach it, as data (``-o json`` prints it as it is)."""
    from dispatch.testing.k8s.kubeflow import CLUSTER_QUEUE, LOCAL_QUEUE

    return {
        "server": url,
        "kubernetesVersion": config.git_version,
        "components": VERSIONS.split(", ") + ([KUEUE_VERSION] if kueue else []),
        "kubeconfig": str(kubeconfig),
        "context": "emulator",
        "namespaces": list(config.namespaces),
        "nodes": list(config.nodes),
        "nodeCapacity": dict(config.node_capacity),
        "timeScale": config.time_scale,
        "runtimes": runtimes,
        "kueue": {"clusterQueue": CLUSTER_QUEUE, "localQueue": LOCAL_QUEUE} if kueue else None,
        "env": {"KUBECONFIG": str(kubeconfig)},
        "dispatchConfig": str(dispatch_config),
        "dispatchCluster": {
            "name": "emulator",
            "adapter": "kubeflow",
            "kubeconfig": str(kubeconfig),
            "namespace": namespace,
        },
    }


def render(info: dict[str, Any]) -> str:
    """The text a person reads: what runs, then one paragraph per client."""
    nodes, capacity = info["nodes"], info["nodeCapacity"]
    each = ", ".join(f"{k} {v}" for k, v in capacity.items() if k != "pods")
    entry = info["dispatchCluster"]
    queue = info["kueue"]
    lines = [
        f"dispatch emulator: an emulated Kubernetes {info['kubernetesVersion']} cluster with "
        + ", ".join(info["components"]),
        f"  API server   {info['server']} (plain HTTP on loopback, no authentication)",
        f"  nodes        {len(nodes)} ({nodes[0]} .. {nodes[-1]}), each {each}",
        f"  namespaces   {', '.join(info['namespaces'])}",
        f"  runtimes     ClusterTrainingRuntime {', '.join(info['runtimes'])}",
        f"  time         {info['timeScale']:g}x (emulated seconds per real second)",
        "  pods         run no code: each container runs 5 s and exits 0 (a pod's",
        "               EMULATOR_SCENARIO env or --scenario says otherwise)",
    ]
    if queue:
        lines.append(
            f"  kueue        ClusterQueue {queue['clusterQueue']}, LocalQueue "
            f"{queue['localQueue']} in every namespace (label kueue.x-k8s.io/queue-name)"
        )
    lines += [
        "",
        "kubectl:",
        f"  export KUBECONFIG={info['kubeconfig']}",
        "  kubectl get clustertrainingruntimes",
        "",
        "Kubeflow SDK (TrainerClient() reads $KUBECONFIG):",
        f"  export KUBECONFIG={info['kubeconfig']}",
        "  python -c 'from kubeflow.trainer import TrainerClient; "
        "print(TrainerClient().list_runtimes())'",
        "",
        f"dispatch (a cluster entry for {info['dispatchConfig']}):",
        "  clusters:",
        f"    - name: {entry['name']}",
        f"      adapter: {entry['adapter']}",
        f"      kubeconfig: {entry['kubeconfig']}",
        f"      namespace: {entry['namespace']}",
        "",
        "Stop with Ctrl-C: the cluster and everything in it is gone, the kubeconfig removed.",
    ]
    return "\n".join(lines)


async def serve(
    config: ClusterConfig,
    kubeconfig: Path,
    namespace: str,
    ready: Callable[[Cluster, list[str]], None],
) -> None:
    """Start the cluster, install the runtimes, write the kubeconfig, call ``ready``; then
    serve until SIGINT or SIGTERM, and stop everything. A signal during startup is honoured
    once the cluster is up."""
    from dispatch.testing.k8s.cluster import Cluster
    from dispatch.testing.k8s.kubeconfig import write_kubeconfig
    from dispatch.testing.k8s.kubeflow import install_default_runtimes

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    cluster = await Cluster(config).start()
    try:
        runtimes = install_default_runtimes(cluster)
        write_kubeconfig(kubeconfig, cluster.url, namespace)
        ready(cluster, runtimes)
        await stopping.wait()
    finally:
        await cluster.stop()


@click.command("emulator")
@click.option(
    "--kueue", is_flag=True, help="Also run Kueue, with one ClusterQueue for the cluster."
)
@click.option(
    "--nodes",
    type=click.IntRange(1, 500),
    default=4,
    show_default=True,
    help="Emulated nodes (node-1 .. node-N).",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(0, 64),
    default=8,
    show_default=True,
    help="nvidia.com/gpu on each node (0: CPU-only nodes).",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(0, None, min_open=True),
    default=1.0,
    show_default=True,
    help="Emulated seconds per real second (60: a minute of cluster time per second).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Loopback port of the API server (0: any free port; the kubeconfig names it).",
)
@click.option(
    "--kubeconfig",
    "kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the kubeconfig (default: emulator/kubeconfig in dispatch's state dir).",
)
@click.option(
    "--namespace",
    "-n",
    "namespaces",
    multiple=True,
    help="A namespace to create besides 'default' (repeatable); the first is the kubeconfig's.",
)
@click.option(
    "--scenario",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="How pods behave and cluster events (YAML; see dispatch.testing.k8s.scenario).",
)
@output_option
def command(
    kueue: bool,
    nodes: int,
    gpus_per_node: int,
    time_scale: float,
    port: int,
    kubeconfig: Path | None,
    namespaces: tuple[str, ...],
    scenario: Path | None,
    output: str,
) -> None:
    """Run an emulated Kubernetes cluster with Kubeflow Trainer and JobSet until Ctrl-C.

    Point kubectl, the Kubeflow SDK or dispatch at it with the kubeconfig it writes; the
    commands are printed once it is ready (-o json: one object). Time runs at 1x unless
    --time-scale says otherwise.
    """
    try:
        from dispatch.testing.k8s.errors import ApiError
        from dispatch.testing.k8s.kubeconfig import is_emulator_kubeconfig
        from dispatch.testing.k8s.kubeflow import kubeflow_cluster_config
        from dispatch.testing.k8s.scenario import Scenario
    except ImportError as exc:
        fail(
            f"dispatch emulator needs the kubeflow extra ({exc.name} is missing): "
            "pip install 'dispatch-train[kubeflow]'",
            code=EXIT_USAGE,
            output=output,
        )
    from dispatch.config import default_config_path

    path = (kubeconfig or default_kubeconfig()).expanduser().absolute()
    if path.exists() and not is_emulator_kubeconfig(path):
        fail(
            f"{path} exists and is not a kubeconfig dispatch emulator wrote; it is left "
            "alone: choose another path with --kubeconfig",
            code=EXIT_USAGE,
            output=output,
        )
    try:
        behaviour = Scenario.from_text(scenario.read_text()) if scenario else None
    except (ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:
        fail(f"{scenario}: not a scenario: {exc}", code=EXIT_USAGE, output=output)
    ordered = dict.fromkeys(("default", *namespaces))
    namespace = namespaces[0] if namespaces else "default"
    config = kubeflow_cluster_config(
        nodes=nodes,
        node_capacity=NODE_CAPACITY,
        gpus_per_node=gpus_per_node,
        kueue=kueue,
        time_scale=time_scale,
        namespaces=tuple(ordered),
        scenario=behaviour,
        port=port,
    )

    def ready(cluster: Cluster, runtimes: list[str]) -> None:
        info = describe(
            url=cluster.url,
            kubeconfig=path,
            config=config,
            runtimes=runtimes,
            kueue=kueue,
            namespace=namespace,
            dispatch_config=default_config_path(),
        )
        if output == "json":
            emit_json(info)
        else:
            click.echo(render(info))

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        asyncio.run(serve(config, path, namespace, ready))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} is in use: choose another with --port, or 0",
                code=EXIT_USAGE,
                output=output,
            )
        raise
    except ApiError as exc:  # the cluster refused what it was asked to start with
        fail(f"cannot start the emulator: {exc.message}", code=EXIT_USAGE, output=output)
    finally:
        path.unlink(missing_ok=True)
