"""The supervisor: ``fold`` (history -> view), ``next_decision`` (view + policy -> decision),
the loop.

``fold`` and ``next_decision`` are pure; ``Supervisor`` carries decisions out through the adapters,
crash-safely (leases, intents written before any adapter call, reconciliation on start-up).
See docs/design/0002-supervisor.md.
"""

from dispatch.supervise.decide import (
    CANCEL_RESEND_AFTER,
    Decision,
    DecisionKind,
    next_decision,
)
from dispatch.supervise.loop import Supervisor
from dispatch.supervise.report import JobReport, StepReport
from dispatch.supervise.view import AttemptView, History, JobView, fold, last_decision, load_history

__all__ = [
    "CANCEL_RESEND_AFTER",
    "AttemptView",
    "Decision",
    "DecisionKind",
    "History",
    "JobReport",
    "JobView",
    "StepReport",
    "Supervisor",
    "fold",
    "last_decision",
    "load_history",
    "next_decision",
]
