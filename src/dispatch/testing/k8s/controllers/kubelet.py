"""Kubelets of every node: run bound pods as a :class:`~dispatch.testing.k8s.scenario.Scenario`
says, write their status and logs, and confirm graceful deletions.

Per pod (on a Ready node): init containers complete; after ``startAfter`` the containers run
(``Running``, ``Ready``, ``podIP`` with its ``podIPs`` list and ``hostIP`` with ``hostIPs``, as
a 1.33 kubelet writes them; log lines written, so ``kubectl logs -f`` follows them); after
``runFor`` they exit with ``exitCode`` (``OOMKilled`` = 137). ``restartPolicy: Never`` (or
exit 0 under ``OnFailure``) ends the pod ``Succeeded``/``Failed``; a failure under
``OnFailure``/``Always`` restarts the container in place (``restartCount``, ``lastState``,
``CrashLoopBackOff`` while backing off 10 s, 20 s, ... up to 300 s; each run of a container is
its own log, the one before served with ``previous=true``). ``initExitCode`` fails
the first init container instead (``Init:Error`` under ``Never``, else restarted with back-off
and a kubelet ``BackOff`` event naming ``spec.initContainers{name}``). ``imagePullError`` keeps
the pod Pending with ``ErrImagePull`` / ``ImagePullBackOff``. A deleted pod's containers are
stopped (exit 143), the pod ends ``Failed`` and the deletion is confirmed — unless its node is
not Ready, in which case nothing happens (the pod stays Terminating, as on a lost node).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import zlib
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s.controllers.base import record_event, set_condition, write_status
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import rfc3339
from dispatch.testing.k8s.rbac import UserInfo
from dispatch.testing.k8s.scenario import ENV_VAR, PodBehaviour, PodFacts, Scenario

if TYPE_CHECKING:
    from dispatch.testing.k8s.cluster import Cluster

JsonObj = dict[str, Any]
Key = tuple[str, str]
TERMINAL = ("Succeeded", "Failed")
BACKOFF, MAX_BACKOFF = 10.0, 300.0
IMAGE_BACKOFF = 10.0
STOP_DELAY = 1.0  # emulated seconds a container takes to stop on SIGTERM


def node_ready(cluster: Cluster, name: str) -> bool:
    try:
        node = cluster.store.get(cluster.rtype("v1", "Node"), None, name)
    except ApiError:
        return False
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def grace_period(pod: JsonObj) -> int | None:
    """The API server's grace for deleting ``pod``: bound and unfinished pods wait."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    if (pod.get("status") or {}).get("phase") in TERMINAL:
        return None
    return int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)) or None


