"""Checkpoints fenced by attempt: each attempt writes only its own folder, and a checkpoint,
once complete, is never replaced.

Layout under a job's checkpoint root (``<base>/<job id>``)::

    attempt-1/step-100/            a complete checkpoint: the files written, plus
    attempt-1/step-100/.dispatch-complete      the completion marker (JSON)
    attempt-2/.incomplete-step-200-k3j9/       a write in progress (or cut short by a crash)

Guarantees of ``CheckpointFence``:

* ``save(step)`` writes into a fresh temporary folder inside this attempt's folder; only when
  the ``with`` block ends without an exception are the files flushed to disk, the completion
  marker written, and the folder renamed to ``<prefix>-<step>`` in one atomic step. A crash or an
  exception before that leaves no complete checkpoint (the temporary folder is ignored by
  readers; on an exception it is removed).
* A complete checkpoint is never overwritten: if ``<prefix>-<step>`` exists when ``save``
  starts or when it commits (a concurrent writer won), ``CheckpointExists`` is raised and the
  loser's files are removed. Of several concurrent writers of one step exactly one wins.
* A fence writes only into its own attempt's folder; a process of attempt N refuses to write
  checkpoints of any other attempt (``FencedWrite``), and ``check_write`` refuses any path in
  another attempt's folder or inside a complete checkpoint.
* ``latest()`` reads attempts 1..N (this one included) and returns the complete checkpoint
  with the highest step (the later attempt on a tie); it never returns an incomplete one.

Standard library and ``dispatch.model`` only: usable inside any job.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.injob.identity import identity
from dispatch.model import PermanentError

MARKER = ".dispatch-complete"
TEMP_PREFIX = ".incomplete-"
_ATTEMPT = re.compile(r"^attempt-([1-9][0-9]*)$")
_PREFIX = re.compile(r"^[A-Za-z0-9][-_A-Za-z0-9]*$")
#: the job folder name used outside a dispatch job (a run by hand)
MANUAL_JOB = "manual"


class CheckpointExists(PermanentError, FileExistsError):
    """A complete checkpoint of this step already exists in this attempt; it is never replaced."""


class FencedWrite(PermanentError, PermissionError):
    """A write that would touch another attempt's folder or a complete checkpoint."""


@dataclass(frozen=True, slots=True, order=True)
class Checkpoint:
    """A complete checkpoint: its step, the attempt that wrote it, and its folder (read it)."""

    step: int
    attempt: int
    path: Path = field(compare=False)


