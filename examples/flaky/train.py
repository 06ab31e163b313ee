"""A stand-in for a training script: STEPS steps, rank 0 saves a checkpoint after each one.

In attempt 1, rank 1 fails with exit code 3 once step FAIL_AT is saved (set FAIL_AT to ""
to turn that off). A later attempt resumes from the newest complete checkpoint of any
earlier attempt, and writes its own checkpoints into its own folder.
"""

import json
import os
import sys
import time

import dispatch

STEPS = int(os.environ.get("STEPS", "4"))
FAIL_AT = int(os.environ.get("FAIL_AT") or 0)
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.3"))

me = dispatch.identity()
fence = dispatch.checkpoints(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
latest = fence.latest()
start = latest.step if latest else 0
if me.is_primary:
    where = f"resuming after step {start} of attempt {latest.attempt}" if latest else "starting"
    print(f"{me}: {where}", flush=True)

for step in range(start + 1, STEPS + 1):
    time.sleep(STEP_SECONDS)  # the "training"
    if me.rank == 0:
        with fence.save(step) as folder:
            (folder / "state.json").write_text(json.dumps({"step": step}))
        print(f"step {step} saved", flush=True)
    elif me.rank == 1 and me.attempt == 1 and step == FAIL_AT:
        while not fence.path(step).exists():  # fail once rank 0 has saved this step
            time.sleep(0.05)
        print(f"rank 1: loss is NaN at step {step}, giving up", file=sys.stderr, flush=True)
        sys.exit(3)
