"""A small PyTorch DDP training run on CPU (gloo), with checkpoints fenced by attempt.

Each attempt writes its checkpoints to its own folder, ``$CHECKPOINT_DIR/<job>/attempt-<n>/``,
named after ``DISPATCH_JOB`` and ``DISPATCH_ATTEMPT``. It may resume from the last complete
checkpoint of an earlier attempt, but never writes into an earlier attempt's folder, and never
replaces a checkpoint file: a re-run of user code can therefore not corrupt what an earlier
run left. A checkpoint is complete once its file exists (written to a temporary name, then
hard-linked into place).

Run it with dispatch (2 nodes x 2 processes):   dispatch run examples/ddp/job.yaml
or by hand on one machine:    torchrun --standalone --nproc-per-node 2 examples/ddp/train.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

EPOCHS = int(os.environ.get("EPOCHS", "3"))
STEPS = int(os.environ.get("STEPS_PER_EPOCH", "20"))
BATCH = 32
_EPOCH_FILE = re.compile(r"^epoch-(\d+)\.pt$")


def attempt_dirs() -> tuple[Path, Path, int]:
    """(this job's checkpoint folder, this attempt's folder, this attempt's number)."""
    job = os.environ.get("DISPATCH_JOB", "manual")
    attempt = int(os.environ.get("DISPATCH_ATTEMPT", "1"))
    root = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints")) / job
    return root, root / f"attempt-{attempt}", attempt


def latest_checkpoint(root: Path, attempt: int) -> Path | None:
    """The newest complete checkpoint left by an earlier attempt (highest epoch wins)."""
    found: list[tuple[int, int, Path]] = []
    for earlier in range(1, attempt):
        folder = root / f"attempt-{earlier}"
        for path in folder.glob("epoch-*.pt") if folder.is_dir() else ():
            match = _EPOCH_FILE.match(path.name)
            if match:
                found.append((int(match.group(1)), earlier, path))
    return max(found)[2] if found else None


def save_once(state: dict[str, object], target: Path) -> None:
    """Write ``target`` atomically; refuse to replace an existing checkpoint."""
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    torch.save(state, temp)
    try:
        os.link(temp, target)  # fails if target exists: checkpoints are never overwritten
    finally:
        temp.unlink()


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
    root, mine, attempt = attempt_dirs()

    start_epoch = 0
    resume = latest_checkpoint(root, attempt)
    if resume is not None:
        state = torch.load(resume, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = int(state["epoch"])
        if rank == 0:
            print(
                f"attempt {attempt}: resuming after epoch {start_epoch} from {resume}", flush=True
            )

    if rank == 0:
        mine.mkdir(parents=True, exist_ok=True)
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
            print(f"attempt {attempt} epoch {epoch}: loss {mean:.4f} ({world} ranks)", flush=True)
            state = {
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "loss": mean,
            }
            save_once(state, mine / f"epoch-{epoch}.pt")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
