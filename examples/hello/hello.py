"""Prints what a rank knows about itself: dispatch's identity and the torch-style ranks."""

import os

keys = ("DISPATCH_JOB", "DISPATCH_ATTEMPT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "PET_NODE_RANK")
print(os.environ.get("GREETING", "hi"), {k: os.environ.get(k) for k in keys}, flush=True)
