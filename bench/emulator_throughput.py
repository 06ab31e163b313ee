"""Benchmark: N TrainJobs created and run to completion through the Kubernetes API emulator.

Every TrainJob goes the whole way: Trainer (snapshot, JobSet), JobSet (Job), Job (pods),
scheduler, kubelet (Running, exit 0), then back up to TrainJob ``Complete``. Jobs are created
through the store on the cluster's loop (what the HTTP handlers call), in batches.

    python bench/emulator_throughput.py --jobs 1000
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time

from dispatch.testing.k8s import Cluster, ClusterConfig
from dispatch.testing.k8s.controllers import standard_controllers
from dispatch.testing.k8s.runtimes import torch_distributed
from dispatch.testing.k8s.scenario import PodBehaviour, Scenario


async def run(jobs: int, nodes: int, scale: float) -> float:
    config = ClusterConfig(
        nodes=tuple(f"node-{i}" for i in range(nodes)),
        node_capacity={"cpu": "64", "memory": "256Gi", "pods": "500"},
        time_scale=scale,
        compaction_window=1e9,
        controllers=standard_controllers(Scenario(default=PodBehaviour(start_after=1, run_for=5))),
    )
    async with Cluster(config) as cluster:
        store = cluster.store
        cluster_rt = cluster.rtype("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")
        store.create(cluster_rt, None, torch_distributed())
        tj_type = cluster.rtype("trainer.kubeflow.org/v1alpha1", "TrainJob")
        started = time.perf_counter()
        for i in range(jobs):
            body = {
                "metadata": {"name": f"bench-{i:05d}"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
            }
            store.create(tj_type, "default", body)
            if i % 50 == 49:
                await asyncio.sleep(0)
        while True:
            done = sum(
                1
                for tj in store.objects(tj_type)
                if any(c["type"] == "Complete" and c["status"] == "True"
                       for c in (tj.get("status") or {}).get("conditions") or [])
            )  # fmt: skip
            if done == jobs:
                break
            if cluster.controller_errors:
                raise RuntimeError(f"controller failed: {cluster.controller_errors}")
            await asyncio.sleep(0.2)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--time-scale", type=float, default=100.0)
    args = parser.parse_args()
    elapsed = asyncio.run(run(args.jobs, args.nodes, args.time_scale))
    print(
        f"{args.jobs} TrainJobs completed in {elapsed:.1f} s "
        f"({args.jobs / elapsed:.1f} jobs/s) on {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}"
    )


if __name__ == "__main__":
    main()
