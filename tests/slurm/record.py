"""Record a real Slurm's outputs into ``tests/slurm/recorded`` (see its README), by hand:

    sudo DISPATCH_SLURM_PREFIX=/opt/slurm-24.11 .venv/bin/python -m tests.slurm.record 24.11

Starts the two-node test cluster (``realslurm``, nodes ``xn1``/``xn2``) and records the
probe's outputs. Then it gives the cluster accounting: a throw-away MariaDB (``mariadbd``
from Debian's ``mariadb-server``, loopback only), a slurmdbd and slurmctld restarted with
``accounting_storage/slurmdbd``. It ends one job in each way the parsers must read (through
the real adapter, as dispatch submits them) and writes what ``squeue``, ``scontrol``,
``sinfo``, ``sacct`` and the jobcomp file say about them, and the batch outputs of the jobs
srun reports on. Scratch paths become ``/scratch/slurm`` and the install prefix ``/prefix``.
Not a test: it takes about three minutes (one Slurm time-out). For Slurm 23.02 and later only
(``--json=<data_parser>``, ``scontrol --json``), built with slurmdbd's MySQL plugin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.adapters.slurm.commands import build_sacct_command
from dispatch.adapters.slurm.formats import parse_formats_output
from dispatch.adapters.slurm.script import BATCH_OUTPUT
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Job, Observation, State, parse_spec
from tests.slurm import realslurm

RECORDED = Path(__file__).parent / "recorded"
STARTED_THEN_SLEEP = ["sh", "-c", "echo started; exec sleep 300"]
GROW = (
    "import time\nx = []\nwhile True:\n    x.append(bytearray(50 * 2**20))\n    time.sleep(0.1)\n"
)


def job(name: str, **fields: object) -> Job:
    spec = parse_spec({"name": name, "cluster": "rec", **fields})
    return Job(id=name, spec=spec, created_at=1_800_000_000.0)


async def to_end(slurm: SlurmAdapter, handle: AttemptHandle) -> Observation:
    return [seen async for seen in slurm.watch([handle])][-1]


async def running(slurm: SlurmAdapter, handle: AttemptHandle, ranks: int) -> None:
    """Wait until every rank printed ``started``."""
    while True:
        outputs = [[line async for line in slurm.read_output(handle, rank=r)] for r in range(ranks)]
        if all("started" in lines for lines in outputs):
            return
        await asyncio.sleep(0.3)


async def ordinary_ends(slurm: SlurmAdapter, cluster: realslurm.RealSlurm) -> None:
    """COMPLETED, FAILED (exit 3 on rank 1), FAILED with an srun step out of memory,
    OUT_OF_MEMORY (the batch step itself), TIMEOUT, CANCELLED by scancel and by dispatch."""
    fail = 'if [ "$PET_NODE_RANK" = 1 ]; then exit 3; fi; sleep 30'
    ends = [
        job("ok", nodes=2, command=["sh", "-c", "echo ok"]),
        job("fail", nodes=2, command=["sh", "-c", fail]),
        job("oom", nodes=1, resources={"memory": "200Mi"}, command=["python3", "-c", GROW]),
        job("timeout", nodes=1, timeLimit="30s", command=["sleep", "300"]),
    ]
    handles = [await slurm.start(j, 1) for j in ends]
    batch_oom = cluster.run(
        "sbatch", "--parsable", "--no-requeue", "--job-name=dispatch-batchoom-a1",
        "--mem=100M", f"--output={cluster.scratch}/out/batchoom.out",
        "--wrap", f"python3 -c '{GROW}'",
    )  # fmt: skip
    cancel = await slurm.start(job("cancel", nodes=1, command=["sleep", "300"]), 1)
    run = await slurm.start(job("run", nodes=1, command=["sleep", "300"]), 1)
    await running_state(slurm, cancel)
    cluster.run("scancel", cancel.native)
    await running_state(slurm, run)
    await slurm.cancel(run, actor="alice", reason="recording")
    for handle in [*handles, cancel, run]:
        await to_end(slurm, handle)
    while cluster.run("squeue", "-h", "-j", batch_oom.stdout.strip(), "-o", "%T").stdout.strip():
        await asyncio.sleep(0.5)


async def running_state(slurm: SlurmAdapter, handle: AttemptHandle) -> None:
    async for seen in slurm.watch([handle]):
        if seen.state is State.RUNNING:
            return


async def node_failure(slurm: SlurmAdapter, cluster: realslurm.RealSlurm) -> None:
    """NODE_FAIL: the second node set DOWN while both tasks run."""
    handle = await slurm.start(job("nodefail", nodes=2, command=STARTED_THEN_SLEEP), 1)
    await running(slurm, handle, ranks=2)
    lost = cluster.nodes[1]
    cluster.run("scontrol", "update", f"nodename={lost}", "state=down", "reason=recording")
    await to_end(slurm, handle)
    cluster.run("scontrol", "update", f"nodename={lost}", "state=resume", check=False)
    cluster.wait_until_idle(*cluster.nodes, timeout=120)


async def preemption(slurm: SlurmAdapter, cluster: realslurm.RealSlurm) -> None:
    """PREEMPTED: both nodes whole, then a job of the higher-tier partition ``urgent``."""
    victim = job("preempted", nodes=2, resources={"cpu": 2}, command=STARTED_THEN_SLEEP)
    handle = await slurm.start(victim, 1)
    await running(slurm, handle, ranks=2)
    urgent = job("urgent", nodes=1, queue="urgent", resources={"cpu": 2}, command=["sleep", "300"])
    urgent_handle = await slurm.start(urgent, 1)
    await to_end(slurm, handle)
    await running_state(slurm, urgent_handle)
    await slurm.cancel(urgent_handle, actor="recording", reason="done")
    await to_end(slurm, urgent_handle)


async def still_there(slurm: SlurmAdapter) -> None:
    """A held PENDING job and a RUNNING one, left as they are."""
    await slurm.start(job("held", nodes=1, command=["true"]), 1, held=True)
    handle = await slurm.start(job("running", nodes=1, command=["sleep", "300"]), 1)
    await running_state(slurm, handle)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} is not listening on port {port} after {timeout:.0f} s")
        time.sleep(0.3)


SLURMDBD_CONF = """\
AuthType=auth/munge
AuthInfo=socket={scratch}/munge/munge.sock
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
PidFile={scratch}/run/slurmdbd.pid
LogFile={scratch}/log/slurmdbd.log
"""


def start_accounting(cluster: realslurm.RealSlurm) -> subprocess.Popen[bytes]:
    """Give the running cluster a slurmdbd over a throw-away MariaDB (loopback only, no grant
    tables), then restart slurmctld with ``accounting_storage/slurmdbd``. Returns mariadbd;
    slurmdbd's pid is in ``run/slurmdbd.pid``."""
    db = cluster.scratch / "db"
    subprocess.run(
        ["mariadb-install-db", "--user=root", f"--datadir={db}", "--skip-test-db"],
        check=True,
        capture_output=True,
    )
    db_port, dbd_port = free_port(), free_port()
    mariadbd = subprocess.Popen(
        ["mariadbd", "--user=root", f"--datadir={db}", f"--socket={db}/mariadb.sock",
         f"--port={db_port}", "--bind-address=127.0.0.1", "--skip-grant-tables",
         f"--pid-file={db}/mariadbd.pid", f"--log-error={cluster.scratch}/log/mariadbd.log"],
    )  # fmt: skip
    try:
        wait_for_port(db_port, "mariadbd")
        conf = cluster.scratch / "slurmdbd.conf"  # next to SLURM_CONF, where slurmdbd looks
        conf.write_text(
            SLURMDBD_CONF.format(scratch=cluster.scratch, db_port=db_port, dbd_port=dbd_port)
        )
        conf.chmod(0o600)
        cluster.run("slurmdbd")
        wait_for_port(dbd_port, "slurmdbd")
        text = cluster.conf.read_text().replace(
            "AccountingStorageType=accounting_storage/none",
            "AccountingStorageType=accounting_storage/slurmdbd\n"
            f"AccountingStorageHost=127.0.0.1\nAccountingStoragePort={dbd_port}\n"
            # clients reach slurmdbd with this munge socket, not AuthInfo's
            f"AccountingStoragePass=socket={cluster.scratch}/munge/munge.sock\n"
            "AccountingStoreFlags=job_comment",
        )
        cluster.conf.write_text(text)
        cluster.run("sacctmgr", "-i", "add", "cluster", "dispatchtest")
        pid = int((cluster.scratch / "run" / "slurmctld.pid").read_text())
        cluster.run("scontrol", "shutdown", "slurmctld")
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.2)
        # the controller registers anew with slurmdbd, which gives the cluster another id
        (cluster.scratch / "state" / "clustername").unlink(missing_ok=True)
        cluster.run("slurmctld", "-f", str(cluster.conf))
        deadline = time.monotonic() + 60
        while cluster.run("scontrol", "ping", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"slurmctld did not restart: {cluster.log('slurmctld.log')[-2000:]}"
                )
            time.sleep(0.3)
        cluster.run("scontrol", "reconfigure")
        cluster.wait_until_idle(*cluster.nodes, timeout=60)
    except BaseException:
        stop_accounting(cluster, mariadbd)
        raise
    return mariadbd


