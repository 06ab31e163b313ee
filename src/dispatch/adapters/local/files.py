"""The attempt directory: where an attempt's runner records it and where any process reads it.

Standard library only: the attempt runner imports this module, and the runner must start fast.

Layout under ``<adapter state dir>/jobs/<job id>/attempt-<n>/``:

=================  ==============================================================  =========
file               meaning                                                         writer
=================  ==============================================================  =========
``launch.json``    exactly what to run (argv, env, cwd, log per process)           start
``spawn.json``     pid of the runner that ``start`` spawned                        start
``start.lock``     flock held while a ``start`` call works on the attempt          start
``claim``          created once (O_EXCL): this attempt's execution is taken        runner
``runner.lock``    flock held by the runner for its whole life ("runner alive")    runner
``status.json``    the runner's facts: processes, exits, events (atomic rewrite)    runner
``cancel.json``    the first cancel request: who, why, when (O_EXCL)               cancel
``lost.json``      the runner died without finishing; what its watchdog killed     watchdog
``fault.json``     made at claim with room reserved: why the runner could not       runner
                   record (a full disk), written in place, so it needs no new space
``logs/``          ``rank-<r>.log`` per rank, or ``node-<k>.log`` under torchrun    ranks
``runner.log``     the runner's own output                                         runner
=================  ==============================================================  =========

``<state dir>/jobs/.changed`` is touched after every status change of any attempt, so a
watcher stats one file per cycle instead of every attempt.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the runner starts faster
if TYPE_CHECKING:
    from typing import Any

RUNNER_MODULE = "dispatch.adapters.local.runner"
#: the fd (inherited from ``start``) on which a runner says it claimed the attempt: it writes
#: ``CLAIMED`` and closes it; end of file without it means the runner ended without claiming
READY_FD_ENV = "DISPATCH_RUNNER_READY_FD"
CLAIMED = b"c"


@dataclass(frozen=True, slots=True)
class AttemptPaths:
    """Every path of one attempt, derived from the attempt directory alone."""

    root: Path

    @classmethod
    def of(cls, state_dir: Path, job_id: str, attempt: int) -> AttemptPaths:
        return cls(jobs_dir(state_dir) / job_id / f"attempt-{attempt}")

    @property
    def launch(self) -> Path:
        return self.root / "launch.json"

    @property
    def spawn(self) -> Path:
        return self.root / "spawn.json"

    @property
    def start_lock(self) -> Path:
        return self.root / "start.lock"

    @property
    def claim(self) -> Path:
        return self.root / "claim"

    @property
    def runner_lock(self) -> Path:
        return self.root / "runner.lock"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def cancel(self) -> Path:
        return self.root / "cancel.json"

    @property
    def lost(self) -> Path:
        return self.root / "lost.json"

    @property
    def fault(self) -> Path:
        return self.root / "fault.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def runner_log(self) -> Path:
        return self.root / "runner.log"

    @property
    def changed(self) -> Path:
        return self.root.parent.parent / ".changed"


def jobs_dir(state_dir: Path) -> Path:
    return state_dir / "jobs"


#: files hold the ranks' environment (its values) and output: only their owner reads them
PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700


def private_dirs(path: Path) -> None:
    """``path`` and its missing parents as folders only their owner can enter."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another process meanwhile
            folder.mkdir(mode=PRIVATE_DIR)


def _private_temp(path: Path) -> tuple[Path, Any]:
    """A new temp file beside ``path``, 0600, never through a link planted in the folder."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        temp.unlink()  # a leftover of a crashed writer with our pid
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    return temp, os.fdopen(os.open(temp, flags, PRIVATE_FILE), "w", encoding="utf-8")


def open_private_log(path: Path) -> int:
    """``path`` opened for appending (created 0600), not through a planted link."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, PRIVATE_FILE)


def write_json(path: Path, value: Any) -> None:
    """Replace ``path`` atomically: readers see the old or the new content, never a mix."""
    temp, handle = _private_temp(path)
    with handle:
        json.dump(value, handle, indent=1, sort_keys=True)
    os.replace(temp, path)


def create_json(path: Path, value: Any) -> bool:
    """Write ``path`` only if it does not exist yet; False when somebody else was first.

    The content appears atomically (a temp file hard-linked into place), so a reader never
    sees a half-written file.
    """
    temp, handle = _private_temp(path)
    with handle:
        json.dump(value, handle, indent=1, sort_keys=True)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temp)
    return True


def read_json(path: Path) -> Any | None:
    """The decoded content of ``path``, or None when it does not exist (yet)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


#: room reserved in ``fault.json``; a fault longer than this is cut
FAULT_ROOM = 4096


def reserve_fault(path: Path) -> int | None:
    """Create ``path`` with ``FAULT_ROOM`` bytes of blanks (allocated now, while there is
    room) and return it open for writing in place; None when even that cannot be done."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    except OSError:
        return None
    try:
        os.pwrite(fd, b" " * FAULT_ROOM, 0)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        return None
    return fd


def record_fault(fd: int, value: Any) -> bool:
    """Write ``value`` as JSON over the reserved blanks of ``fd`` (no new blocks needed);
    blanks after it are JSON whitespace. False when the write failed."""
    data = json.dumps(value, sort_keys=True).encode()
    if len(data) > FAULT_ROOM:
        data = json.dumps({"error": str(value.get("error", ""))[: FAULT_ROOM // 2]}).encode()
    try:
        os.pwrite(fd, data.ljust(FAULT_ROOM), 0)
        os.fsync(fd)
    except OSError:
        return False
    return True


def read_fault(path: Path) -> Any | None:
    """What ``record_fault`` wrote, or None (no file, or still blank)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def touch(path: Path) -> None:
    """Bump ``path``'s modification time (creating it), to wake watchers."""
    with contextlib.suppress(OSError):
        path.touch()
        os.utime(path)


def lock_held(path: Path) -> bool:
    """True while some process holds an exclusive flock on ``path``.

    Takes and drops a shared lock without blocking; a missing file means nobody holds it.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock if it was taken
    return False


def take_lock(path: Path, *, block: bool) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None if ``block`` is False and the lock
    is taken. The lock lasts until the fd is closed or the process ends."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    flags = fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB
    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def take_ready_fd() -> int | None:
    """In a runner: the fd ``start`` waits on (``READY_FD_ENV``), taken out of the environment
    so that the ranks do not inherit the variable."""
    value = os.environ.pop(READY_FD_ENV, None)
    return int(value) if value and value.isdigit() else None


def say_claimed(ready: int | None) -> None:
    """In a runner that claimed its attempt: tell ``start`` on ``ready`` and close it."""
    if ready is None:
        return
    with contextlib.suppress(OSError):  # the starter may be gone: nobody to tell
        os.write(ready, CLAIMED)
    os.close(ready)
