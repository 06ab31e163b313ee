"""Expectations for the bare JobSet, batch Job (with and without Kueue) and non-dispatch TrainJob
dumps in ``tests/dumps/reports/`` (``jobset-*``, ``job-*``, ``kueue-job-*``, ``trainjob-*``)."""

from __future__ import annotations

from tests.kubeflow.causes.report_cases import Case

CASES: dict[str, Case] = {
    # ---------------------------------------------------------------- JobSet
    "jobset-maxrestarts-exhausted.yaml": Case(
        kind="JobSet",
        name="failure-policy",
        state="failed",
        cause="app_error",
        first=(3, 1),
        says="code 1",
        proofs=(
            "Pod/failure-policy-workers-0-1-7rmxq#status.containerStatuses[worker]",
            "JobSet/failure-policy#status.conditions[Failed]",
        ),
        source="kubernetes-sigs/jobset#96",
        why="failurePolicy.maxRestarts 2 planned the two restarts (status.restarts 2), so they are "
        "not a cause; the third incarnation's workers index 1 exited 1 and the JobSet failed "
        "ReachedMaxRestarts: rank = job-global-index 1 * 2 pods + completion index 1 = 3.",
    ),
    "jobset-leader-preempted.yaml": Case(
        kind="JobSet",
        name="low-priority-train",
        state="failed",
        cause="preempted",
        first=(0, None),
        says="preempt",
        proofs=("Pod/low-priority-train-leader-0-0-8vd2k#status.conditions[DisruptionTarget]",),
        source="kubernetes-sigs/jobset#682",
        why="kube-scheduler preempted the leader (DisruptionTarget PreemptionByScheduler, event "
        "Preempted) at 13:30:00; the worker that exited 1 two seconds later lost its leader, "
        "so the infrastructure cause wins; backoffLimit 0 and no failurePolicy failed the JobSet.",
    ),
    "jobset-restarted-pods-gone.yaml": Case(
        kind="JobSet",
        name="max-restarts",
        state="failed",
        cause="unknown",
        first=None,
        says="ReachedMaxRestarts",
        proofs=("JobSet/max-restarts#status.conditions[Failed]",),
        source="kubernetes-sigs/jobset#574",
        why="read days later: pods deleted and events expired, only the JobSet (restarts 1, Failed "
        "ReachedMaxRestarts) and its failed Job (status.failed 3) remain, which prove ranks ran "
        "but not why they failed; the summary must not claim pods were never created.",
    ),
    "jobset-kueue-exceeds-quota.yaml": Case(
        kind="JobSet",
        name="sleep-job-8kq2n",
        state="queued",
        cause="no_capacity",
        first=None,
        says="maximum capacity",
        proofs=("Workload/jobset-sleep-job-8kq2n-4c1d7#status.conditions[QuotaReserved]",),
        source="kubernetes-sigs/kueue#2096",
        why="still suspended by Kueue and its Workload says ExceedsMaxQuota (24 cpu requested > "
        "20 maximum capacity): it can never be admitted as it stands.",
    ),
    "jobset-dispatch-unplanned-restart.yaml": Case(
        kind="JobSet",
        name="llama-ft-q9z4t-1",
        state="running",
        cause="unplanned_recovery",
        first=None,
        says="restart",
        proofs=("#RestartJobSetFailurePolicyAction",),
        source="",
        why="the JobSet of a dispatch TrainJob (labels dispatch.dev/job, owner TrainJob) restarted "
        "once (status.restarts 1) and runs again; dispatch's TrainJobs forbid restarts, so the "
        "re-run is unplanned whatever failurePolicy the runtime put on the JobSet. No public "
        "report: written from the JobSet controller's behaviour.",
    ),
    # ---------------------------------------------------------------- batch Job
    "job-oom-backofflimit.yaml": Case(
        kind="Job",
        name="train-resnet",
        state="failed",
        cause="out_of_memory",
        first=(1, 137),
        says="OOMKilled",
        proofs=("Pod/train-resnet-1-m9t4z#status.containerStatuses[trainer]",),
        source="kubernetes/kubernetes#74848",
        why="restartPolicy OnFailure restarted index 1 in place (planned) after each OOMKill; the "
        "6th restart reached backoffLimit 6, the Job failed BackoffLimitExceeded and deleted "
        "its pods; the first failure is the OOMKilled container (lastState, exit 137).",
    ),
    "job-deadline.yaml": Case(
        kind="Job",
        name="job-test-deadline",
        state="failed",
        cause="timeout",
        first=None,
        says="deadline",
        proofs=("Job/job-test-deadline#status.conditions[Failed]",),
        source="kubernetes/kubernetes#90550",
        why="activeDeadlineSeconds 40 against a 120 s sleep: the Job failed DeadlineExceeded and "
        "its pods (killed by the controller, now gone) carry no failure of their own.",
    ),
    "job-podgc-node-lost.yaml": Case(
        kind="Job",
        name="sweep-lr-3",
        state="failed",
        cause="node_lost",
        first=(2, None),
        says="not ready",  # the node's NotReady came first; PodGC's condition supports it
        proofs=("Pod/sweep-lr-3-2-hw6dz#status.conditions[DisruptionTarget]",),
        source="kubernetes/kubernetes#110959",
        why="index 2's node went NotReady and was deleted; PodGC marked the pod Failed with "
        "DisruptionTarget DeletionByPodGC; backoffLimit 0 failed the Job and the other pods "
        "were deleted (consequences, not causes). Modelled on the PR that added the condition.",
    ),
    "job-drain-evicted.yaml": Case(
        kind="Job",
        name="test-job",
        state="failed",
        cause="preempted",
        first=(2, None),
        says="Eviction API",
        proofs=("Pod/test-job-2-m6wcx#status.conditions[DisruptionTarget]",),
        source="kubernetes/kubernetes#130881",
        why="kubectl drain of kind-worker2 (cordoned Node) evicted index 2 (DisruptionTarget "
        "EvictionByEvictionAPI); without the report's podFailurePolicy Ignore and with "
        "backoffLimit 0 (changed from the report) the eviction failed the Job.",
    ),
    "job-deleted-running.yaml": Case(
        kind="Job",
        name="bert-finetune",
        state="cancelled",
        cause="cancelled",
        first=None,
        says="deleted",
        proofs=("Job/bert-finetune#metadata.deletionTimestamp",),
        source="kubernetes/kubernetes#61175",
        why="both ranks were Running and Ready when someone deleted the Job with propagation "
        "Foreground (deletionTimestamp, finalizer foregroundDeletion); the pods are terminating "
        "because of it.",
    ),
    "job-single-succeeded.yaml": Case(
        kind="Job",
        name="works",
        state="succeeded",
        cause=None,
        first=None,
        says="completed",
        proofs=("Job/works#status.conditions[Complete]",),
        source="element-hq/ess-helm#1055",
        why="a non-indexed Job with one pod that exited 0: Complete CompletionsReached.",
    ),
    # ---------------------------------------------------------------- Kueue-managed Job
    "kueue-job-podsready-timeout.yaml": Case(
        kind="Job",
        name="llm-pretrain",
        state="failed",
        cause="no_capacity",
        first=None,
        says="PodsReady",
        proofs=("Workload/job-llm-pretrain-5b8f2#status.conditions[Evicted]",),
        source="kubernetes-sigs/kueue#14811",
        why="Kueue evicted the running Job with PodsReadyTimeout and underlyingCause "
        "WaitForRecovery: waitForPodsReady.recoveryTimeout fires when, after all pods had been "
        "ready, a failed pod's replacement does not become ready in time (Kueue's "
        "admittedNotReadyWorkload / KEP 349 recovery timeout, issue #2732: a replacement that "
        "cannot schedule); here the replacement was unschedulable (Insufficient nvidia.com/gpu), "
        "so the eviction is a capacity failure, not a preemption nor a re-run.",
    ),
    "kueue-job-preempted.yaml": Case(
        kind="Job",
        name="sample-job-low",
        state="failed",
        cause="preempted",
        first=None,
        says="Preempted",
        proofs=(
            "Workload/job-sample-job-low-2c7a1#status.conditions[Evicted]",
            "Workload/job-sample-job-low-2c7a1#status.conditions[Preempted]",
        ),
        source="kubernetes-sigs/kueue#7350",
        why="a higher-priority workload preempted it in the ClusterQueue after its pods ran "
        "(Evicted Preempted, Preempted InClusterQueue); the pods' exit 143 came after Kueue "
        "suspended the Job and the Job controller deleted them.",
    ),
    "kueue-job-resumed-second-pod.yaml": Case(
        kind="Job",
        name="sample-job-ckpt",
        state="running",
        cause="unplanned_recovery",
        first=None,
        says="second pod",
        proofs=("Pod/sample-job-ckpt-0-k8v2r#metadata.creationTimestamp",),
        source="",
        why="backoffLimit 0 and restartPolicy Never allow no re-run, yet after Kueue evicted the "
        "running Job (Preempted) and re-admitted it a second pod runs for index 0 (a watch "
        "output: the first pod's last sighting is kept). No public report: written from "
        "Kueue's and the Job controller's behaviour.",
    ),
    # ---------------------------------------------------------------- TrainJob (not dispatch)
    "trainjob-oom-backofflimit.yaml": Case(
        kind="TrainJob",
        name="fine-tune-llama",
        state="failed",
        cause="out_of_memory",
        first=(0, 137),
        says="OOMKilled",
        proofs=("Pod/fine-tune-llama-node-0-0-g5tqz#status.containerStatuses[node]",),
        source="",
        why="default torch-distributed runtime (reference A.9): pods OnFailure, Job backoffLimit "
        "6; node 0 was OOMKilled and restarted in place 6 times (planned), then the Job failed "
        "BackoffLimitExceeded and JobSet and TrainJob failed FailedJobs. No public report "
        "with the objects: written from Trainer/JobSet/Job behaviour.",
    ),
    "trainjob-config-error.yaml": Case(
        kind="TrainJob",
        name="qwen-sft",
        state="failed",
        cause="start_failure",
        first=(0, None),
        says="CreateContainerConfigError",
        proofs=("Pod/qwen-sft-node-0-0-r7wkx#status.containerStatuses[node]",),
        source="kubernetes/kubernetes#80466",
        why='both node pods wait in CreateContainerConfigError (secret "hf-token" not found) '
        "for 22 minutes, past the 10-minute patience; nothing ever ran.",
    ),
}
