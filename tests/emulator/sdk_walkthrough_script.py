"""Runs inside the SDK venv: the Kubeflow SDK's getting-started walk-through, as a user types
it, against ``dispatch emulator``: ``TrainerClient()`` reads ``$KUBECONFIG``, lists runtimes,
trains a Python function on two nodes, waits, reads the logs and deletes the job.

Prints one JSON document with what the SDK saw.
"""

import json
import os

from kubeflow.trainer import CustomTrainer, TrainerClient

#: the emulator runs no code: each pod's behaviour (log lines, run time) comes from this env
SCENARIO = {"default": {"startAfter": 1, "runFor": 3, "logs": ["epoch 1: loss 0.42", "done"]}}


def train_mnist():
    print("epoch 1: loss 0.42")


client = TrainerClient()
runtimes = [r.name for r in client.list_runtimes()]
name = client.train(
    runtime=client.get_runtime("torch-distributed"),
    trainer=CustomTrainer(
        func=train_mnist, num_nodes=2, env={"EMULATOR_SCENARIO": json.dumps(SCENARIO)}
    ),
)
done = client.wait_for_job_status(name, status={"Complete"}, timeout=60, polling_interval=1)
logs = list(client.get_job_logs(name, step="node-0"))
listed = [j.name for j in client.list_jobs()]
steps = sorted((s.name, s.status) for s in done.steps)
client.delete_job(name)
print(
    json.dumps(
        {
            "kubeconfig": os.environ["KUBECONFIG"],
            "runtimes": runtimes,
            "name": name,
            "status": done.status,
            "nodes": done.num_nodes,
            "steps": steps,
            "logs": logs,
            "listed": listed,
            "after_delete": [j.name for j in client.list_jobs()],
        }
    )
)