def stop_accounting(cluster: realslurm.RealSlurm, mariadbd: subprocess.Popen[bytes]) -> None:
    pid_file = cluster.scratch / "run" / "slurmdbd.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    mariadbd.terminate()
    mariadbd.wait(timeout=60)


def write(name: str, text: str, cluster: realslurm.RealSlurm, prefix: Path | None) -> None:
    """Write a recording with the machine's paths replaced (as is and as JSON escapes them)."""
    replaced = {str(cluster.scratch): "/scratch/slurm"}
    if prefix is not None:
        replaced[str(prefix)] = "/prefix"
    for path, shown in replaced.items():
        text = text.replace(path, shown).replace(
            path.replace("/", "\\/"), shown.replace("/", "\\/")
        )
    (RECORDED / name).write_text(text)
    print("wrote", RECORDED / name)


def saver(cluster: realslurm.RealSlurm) -> Callable[..., None]:
    def save(name: str, *argv: str) -> None:
        shown = cluster.run(*argv, check=False)
        write(name, shown.stdout or shown.stderr, cluster, realslurm.prefix())

    return save


def record_installation(cluster: realslurm.RealSlurm, release: str) -> None:
    """The probe's outputs, as the test cluster has them (no accounting)."""
    save = saver(cluster)
    save(f"sinfo-version-{release}.txt", "sinfo", "--version")
    save(f"scontrol-show-config-{release}.txt", "scontrol", "show", "config")
    save(f"scontrol-show-partition-{release}.txt", "scontrol", "--oneliner", "show", "partition")
    save(f"scontrol-show-node-{release}.txt", "scontrol", "--oneliner", "show", "node")
    save(f"squeue-json-list-{release}.txt", "squeue", "--json=list")


