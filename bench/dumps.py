"""``dispatch diagnose`` on large dumps: seconds and peak memory, YAML and JSON.

A dump of a whole namespace (``kubectl get pods,events,... -o yaml``) is mostly other
workloads' objects. Each size here is the report dump ``tests/dumps/app-error.yaml`` (a
failed TrainJob) plus pods and events of other jobs until the file reaches ``MiB``; the
diagnosis must stay the one of the small dump (application error of rank 1). Each size runs
``dispatch diagnose FILE -o json`` in its own process; memory is that process's own peak
resident set (``VmHWM``, which it reports as it exits: ``ru_maxrss`` of a child would start
from this process's peak, which holds the dump it generated).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "dumps" / "app-error.yaml"
#: the targets of issue 26 for a 50 MB dump
TARGET_SECONDS, TARGET_MIB = 30.0, 1024.0


def _padding(pod: dict[str, Any], event: dict[str, Any], pairs: int) -> list[dict[str, Any]]:
    """Pods and events of ``pairs`` other jobs."""
    extra: list[dict[str, Any]] = []
    for i in range(pairs):
        other = copy.deepcopy(pod)
        other["metadata"].update(name=f"other-{i}", uid=f"uid-{i}", labels={"app": f"a{i % 50}"})
        other["metadata"].pop("ownerReferences", None)
        seen = copy.deepcopy(event)
        seen["metadata"]["name"] = f"event-{i}"
        seen["involvedObject"] = {"kind": "Pod", "name": f"other-{i}", "uid": f"uid-{i}"}
        extra += [other, seen]
    return extra


def _text(document: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(document, indent=1)
    return yaml.dump(
        document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False
    )


def make_dump(path: Path, mib: int, as_json: bool) -> int:
    """Write the padded dump (``mib`` MiB, within a pair of objects); returns its bytes."""
    base = yaml.safe_load(BASE.read_text())
    items = base["items"]
    pod = next(i for i in items if i["kind"] == "Pod")
    event = next(i for i in items if i["kind"] == "Event")
    sample = 200
    per_pair = len(_text({"items": _padding(pod, event, sample)}, as_json)) / sample
    pairs = max(1, int((mib * 1024 * 1024 - len(_text(base, as_json))) / per_pair))
    document = {"apiVersion": "v1", "kind": "List", "items": items + _padding(pod, event, pairs)}
    text = _text(document, as_json)
    path.write_text(text)
    return len(text.encode())


#: ``dispatch diagnose ARGS``, then its own peak memory on stderr as it exits
CHILD = (
    "import atexit, resource, sys\n"
    "from bench.peak_rss import peak_rss_mib\n"
    "atexit.register(lambda: print(f'peak-mib {peak_rss_mib(resource.getrusage("
    "resource.RUSAGE_SELF)):.1f}', file=sys.stderr))\n"
    "from dispatch.cli.main import main\n"
    "sys.argv = ['dispatch', 'diagnose', *sys.argv[1:]]\n"
    "main()\n"
)


def diagnose(path: Path) -> tuple[float, float, dict[str, Any]]:
    """(seconds, the diagnosing process's peak MiB, the verdict as JSON)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"diagnose failed ({done.returncode}): {done.stderr[-500:]}")
    peak = float(done.stderr.rsplit("peak-mib ", 1)[1].split()[0])
    return seconds, peak, json.loads(done.stdout)


def run(sizes: list[int]) -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mib in sorted(sizes):
            for as_json in (False, True):
                path = Path(tmp) / f"dump-{mib}.{'json' if as_json else 'yaml'}"
                size = make_dump(path, mib, as_json)
                seconds, peak, verdict = diagnose(path)
                path.unlink()
                rows.append(
                    {
                        "format": "JSON" if as_json else "YAML",
                        "mib": round(size / 1024 / 1024, 1),
                        "seconds": round(seconds, 1),
                        "peakMiB": round(peak),
                        "cause": _cause(verdict),
                    }
                )
    return {"rows": rows, "targetSeconds": TARGET_SECONDS, "targetMiB": TARGET_MIB}


def _cause(verdict: Any) -> str:
    found = verdict[0] if isinstance(verdict, list) and verdict else verdict
    if not isinstance(found, dict):
        return "?"
    return f"{found.get('state')}/{found.get('cause')}"