class CheckpointFence:
    """The checkpoints of one job, seen from attempt ``attempt``.

    ``root`` is the job's checkpoint folder (shared by all its attempts, on storage every node
    sees); checkpoints are folders named ``<prefix>-<step>``. ``environ`` (default
    ``os.environ``) is read when saving, to refuse a fence built for another attempt than the
    one this process belongs to.
    """

    def __init__(
        self,
        root: str | Path,
        attempt: int,
        *,
        prefix: str = "step",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise ValueError(f"attempts are numbered from 1, got {attempt!r}")
        if not _PREFIX.match(prefix):
            raise ValueError(f"prefix {prefix!r} must be letters, digits, '-' or '_'")
        self.root = Path(root)
        self.attempt = attempt
        self.prefix = prefix
        self._environ = environ

    def __repr__(self) -> str:
        return f"CheckpointFence({str(self.root)!r}, attempt={self.attempt})"

    @property
    def folder(self) -> Path:
        """This attempt's folder: the only place this fence writes."""
        return self.attempt_folder(self.attempt)

    def attempt_folder(self, attempt: int) -> Path:
        return self.root / f"attempt-{attempt}"

    def path(self, step: int) -> Path:
        """Where this attempt's checkpoint of ``step`` lives once complete."""
        return self.folder / f"{self.prefix}-{_step(step)}"

    # --- reading ----------------------------------------------------------------------------

    def complete(self) -> list[Checkpoint]:
        """Every complete checkpoint of attempts 1..this one, by (step, attempt)."""
        found: list[Checkpoint] = []
        pattern = re.compile(rf"^{re.escape(self.prefix)}-(0|[1-9][0-9]*)$")
        for attempt in range(1, self.attempt + 1):
            folder = self.attempt_folder(attempt)
            try:
                entries = list(folder.iterdir())
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                match = pattern.match(entry.name)
                if match and _is_complete(entry, attempt, int(match.group(1))):
                    found.append(Checkpoint(int(match.group(1)), attempt, entry))
        return sorted(found)

    def latest(self) -> Checkpoint | None:
        """The complete checkpoint to resume from: highest step, then latest attempt; or None."""
        found = self.complete()
        return found[-1] if found else None

    # --- writing ----------------------------------------------------------------------------

    def check_write(self, path: str | Path) -> Path:
        """``path`` if this attempt may write it; ``FencedWrite`` if it lies in another
        attempt's folder or inside a complete checkpoint. Paths outside ``root`` are allowed."""
        target = Path(os.path.abspath(path))
        root = Path(os.path.abspath(self.root))
        if not target.is_relative_to(root) or target == root:
            return Path(path)
        parts = target.relative_to(root).parts
        match = _ATTEMPT.match(parts[0])
        if match is None or int(match.group(1)) != self.attempt:
            raise FencedWrite(
                f"{path}: attempt {self.attempt} may write only under {self.folder}, never into "
                f"{root / parts[0]} (checkpoints of other attempts are read-only)"
            )
        if len(parts) > 1 and (root / parts[0] / parts[1] / MARKER).exists():
            raise FencedWrite(f"{path}: {root / parts[0] / parts[1]} is a complete checkpoint")
        return Path(path)

    @contextmanager
    def save(self, step: int) -> Iterator[Path]:
        """Write checkpoint ``step`` of this attempt: write files into the yielded (temporary)
        folder; it becomes complete, atomically, when the block ends without an exception.

        Raises ``CheckpointExists`` (before the block runs, or at commit when a concurrent writer
        won) and ``FencedWrite`` when this process belongs to another attempt.
        """
        target = self.path(step)
        self._check_own_attempt()
        if target.exists():
            raise CheckpointExists(f"{target} exists: a checkpoint is never overwritten")
        self.folder.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{target.name}-", dir=self.folder))
        try:
            yield temp
            _sync_tree(temp)
            marker = {"attempt": self.attempt, "step": step, "prefix": self.prefix}
            _write_synced(temp / MARKER, json.dumps(marker))
            try:
                os.rename(temp, target)  # atomic; fails if another writer's folder is there
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise CheckpointExists(
                        f"{target} was completed by another writer first; it is kept"
                    ) from None
                raise
            _sync_dir(self.folder)
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)

    def _check_own_attempt(self) -> None:
        mine = identity(self._environ)
        if mine.attempt is not None and mine.attempt != self.attempt:
            raise FencedWrite(
                f"this process is attempt {mine.attempt} of job {mine.job_id}; it may not write "
                f"checkpoints of attempt {self.attempt} (under {self.folder})"
            )


def checkpoints(
    base: str | Path,
    *,
    prefix: str = "step",
    job: str | None = None,
    attempt: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> CheckpointFence:
    """This attempt's checkpoint fence under ``base/<job id>``, from dispatch's identity.

    Outside a dispatch job (a run by hand) ``job`` and ``attempt`` may be given; they default
    to ``manual`` and 1.

    >>> import tempfile
    >>> base = tempfile.mkdtemp()
    >>> env = {"DISPATCH_JOB": "train-x7k2p", "DISPATCH_ATTEMPT": "1"}
    >>> first = checkpoints(base, environ=env)
    >>> with first.save(100) as folder:
    ...     _ = (folder / "weights.txt").write_text("w100")
    >>> second = checkpoints(base, environ={**env, "DISPATCH_ATTEMPT": "2"})
    >>> found = second.latest()
    >>> found.step, found.attempt, (found.path / "weights.txt").read_text()
    (100, 1, 'w100')
    """
    me = identity(environ)
    return CheckpointFence(
        Path(base) / (me.job_id or job or MANUAL_JOB),
        me.attempt or attempt or 1,
        prefix=prefix,
        environ=environ,
    )


def _step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"a checkpoint step is a whole number >= 0, got {step!r}")
    return step


def _is_complete(folder: Path, attempt: int, step: int) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict) and marker.get("attempt") == attempt and marker.get("step") == step
    )


def _write_synced(path: Path, text: str) -> None:
    with open(path, "x", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


def _sync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` to disk, so a complete checkpoint survives a crash."""
    for directory, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync_dir(Path(directory))


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