class Kubelet:
    name = "kubelet"

    def __init__(self, scenario: Scenario | None = None) -> None:
        self.scenario = scenario or Scenario()
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._runs: dict[tuple[str, str, str, int], int] = {}
        self._cluster: Cluster | None = None

    def install(self, cluster: Cluster) -> None:
        self._cluster = cluster
        cluster.store.graceful_deletion[("", "pods")] = grace_period

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise RuntimeError("kubelet is not installed")
        return self._cluster

    async def run(self, cluster: Cluster) -> None:
        self._cluster = cluster
        sub = cluster.store.subscribe([cluster.rtype("v1", "Pod"), cluster.rtype("v1", "Node")])
        try:
            async for event, change in sub:
                if change.rtype.kind == "Node":
                    if event != "DELETED" and node_ready(cluster, change.name):
                        self._retry_terminating(change.name)
                    continue
                key = (change.namespace, change.name)
                if event == "DELETED":
                    task = self._tasks.pop(key, None)
                    if task is not None:
                        task.cancel()
                    continue
                pod = change.obj
                node = (pod.get("spec") or {}).get("nodeName")
                if not node:
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    self._terminate(key, node)
                elif (
                    key not in self._tasks
                    and (pod.get("status") or {}).get("phase") not in TERMINAL
                ):
                    self._tasks[key] = asyncio.ensure_future(self._live(key, node))
        finally:
            sub.close()
            for task in self._tasks.values():
                task.cancel()

    # ------------------------------------------------------------------ running

    def _get(self, key: Key) -> JsonObj | None:
        try:
            pod = self.cluster.store.get(self.cluster.rtype("v1", "Pod"), *key)
        except ApiError:
            return None
        if pod["metadata"].get("deletionTimestamp"):
            return None
        # a pod that ended behind the kubelet's back (graceful node shutdown) stays as it is
        return None if (pod.get("status") or {}).get("phase") in TERMINAL else pod

    def _facts(self, pod: JsonObj) -> PodFacts:
        labels = pod["metadata"].get("labels") or {}
        ann = pod["metadata"].get("annotations") or {}
        jobset = labels.get("jobset.sigs.k8s.io/jobset-name") or labels.get(
            "batch.kubernetes.io/job-name", ""
        )
        rjob = labels.get("jobset.sigs.k8s.io/replicatedjob-name", "")
        index = int(ann.get("batch.kubernetes.io/job-completion-index", "0"))
        run_key = (pod["metadata"]["namespace"], jobset, rjob, index)
        self._runs[run_key] = self._runs.get(run_key, 0) + 1
        return PodFacts(pod["metadata"]["namespace"], jobset, rjob, index, self._runs[run_key])

    def _scenario(self, pod: JsonObj) -> Scenario:
        for c in (pod.get("spec") or {}).get("containers") or []:
            for env in c.get("env") or []:
                if env.get("name") == ENV_VAR and env.get("value"):
                    try:
                        return Scenario.from_text(env["value"])
                    except ValueError:
                        return self.scenario
        return self.scenario

    async def _live(self, key: Key, node: str) -> None:
        clock = self.cluster.clock
        pod = self._get(key)
        if pod is None:
            return
        scenario = self._scenario(pod)
        behaviour = scenario.behaviour(self._facts(pod))
        if behaviour.image_pull_error:
            await self._image_pull_loop(key)
            return
        await clock.sleep(behaviour.start_after)
        restart_policy = pod["spec"].get("restartPolicy", "Always")
        if behaviour.init_exit_code and pod["spec"].get("initContainers"):
            await self._init_failure_loop(key, behaviour.init_exit_code, restart_policy)
            return
        backoff = BACKOFF
        while True:
            if not await self._wait_node(node) or not self._start(key, behaviour):
                return
            if behaviour.run_for is None:
                return
            await clock.sleep(behaviour.run_for)
            if not await self._wait_node(node):
                return
            restart = restart_policy == "Always" or (
                restart_policy == "OnFailure" and behaviour.failed
            )
            if not self._exit(key, behaviour, restart):
                return
            if not restart:
                return
            await clock.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            current = self._get(key)
            if current is None:
                return
            behaviour = scenario.behaviour(self._facts(current))

    async def _wait_node(self, node: str) -> bool:
        while not node_ready(self.cluster, node):
            await self.cluster.clock.sleep(1.0)
        return True

    def _status(self, pod: JsonObj) -> JsonObj:
        status = copy.deepcopy(pod.get("status") or {})
        now = rfc3339(self.cluster.clock.now())
        status.setdefault("hostIP", "10.0.0.1")
        status.setdefault("hostIPs", [{"ip": status["hostIP"]}])
        status.setdefault(
            "podIP",
            f"10.1.{len(pod['metadata']['name']) % 250}.{zlib.crc32(pod['metadata']['uid'].encode()) % 250}",
        )
        status.setdefault("podIPs", [{"ip": status["podIP"]}])  # the list beside the first IP
        status.setdefault("startTime", now)
        return status

    def _containers(self, pod: JsonObj, status: JsonObj, state: JsonObj, **extra: Any) -> None:
        old = {c["name"]: c for c in status.get("containerStatuses") or []}
        out = []
        for c in pod["spec"].get("containers") or []:
            prev = old.get(c["name"], {})
            entry = {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"emulated://{c.get('image', '')}",
                "restartCount": prev.get("restartCount", 0),
                "ready": "running" in state,
                "started": "running" in state,
                "state": state,
            }
            if prev.get("lastState"):
                entry["lastState"] = prev["lastState"]
            entry.update(extra)
            if "running" in state or "terminated" in state:
                entry["containerID"] = f"emulated://{pod['metadata']['uid'][:8]}-{c['name']}"
            out.append(entry)
        status["containerStatuses"] = out

    def _conditions(self, status: JsonObj, ready: bool) -> None:
        now = self.cluster.clock.now()
        conds = status.setdefault("conditions", [])
        flag = "True" if ready else "False"
        reason = "" if ready else "ContainersNotReady"
        set_condition(conds, "PodReadyToStartContainers", "True", "", "", now)
        set_condition(conds, "Initialized", "True", "", "", now)
        set_condition(conds, "Ready", flag, reason, "", now)
        set_condition(conds, "ContainersReady", flag, reason, "", now)
        for c in conds:
            if not c.get("reason"):
                c.pop("reason", None)
            if not c.get("message"):
                c.pop("message", None)
            c["lastProbeTime"] = None

    def _write(self, pod: JsonObj, status: JsonObj) -> None:
        """Write a pod's status as its node's kubelet (``system:node:<node>``)."""
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        user = UserInfo(f"system:node:{node}", ("system:nodes", "system:authenticated"))
        with self.cluster.store.acting_as(user):
            write_status(self.cluster, self.cluster.rtype("v1", "Pod"), pod, status)

    def _start(self, key: Key, behaviour: PodBehaviour) -> bool:
        pod = self._get(key)
        if pod is None:
            return False
        now = self.cluster.clock.now()
        status = self._status(pod)
        status["phase"] = "Running"
        inits = pod["spec"].get("initContainers") or []
        if inits:
            status["initContainerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"emulated://{c.get('image', '')}",
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": rfc3339(now),
                            "finishedAt": rfc3339(now),
                        }
                    },
                }
                for c in inits
            ]
        self._containers(pod, status, {"running": {"startedAt": rfc3339(now)}})
        self._conditions(status, True)
        self._write(pod, status)
        facts = (pod["metadata"].get("annotations") or {}).get(
            "batch.kubernetes.io/job-completion-index", "0"
        )
        for c in pod["spec"].get("containers") or []:
            self.cluster.logs.new_run(key[0], key[1], c["name"])  # a restart: a new instance
            lines = [f"emulated: container {c['name']} started (rank {facts})", *behaviour.logs]
            self.cluster.logs.append(key[0], key[1], c["name"], "\n".join(lines), now)
        return True

    def _exit(self, key: Key, behaviour: PodBehaviour, restart: bool) -> bool:
        pod = self._get(key)
        if pod is None:
            return False
        now = self.cluster.clock.now()
        code = 137 if behaviour.oom_killed else behaviour.exit_code
        reason = "OOMKilled" if behaviour.oom_killed else ("Completed" if code == 0 else "Error")
        started = next(
            (
                (c.get("state") or {}).get("running", {}).get("startedAt")
                for c in (pod.get("status") or {}).get("containerStatuses") or []
            ),
            rfc3339(now),
        )
        terminated = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": rfc3339(now),
        }
        status = self._status(pod)
        for c in pod["spec"].get("containers") or []:
            self.cluster.logs.append(
                key[0], key[1], c["name"], f"emulated: exited with code {code}", now
            )
        if restart:
            counts = {
                c["name"]: c.get("restartCount", 0) for c in status.get("containerStatuses") or []
            }
            self._containers(
                pod,
                status,
                {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": "back-off restarting failed container",
                    }
                },
            )
            for c in status["containerStatuses"]:
                c["restartCount"] = counts.get(c["name"], 0) + 1
                c["lastState"] = {"terminated": dict(terminated)}
            self._conditions(status, False)
        else:
            status["phase"] = "Succeeded" if code == 0 else "Failed"
            self._containers(pod, status, {"terminated": terminated})
            self._conditions(status, False)
            for c in pod["spec"].get("containers") or []:
                self.cluster.logs.finish(key[0], key[1], c["name"])
        self._write(pod, status)
        return True

    async def _init_failure_loop(self, key: Key, code: int, restart_policy: str) -> None:
        """The first init container exits ``code``: under ``Never`` the pod fails
        (``Init:Error``); else it is restarted with back-off (``Init:CrashLoopBackOff``, event
        ``BackOff`` about ``spec.initContainers{name}``) until the pod is deleted."""
        backoff = BACKOFF
        restarts = 0
        while True:
            pod = self._get(key)
            if pod is None:
                return
            now = self.cluster.clock.now()
            init = pod["spec"]["initContainers"][0]
            terminated = {
                "exitCode": code,
                "reason": "Error",
                "startedAt": rfc3339(now),
                "finishedAt": rfc3339(now),
            }
            status = self._status(pod)
            entry: JsonObj = {
                "name": init["name"],
                "image": init.get("image", ""),
                "imageID": f"emulated://{init.get('image', '')}",
                "ready": False,
                "started": False,
                "restartCount": restarts,
            }
            waiting = {"reason": "PodInitializing"}
            self._containers(pod, status, {"waiting": waiting})
            if restart_policy == "Never":
                status["phase"] = "Failed"
                entry["state"] = {"terminated": terminated}
                status["initContainerStatuses"] = [entry]
                self._conditions(status, False)
                self._write(pod, status)
                return
            status["phase"] = "Pending"
            entry["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {int(backoff)}s restarting failed container="
                    f"{init['name']} pod={pod['metadata']['name']}",
                }
            }
            entry["lastState"] = {"terminated": terminated}
            status["initContainerStatuses"] = [entry]
            self._conditions(status, False)
            self._write(pod, status)
            subject = {**pod, "apiVersion": "v1", "kind": "Pod"}
            message = (
                f"Back-off restarting failed container {init['name']} in pod "
                f"{pod['metadata']['name']}_{pod['metadata'].get('namespace')}"
            )
            path = f"spec.initContainers{{{init['name']}}}"
            record_event(
                self.cluster, subject, "Warning", "BackOff", message, "kubelet", field_path=path
            )
            await self.cluster.clock.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            restarts += 1

    async def _image_pull_loop(self, key: Key) -> None:
        reasons = ("ErrImagePull", "ImagePullBackOff")
        turn = 0
        while True:
            pod = self._get(key)
            if pod is None:
                return
            image = (pod["spec"].get("containers") or [{}])[0].get("image", "")
            reason = reasons[turn % 2]
            message = (
                f'failed to pull and unpack image "{image}": not found'
                if reason == "ErrImagePull"
                else f'Back-off pulling image "{image}"'
            )
            status = self._status(pod)
            status["phase"] = "Pending"
            self._containers(pod, status, {"waiting": {"reason": reason, "message": message}})
            self._conditions(status, False)
            self._write(pod, status)
            turn += 1
            await self.cluster.clock.sleep(IMAGE_BACKOFF)

    # ------------------------------------------------------------------ deletion

    def _terminate(self, key: Key, node: str) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        if node_ready(self.cluster, node):
            self._tasks[key] = asyncio.ensure_future(self._stop(key))

    def _retry_terminating(self, node: str) -> None:
        for pod in self.cluster.store.objects(self.cluster.rtype("v1", "Pod")):
            if pod["spec"].get("nodeName") == node and pod["metadata"].get("deletionTimestamp"):
                self._terminate((pod["metadata"]["namespace"], pod["metadata"]["name"]), node)

    async def _stop(self, key: Key) -> None:
        await self.cluster.clock.sleep(STOP_DELAY)
        pod_type = self.cluster.rtype("v1", "Pod")
        try:
            pod = self.cluster.store.get(pod_type, *key)
        except ApiError:
            return
        status = self._status(pod)
        if status.get("phase") not in TERMINAL:
            now = rfc3339(self.cluster.clock.now())
            status["phase"] = "Failed"
            self._containers(
                pod,
                status,
                {
                    "terminated": {
                        "exitCode": 143,
                        "reason": "Error",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            )
            self._conditions(status, False)
            self._write(pod, status)
        for c in pod["spec"].get("containers") or []:
            self.cluster.logs.finish(key[0], key[1], c["name"])
        self._tasks.pop(key, None)
        with contextlib.suppress(ApiError):
            self.cluster.store.delete(pod_type, *key, grace_period_seconds=0)
