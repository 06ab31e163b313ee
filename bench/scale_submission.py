"""Submission under overload: dispatch starts N TrainJobs while the emulator answers 429.

The emulator's API Priority and Fairness (``dispatch.testing.k8s.flowcontrol``) is configured
below a load dispatch makes: ``SEATS`` requests execute at once and ``QUEUE_LENGTH`` more wait
(each at most ``QUEUE_WAIT`` real seconds); the rest are rejected with ``429`` and a
``Retry-After``, as kube-apiserver does. dispatch's supervisor ticks up to 32 jobs at once and
its client keeps up to 32 requests in flight (``maxInFlight``), so more than
``SEATS + QUEUE_LENGTH`` requests arrive together and some are refused. The emulator's
administrator kubeconfig, which the bench gives the child, is in ``system:masters``; the
exempt groups are emptied so that its requests are limited too.

The row: submission seconds (the first TrainJob created to the last, in the store), the 429s
the emulator sent (``throttled``; requests it rejected are not in ``requests``), the requests it
served, and lost / duplicated / wrong final state once every job has ended (a 429 is refused
before the request runs, so a create sent again must not make a second TrainJob).

    python -m bench.scale_submission --jobs 100
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from typing import Any

from bench.scale import run_dispatch
from dispatch.testing.k8s import FaultRule
from dispatch.testing.k8s.flowcontrol import FlowControl

#: requests executing at once, waiting at most, and real seconds one may wait: together
#: below dispatch's 32 requests in flight, so that bursts of starts are refused in part
SEATS, QUEUE_LENGTH, QUEUE_WAIT = 10, 16, 1.0
OVERLOAD = FlowControl(
    seats=SEATS, queue_length=QUEUE_LENGTH, queue_wait=QUEUE_WAIT, exempt_groups=frozenset()
)
#: real seconds each request holds its seat: the emulator answers at once, a real server
#: takes its storage write's time; without it no two requests would ever hold seats together
SERVICE_SECONDS = 0.01
SERVICE = FaultRule(latency=SERVICE_SECONDS)


def flow_control_text(limit: FlowControl) -> str:
    return (
        f"{limit.seats} seats, queue of {limit.queue_length}, {limit.queue_wait:g} s wait at "
        f"most, nobody exempt; each request served in {SERVICE_SECONDS * 1000:g} ms"
    )


def run_submission(
    jobs: int, lifetime: float, scale: float, deadline: float | None = None
) -> dict[str, Any]:
    """dispatch over ``jobs`` jobs with the emulator overloaded (``OVERLOAD``): its row of the
    scale benchmark, marked with the limit, the 429s sent and the requests served per job."""
    began = time.time()
    deadline = deadline or 120 + jobs * 0.6 + lifetime * 3
    row = run_dispatch(jobs, lifetime, scale, deadline, faults=(SERVICE,), flow_control=OVERLOAD)
    limit = {k: v for k, v in asdict(OVERLOAD).items() if not k.startswith("exempt")}
    row.update(
        flowControl={
            **limit,
            "exempt": [],
            "serviceSeconds": SERVICE_SECONDS,
            "text": flow_control_text(OVERLOAD),
        },
        benchSeconds=round(time.time() - began, 1),
        lifetime=lifetime,
    )
    return row


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--lifetime", type=float, default=6.0, help="mean real seconds")
    parser.add_argument("--time-scale", type=float, default=10.0)
    args = parser.parse_args()
    found = run_submission(args.jobs, args.lifetime, args.time_scale)
    print(json.dumps(found, indent=1), file=sys.stderr)
