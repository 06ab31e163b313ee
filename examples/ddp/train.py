"""A small PyTorch DDP training run on CPU (gloo), with checkpoints fenced by attempt.

``dispatch.checkpoints`` gives each attempt its own folder, ``$CHECKPOINT_DIR/<job>/attempt-<n>/``
(from ``DISPATCH_JOB`` and ``DISPATCH_ATTEMPT``), with one folder per epoch (``epoch-<k>/``).
An attempt resumes from the last complete checkpoint of an earlier attempt, but never writes
into an earlier attempt's folder and never replaces a checkpoint: a re-run of user code can
therefore not corrupt what an earlier run left. A checkpoint becomes complete atomically, when
the ``save`` block ends.

Run it with dispatch (2 nodes x 2 processes):   dispatch run examples/ddp/job.yaml
or by hand on one machine:    torchrun --standalone --nproc-per-node 2 examples/ddp/train.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import dispatch

EPOCHS = int(os.environ.get("EPOCHS", "3"))
STEPS = int(os.environ.get("STEPS_PER_EPOCH", "20"))
BATCH = 32


def synthetic_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(BATCH, 16, generator=generator)
    y = x @ torch.linspace(-1.0, 1.0, 16).unsqueeze(1) + 0.1 * torch.randn(
        BATCH, 1, generator=generator
    )
    return x, y


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    fence = dispatch.checkpoints(os.environ.get("CHECKPOINT_DIR", "checkpoints"), prefix="epoch")

    start_epoch = 0
    resume = fence.latest()
    dist.barrier()  # every rank has chosen where to resume before rank 0 saves anything new
    if resume is not None:
        state = torch.load(resume.path / "state.pt", weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = resume.step
        if rank == 0:
            print(
                f"attempt {fence.attempt}: resuming after epoch {start_epoch} "
                f"from attempt {resume.attempt} ({resume.path})",
                flush=True,
            )

    generator = torch.Generator().manual_seed(1000 + rank)
    for epoch in range(start_epoch + 1, EPOCHS + 1):
        total = torch.zeros(1)
        for _ in range(STEPS):
            x, y = synthetic_batch(generator)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            mean = total.item() / (STEPS * world)
            print(
                f"attempt {fence.attempt} epoch {epoch}: loss {mean:.4f} ({world} ranks)",
                flush=True,
            )
            state = {
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "loss": mean,
            }
            with fence.save(epoch) as folder:  # complete only when the block ends
                torch.save(state, folder / "state.pt")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without Python's interpreter shutdown. Gloo's worker threads can still be freeing
    # the last collective's tensors when it starts, and a thread that needs Python then
    # aborts the whole rank (exit -6, "terminate called without an active exception"), which
    # dispatch would rightly report as app_error. Everything is written and the group is
    # destroyed by now; see pytorch/pytorch#179291 for the shutdown race.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
