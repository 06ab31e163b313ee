"""Container logs of pods (``pods/{name}/log``): read once, or followed as they are written.

Both answer ``None`` / end quietly when the pod is gone (404): a rank's pod deleted by its
Job, an eviction or a cancel takes its log with it, which the caller reports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import client

from dispatch.adapters.kubeflow.api.client import Session
from dispatch.adapters.kubeflow.api.errors import API_FAILURES, translate
from dispatch.model import NotFound

#: the most of one log read at once (bytes): a log is shown, not archived
MAX_LOG_BYTES = 8 * 1024 * 1024


async def read_log(
    session: Session,
    namespace: str,
    pod: str,
    container: str,
    *,
    tail_lines: int | None = None,
    previous: bool = False,
) -> str | None:
    """The container's log (the last ``tail_lines`` lines; ``previous``: the container that
    ran before a restart, where the kubelet kept it), or None when the pod (or that previous
    container) is gone."""
    core = client.CoreV1Api(session.api)
    extra: dict[str, Any] = {"tail_lines": tail_lines} if tail_lines is not None else {}
    try:
        text = await core.read_namespaced_pod_log(
            pod,
            namespace,
            container=container,
            limit_bytes=MAX_LOG_BYTES,
            previous=previous,
            _request_timeout=session.timeout,
            **extra,
        )
    except API_FAILURES as exc:
        error = translate(exc, f"read the log of pod {namespace}/{pod}")
        if isinstance(error, NotFound) or (previous and _is_bad_request(exc)):
            return None
        raise error from None
    return text if isinstance(text, str) else str(text)


async def follow_log(
    session: Session, namespace: str, pod: str, container: str
) -> AsyncIterator[str]:
    """The container's log line by line, existing lines first, until the container ends (or
    the pod is deleted)."""
    core = client.CoreV1Api(session.api)
    try:
        # a raw response (``_preload_content=False``): the stream, read as it comes
        response: Any = await core.read_namespaced_pod_log(
            pod, namespace, container=container, follow=True, _preload_content=False
        )
    except API_FAILURES as exc:
        error = translate(exc, f"follow the log of pod {namespace}/{pod}")
        if isinstance(error, NotFound):
            return
        raise error from None
    try:
        async for raw in response.content:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")
    finally:
        response.release()


def _is_bad_request(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 400  # "previous terminated container not found"
