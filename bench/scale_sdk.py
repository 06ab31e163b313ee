"""Child process of the scale benchmark, run in the Kubeflow SDK's own virtual environment
(tests/emulator/sdk_venv.py): one ``TrainerClient.wait_for_job_status`` per TrainJob, each in
its own thread with its own client (as N separate scripts or notebooks would), with the SDK's
defaults (``polling_interval=2`` real seconds, ``timeout=600``, ``status={"Complete"}``).

    <sdk-venv>/bin/python bench/scale_sdk.py PLAN.json OUT.json

PLAN: {"kubeconfig", "namespace", "names": [...]}. OUT: per TrainJob the time the call
returned or raised (wall clock) and what it said; this process's CPU seconds and peak RSS;
``stuck``, the TrainJobs whose call had not returned when none had for ``STUCK_AFTER``
seconds (seen at N = 5,000: a few waiters blocked for good, using no CPU).
Handshake: once every client is built this writes OUT.clients; the benchmark then creates
the TrainJobs and writes OUT.go, and the waiters start. This file imports nothing of
dispatch: the SDK venv does not have it.
"""

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from peak_rss import peak_rss_mib  # a sibling: this file runs as a script

clients = []
#: seconds with waiters left and none of them returning, after which they are reported stuck
STUCK_AFTER = 300.0


def wait(config, name, out, ready):
    client = TrainerClient(config)
    clients.append(client)
    ready.wait()
    try:
        job = client.wait_for_job_status(name)
        said = job.status
    except RuntimeError as exc:  # what the SDK raises for a Failed TrainJob
        said = f"RuntimeError: {exc}"
    except TimeoutError as exc:
        said = f"TimeoutError: {exc}"
    out[name] = {"reportedAt": time.time(), "said": said}


def main():
    plan = json.loads(Path(sys.argv[1]).read_text())
    config = KubernetesBackendConfig(config_file=plan["kubeconfig"], namespace=plan["namespace"])
    out = {}
    ready = threading.Event()
    threads = [
        threading.Thread(target=wait, args=(config, name, out, ready), daemon=True)
        for name in plan["names"]
    ]
    for thread in threads:
        thread.start()
    while len(clients) < len(threads):  # every client built (each reads one ConfigMap)
        time.sleep(0.05)
    Path(sys.argv[2] + ".clients").touch()
    go = Path(sys.argv[2] + ".go")
    while not go.exists():  # the benchmark creates the TrainJobs, then says go
        time.sleep(0.01)
    began = time.time()
    ready.set()
    progress = Path(sys.argv[2] + ".progress")  # for whoever watches a long run
    changed, last = time.time(), len(threads)
    while waiting := sum(thread.is_alive() for thread in threads):
        now = time.time()
        if waiting != last:
            changed, last = now, waiting
        elif now - changed > STUCK_AFTER:
            break  # these waiters use no CPU and will not return: say so, stop waiting
        progress.write_text(f"{now - began:.0f} s: {waiting} waiters still waiting\n")
        time.sleep(10)
    stuck = sorted(
        name for thread, name in zip(threads, plan["names"], strict=True) if thread.is_alive()
    )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "began": began,
        "finished": time.time(),
        "jobs": out,
        "cpuSeconds": usage.ru_utime + usage.ru_stime,
        "peakRssMiB": peak_rss_mib(usage),
        "stuck": stuck,
    }
    Path(sys.argv[2]).write_text(json.dumps(result))
    if stuck:  # the stuck waiters' client pools would keep the interpreter from exiting
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
