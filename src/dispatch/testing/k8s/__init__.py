"""An emulator of the Kubernetes API server for offline tests (see docs/design/0003-emulator.md).

Start it with :class:`Emulator` (own thread, for synchronous code and any client) or
:class:`Cluster` (on the current event loop, for in-process controllers).
"""

from dispatch.testing.k8s.accounting import RequestCounts
from dispatch.testing.k8s.authz import Authorizer
from dispatch.testing.k8s.clock import ScaledClock
from dispatch.testing.k8s.cluster import Cluster, ClusterConfig, Controller
from dispatch.testing.k8s.emulator import Emulator
from dispatch.testing.k8s.errors import ApiError, FieldError
from dispatch.testing.k8s.faults import FaultInjector, FaultRule
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.store import Store
from dispatch.testing.k8s.watch import Change, Subscription

__all__ = [
    "ApiError",
    "Authorizer",
    "Change",
    "Cluster",
    "ClusterConfig",
    "Controller",
    "Emulator",
    "FaultInjector",
    "FaultRule",
    "FieldError",
    "RequestCounts",
    "ResourceType",
    "ScaledClock",
    "Store",
    "Subscription",
]