def record_jobs(cluster: realslurm.RealSlurm, release: str) -> None:
    """What each tool says about the scenario's jobs."""
    save = saver(cluster)
    prefix = realslurm.prefix()
    formats = parse_formats_output(cluster.run("squeue", "--json=list").stdout)
    for found in formats:
        newest = found == formats[-1]
        name = f"squeue-{release}.json" if newest else f"squeue-{release}-{found}.json"
        save(name, "squeue", "--states=all", f"--json={found}")
    save(f"scontrol-show-job-{release}.json", "scontrol", "show", "job", "--json")
    save(f"scontrol-show-job-{release}.txt", "scontrol", "--oneliner", "show", "job")
    save(f"sinfo-{release}.json", "sinfo", "--json")
    ids = sorted(cluster.run("squeue", "-h", "-t", "all", "-o", "%i").stdout.split(), key=int)
    save(f"sacct-{release}.json", "sacct", "--json", f"--jobs={','.join(ids)}")
    save(f"sacct-{release}.txt", *build_sacct_command(ids))
    write(f"jobcomp-{release}.txt", cluster.jobcomp.read_text(), cluster, prefix)
    for name in ("fail", "oom", "nodefail", "preempted"):
        batch = cluster.scratch / "out" / "rec" / f"dispatch-{name}-a1" / BATCH_OUTPUT
        write(f"batch-output-{name}-{release}.txt", batch.read_text(), cluster, prefix)


async def scenario(slurm: SlurmAdapter, cluster: realslurm.RealSlurm) -> None:
    await ordinary_ends(slurm, cluster)
    await node_failure(slurm, cluster)
    await preemption(slurm, cluster)
    await still_there(slurm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", help="the suffix of the files written, e.g. 24.11")
    release = parser.parse_args().release
    reason = realslurm.why_unavailable()
    if reason:
        raise SystemExit(reason)
    os.environ["PATH"] = realslurm.search_path()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # stop the daemons too
    cluster = realslurm.start(tag="x")
    mariadbd = None
    try:
        record_installation(cluster, release)
        mariadbd = start_accounting(cluster)
        os.chdir(cluster.scratch / "out")
        settings = {
            "slurmConf": str(cluster.conf),
            "outputDir": str(cluster.scratch / "out" / "rec"),
            "pollInterval": 0.3,
        }
        with tempfile.TemporaryDirectory() as state:
            slurm = SlurmAdapter(
                ClusterConfig(name="rec", adapter="slurm", settings=settings),
                AdapterContext(state_dir=Path(state)),
            )
            asyncio.run(scenario(slurm, cluster))
        record_jobs(cluster, release)
        cluster.run("scancel", "--user=root")  # the held and the running job
        while cluster.run("squeue", "-h", "-o", "%i").stdout.strip():
            time.sleep(0.5)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{exc.cmd} failed: {exc.stderr}") from None
    finally:
        os.chdir("/")
        if mariadbd is not None:
            stop_accounting(cluster, mariadbd)
        realslurm.stop(cluster)


if __name__ == "__main__":
    main()
