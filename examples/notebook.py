# %% [markdown]
# # dispatch from a notebook or a script
#
# Submit a job, wait for it, find out why it failed, and submit it again with a recovery policy
# that fits the failure. Every cell runs on the local scheduler; the same calls work on any
# configured cluster (set `cluster:` in the spec). Open this file as a notebook in an editor that
# reads `# %%` cells, or run it: `python examples/notebook.py`.

# %%
from pathlib import Path

import dispatch
from dispatch import Action, Cause, RecoveryPolicy, RecoveryRule

here = Path(__file__).resolve().parent if "__file__" in globals() else Path("examples").resolve()
spec_file = here / "flaky" / "job.yaml"
spec = dispatch.load_spec(spec_file)
client = dispatch.Client()
print(f"{spec.name}: {spec.nodes} node(s) x {spec.procs_per_node} processes, {spec.command}")

# %% [markdown]
# ## Submit and wait
# `submit` returns at once (a background supervisor drives the job, even if this kernel dies);
# `wait` blocks until the job has ended and returns its status: a state and a typed cause.

# %%
job = client.submit(spec, spec_file=spec_file)
print("submitted", job.id)
final = client.wait(job.id, timeout=300)
print("state:", final.state, "cause:", final.cause)

# %% [markdown]
# ## Why did it fail?
# The cause is typed; the first failure names the rank and exit code; the evidence says how
# dispatch knows; the logs of the failing rank are kept.

# %%
failure = final.first_failure
if final.cause is Cause.APP_ERROR and failure is not None:
    print(f"rank {failure.rank} exited with code {failure.exit_code}")
for item in final.evidence:
    print(f"evidence [{item.kind}] {item.summary}")
for line in client.logs(job.id, rank=1):
    print("rank 1 said:", line)

# %% [markdown]
# ## Submit again with a policy that retries this failure once
# The failure was flaky (it happens in attempt 1 only), so retry `app_error` once. A retry is a
# new attempt: the script reads its attempt number from `dispatch.identity()` and resumes from
# the last complete checkpoint of attempt 1, without ever writing into attempt 1's folder.
# `raise_on_failure=True` turns a failed job into a `dispatch.JobFailed` exception.

# %%
policy = RecoveryPolicy(
    rules=(
        RecoveryRule(on=(Cause.PREEMPTED, Cause.NODE_LOST), action=Action.RETRY, limit=3),
        RecoveryRule(on=(Cause.APP_ERROR,), action=Action.RETRY, limit=1),
    )
)
retried = client.submit(spec.model_copy(update={"recovery": policy}), spec_file=spec_file)
try:
    done = client.wait(retried.id, timeout=300, raise_on_failure=True)
except dispatch.JobFailed as failed:
    print("still failing:", failed.outcome.cause, failed.outcome.summary)
    raise
for attempt in done.attempts:
    print(f"attempt {attempt.number}: {attempt.state} {attempt.cause or ''}".rstrip())
print("rank 0 of attempt 2 said:", next(client.logs(done.id, rank=0)))
print("final state:", done.state)
client.close()
