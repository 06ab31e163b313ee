"""How often a finished DDP rank aborts at exit on a loaded machine (examples/ddp/train.py).

Runs the example ``--runs`` times as two torchrun agents of two ranks each on this machine
(``--nnodes 2``, static rendezvous on loopback), with ``--busy`` busy loops beside them, and
counts the runs in which a rank aborted ("terminate called without an active exception" or a
fatal signal). ``--script`` runs another version of the training script, e.g. the one before
the fix: ``git show 3f6ca35~1:examples/ddp/train.py > old_train.py``.

    python bench/ddp_teardown.py --runs 20 --busy 3
    python bench/ddp_teardown.py --runs 20 --busy 3 --script old_train.py

Needs torch (``pip install torch==2.13.0``). Not part of ``bench/run.py``: it measures the
example, not dispatch.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ddp" / "train.py"
ABORTED = ("terminate called", "Fatal Python error", "exitcode: -6")


def busy() -> None:
    while True:
        pass


def one_run(script: Path, folder: Path) -> bool:
    """Whether a rank aborted in one two-agent run."""
    port = str(random.randint(30000, 50000))
    env = {**os.environ, "EPOCHS": "1", "STEPS_PER_EPOCH": "2",
           "CHECKPOINT_DIR": str(folder / "checkpoints")}  # fmt: skip
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", port]  # fmt: skip
    logs = [folder / f"agent-{n}.log" for n in (0, 1)]
    agents = []
    for n, log in enumerate(logs):
        with log.open("w") as out:
            command = [*torchrun, "--node-rank", str(n), str(script)]
            agents.append(subprocess.Popen(command, env=env, stdout=out, stderr=out))
    while any(agent.poll() is None for agent in agents):
        if any(agent.poll() not in (None, 0) for agent in agents):
            for agent in agents:  # the other agent would wait for its peer for minutes
                agent.kill()
        time.sleep(0.2)
    outputs = [log.read_text(errors="replace") for log in logs]
    return any(mark in text for text in outputs for mark in ABORTED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--busy", type=int, default=3, help="busy loops beside the run")
    parser.add_argument("--script", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.busy)]
    for loop in loops:
        loop.start()
    aborted = 0
    try:
        for i in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory() as folder:
                if one_run(args.script, Path(folder)):
                    aborted += 1
                    print(f"run {i}: a rank aborted", flush=True)
    finally:
        for loop in loops:
            loop.terminate()
    print(f"{aborted} of {args.runs} runs aborted ({args.script.name}, {args.busy} busy loops)")


if __name__ == "__main__":
    main()
