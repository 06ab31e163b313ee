"""Runs inside the SDK venv: the Kubeflow SDK's TrainerClient against the emulator.

argv: kubeconfig path. Prints one JSON document with what the SDK saw.
"""

import json
import sys

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainerContainer, TrainerClient

client = TrainerClient(KubernetesBackendConfig(config_file=sys.argv[1], namespace="default"))
runtimes = [r.name for r in client.list_runtimes()]
name = client.train(
    runtime=client.get_runtime("torch-distributed"),
    trainer=CustomTrainerContainer(image="busybox", num_nodes=2, env={"EPOCHS": "1"}),
)
job = client.wait_for_job_status(name, status={"Complete"}, timeout=60, polling_interval=1)
seen = client.get_job(name)
steps = sorted(s.name for s in seen.steps)
client.delete_job(name)
print(
    json.dumps(
        {
            "runtimes": runtimes,
            "name": name,
            "status": job.status,
            "after": seen.status,
            "steps": steps,
            "nodes": seen.num_nodes,
        }
    )
)
