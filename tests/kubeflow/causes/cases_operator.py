"""Expectations for the training-operator v1 job dumps in ``tests/dumps/reports/`` (``pytorchjob-*``,
``tfjob-*``, ``mpijob-*`` (kubeflow.org/v2beta1, mpi-operator), ``xgboostjob-*``, ``paddlejob-*``,
``jaxjob-*``).

Ranks: PyTorchJob master 0, worker i -> i + 1 (a Master replica exists); the other kinds use the
pod's ``training.kubeflow.org/replica-index``.
"""

from __future__ import annotations

from tests.kubeflow.causes.report_cases import Case

CASES: dict[str, Case] = {
    # ------------------------------------------------------------------------------ PyTorchJob
    "pytorchjob-oom-crashloop.yaml": Case(
        kind="PyTorchJob",
        name="bert-finetune",
        state="failed",
        cause="out_of_memory",
        first=(1, 137),
        says="OOMKilled",
        proofs=("Pod/bert-finetune-worker-0#status.containerStatuses[pytorch]",),
        source="kubeflow/training-operator#1589",
        why="restartPolicy OnFailure restarted worker-0's container in place after each OOMKill "
        "(restartCount 2, lastState OOMKilled 137, now CrashLoopBackOff), a planned restart; when "
        "worker-1 also OOMed the restarts summed to runPolicy.backoffLimit 3 and the operator failed "
        "the job (PyTorchJobFailed, backoff limit) and deleted the pods (still terminating). The "
        "first failure is worker-0's OOM (worker 0 -> rank 1).",
    ),
    "pytorchjob-app-error.yaml": Case(
        kind="PyTorchJob",
        name="pytorchjob",
        state="failed",
        cause="app_error",
        first=(1, 1),
        says="code 1",
        proofs=("Pod/pytorchjob-worker-0#status.containerStatuses[pytorch]",),
        source="kubeflow/training-operator#1579",
        why="the report's job: worker `sleep 20 && exit 1` with restartPolicy Never, so the operator "
        "failed the PyTorchJob (1 Worker replica(s) failed) while the master kept running; "
        "worker 0 is rank 1, its main container exited 1 on its own.",
    ),
    "pytorchjob-evicted-replaced.yaml": Case(
        kind="PyTorchJob",
        name="mnist-ddp",
        state="running",
        cause=None,
        first=None,
        says="low on resource: memory",
        proofs=("Pod/mnist-ddp-worker-1#status.conditions[DisruptionTarget]", "#metadata.uid"),
        source="kubeflow/training-operator#301",
        why="the kubelet evicted worker-1 for memory pressure (status.reason Evicted, no startTime, "
        "DisruptionTarget TerminationByKubelet); restartPolicy OnFailure made the operator delete "
        "it and create a replacement with the same name (new uid, PyTorchJobRestarting), which "
        "runs: a restart the spec planned, nothing ended the job. The evicted pod is an earlier "
        "`kubectl get pod` document of the same name, first in the file.",
    ),
    "pytorchjob-init-backoff.yaml": Case(
        kind="PyTorchJob",
        name="random-exp-jw6qxmrm",
        state="failed",
        cause="start_failure",
        first=(1, 1),
        says="init-pytorch",
        proofs=("#BackOff",),
        source="kubeflow/training-operator#2034",
        why="worker-0's init container init-pytorch (the operator's wait-for-master nslookup loop) "
        "gave up and exited 1 three times; the kubelet backs it off (event BackOff, fieldPath "
        "spec.initContainers{init-pytorch}, pod Init:CrashLoopBackOff), so rank 1 can never "
        "start. Like the TrainJob image-pull dump, no terminal condition is needed: it cannot "
        "proceed.",
    ),
    "pytorchjob-unschedulable.yaml": Case(
        kind="PyTorchJob",
        name="pytorch-dist-mnist-nccl",
        state="queued",
        cause="no_capacity",
        first=(0, None),
        says="Insufficient nvidia.com/gpu",
        proofs=("Pod/pytorch-dist-mnist-nccl-master-0#status.conditions[PodScheduled]",),
        source="kubeflow/pytorch-operator#304",
        why="master and worker have been Pending PodScheduled=False Unschedulable ('3 Insufficient "
        "nvidia.com/gpu') for 30 minutes, past the 10-minute patience, and the PyTorchJob has no "
        "terminal condition: queued, no capacity; the master is rank 0.",
        args=("--now", "2025-01-20T14:30:00Z"),
    ),
    "pytorchjob-succeeded.yaml": Case(
        kind="PyTorchJob",
        name="pytorch-dist-mnist-gloo",
        state="succeeded",
        cause=None,
        first=None,
        says="completed",
        proofs=("PyTorchJob/pytorch-dist-mnist-gloo#status.conditions[Succeeded]",),
        source="kubeflow/pytorch-operator#120",
        why="Succeeded=True (PyTorchJobSucceeded) with the master and both workers Completed "
        "(exit 0); cleanPodPolicy None kept the pods.",
    ),
    "pytorchjob-pods-gone.yaml": Case(
        kind="PyTorchJob",
        name="cleanpod-backoff-repro",
        state="failed",
        cause="unknown",
        first=None,
        says="no pods",
        proofs=("PyTorchJob/cleanpod-backoff-repro#status.conditions[Failed]",),
        source="kubeflow/training-operator#3419",
        why="only the PyTorchJob is left: the operator deleted every pod on the backoff-limit path "
        "despite cleanPodPolicy None (the report's bug) and the events expired. Failed=True says "
        "it failed, not why; replicaStatuses (active 1 each) and Running (now False) show pods "
        "did exist, so the summary must not say none were created.",
    ),
    # ------------------------------------------------------------------------------ TFJob
    "tfjob-image-pull.yaml": Case(
        kind="TFJob",
        name="dist-mnist",
        state="failed",
        cause="start_failure",
        first=(0, None),
        says="ImagePullBackOff",
        proofs=("Pod/dist-mnist-ps-0#status.containerStatuses[tensorflow]",),
        source="kubeflow/training-operator#2001",
        why="all replicas use an image tag that does not exist; ps-0 (replica-index 0) failed to "
        "pull first (ErrImagePull 06:00:06) and every pod sits in ImagePullBackOff for 40 "
        "minutes while the TFJob stays Created, as in the report; the pods cannot start.",
    ),
    "tfjob-cancelled.yaml": Case(
        kind="TFJob",
        name="t2t-train-test",
        state="cancelled",
        cause="cancelled",
        first=None,
        says="deleted",
        proofs=("TFJob/t2t-train-test#metadata.deletionTimestamp",),
        source="kubeflow/training-operator#500",
        why="a user deleted the running TFJob with foreground deletion (deletionTimestamp "
        "11:20:00, finalizer foregroundDeletion); the garbage collector then deleted the pods "
        "and worker-0's exit 143 at 11:20:03 is a consequence of that deletion, not a failure.",
    ),
    # ------------------------------------------------------------------------------ MPIJob
    "mpijob-node-lost.yaml": Case(
        kind="MPIJob",
        name="tf-bert-mpi",
        state="failed",
        cause="node_lost",
        first=(1, None),
        says="not ready",
        proofs=("Node/gpu-node-7#status.conditions[Ready]",),
        source="kubeflow/mpi-operator#152",
        why="gpu-node-7 stopped posting status (Ready=Unknown 10:40:20, unreachable taints) under "
        "worker-1 (replica-index 1); mpirun lost its daemon there ('ORTE has lost communication "
        "with a remote daemon') and the launcher exited 1 at 10:42:31, so the launcher Job hit "
        "backoffLimit 0 and the MPIJob failed; the taint manager deleted the worker later "
        "(DisruptionTarget DeletionByTaintManager). The node loss came first.",
    ),
    "mpijob-preempted.yaml": Case(
        kind="MPIJob",
        name="tensorflow-benchmarks",
        state="failed",
        cause="preempted",
        first=(1, None),
        says="preempt",
        proofs=("Pod/tensorflow-benchmarks-worker-1#status.conditions[DisruptionTarget]",),
        source="",
        why="no public report with these objects was found: written from kube-scheduler and "
        "mpi-operator v2 behaviour. The scheduler preempted worker-1 (priorityClass batch-low) "
        "for a higher-priority pod (DisruptionTarget PreemptionByScheduler, event Preempted) at "
        "14:20:00; the launcher's mpirun exited 1 one second later (a peer of the lost rank), "
        "the launcher Job failed and with it the MPIJob.",
    ),
    # ------------------------------------------------------------------------------ XGBoostJob
    "xgboostjob-deadline.yaml": Case(
        kind="XGBoostJob",
        name="xgboost-dist-iris-test-train",
        state="failed",
        cause="timeout",
        first=None,
        says="deadline",
        proofs=("XGBoostJob/xgboost-dist-iris-test-train#status.conditions[Failed]",),
        source="kubeflow/training-operator#963",
        why="runPolicy.activeDeadlineSeconds 3600 passed: the operator's common ReconcileJobs set "
        "Failed with reason XGBoostJobFailed and message 'Job ... has failed because it was "
        "active longer than specified deadline' (it has no separate deadline reason) and deleted "
        "every pod (still terminating); no rank failed before that.",
    ),
    # ------------------------------------------------------------------------------ PaddleJob
    "paddlejob-kueue-preempted.yaml": Case(
        kind="PaddleJob",
        name="paddle-simple-cpu",
        state="failed",
        cause="preempted",
        first=None,
        says="Preempted",
        proofs=("Workload/paddlejob-paddle-simple-cpu-5f1d2#status.conditions[Evicted]",),
        source="kubernetes-sigs/kueue#7350",
        why="the PaddleJob (queue-name user-queue) ran 45 minutes (PodsReady=True, pods Running) "
        "until Kueue evicted its Workload for a higher-priority one (Evicted=Preempted, "
        "Preempted=InClusterQueue, event Stopped) and suspended it; the operator set "
        "Suspended/PaddleJobSuspended and is deleting the pods. Eviction after ranks started -> "
        "preempted; no rank is to blame. The Workload conditions follow the report's shape.",
    ),
    # ------------------------------------------------------------------------------ JAXJob
    "jaxjob-oom.yaml": Case(
        kind="JAXJob",
        name="jaxjob-simple",
        state="failed",
        cause="out_of_memory",
        first=(1, 137),
        says="OOMKilled",
        proofs=("Pod/jaxjob-simple-worker-1#status.containerStatuses[jax]",),
        source="",
        why="no public JAXJob report with pod objects was found: written from the JAX controller "
        "(release-1.9). worker-1 (replica-index 1) was OOMKilled (137) with restartPolicy Never, "
        "so the operator failed the job (1 Worker replica(s) failed); worker-0 still runs.",
    ),
}
