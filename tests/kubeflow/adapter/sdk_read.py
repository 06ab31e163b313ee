"""Runs inside the Kubeflow SDK's venv: reads a TrainJob that dispatch created.

argv: kubeconfig path, namespace, TrainJob name. Prints one JSON document.
"""

import json
import sys

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient

config, namespace, name = sys.argv[1:4]
client = TrainerClient(KubernetesBackendConfig(config_file=config, namespace=namespace))
listed = [j.name for j in client.list_jobs()]
job = client.wait_for_job_status(name, status={"Complete"}, timeout=60, polling_interval=1)
print(
    json.dumps(
        {
            "listed": listed,
            "name": job.name,
            "runtime": job.runtime.name if job.runtime else None,
            "status": job.status,
            "nodes": job.num_nodes,
            "steps": sorted(s.name for s in job.steps),
        }
    )
)
