"""dispatch's Python API: ``AsyncClient`` (the implementation) and ``Client`` (sync facade)."""

from dispatch.api.client import AsyncClient
from dispatch.api.environment import Environment
from dispatch.api.status import AttemptStatus, JobStatus
from dispatch.api.sync import Client

__all__ = ["AsyncClient", "AttemptStatus", "Client", "Environment", "JobStatus"]
