"""Fuzzed input *text* through the real entry points: job specs, config files, runtimes, dumps.

Each input kind gets ``cases`` inputs, made by families in turn (``FAMILIES``):

* ``value``: an example (examples/**, tests/dumps) loaded, one part replaced by an arbitrary
  or hostile value (huge, NUL, inf, deep, wrong type), written back as YAML or JSON;
* ``text``: an example with one to four text edits (lines dropped, doubled, swapped,
  re-indented, cut short, a hostile token put in place of a value);
* ``alias``: "billion laughs" of depth 2 to 12 and width 2 to 12 (some under the bound, most
  far over it), recursive aliases, merge keys, aliases as keys, undefined aliases;
* ``nesting``: flow (``[``, ``{a:``) and block (``- - -``, indented mappings) nesting from
  100 to 100,000 levels, closed or not;
* ``tags``: ``!!int``, ``!!float``, ``!!timestamp``, ``!!binary``, ``!!python/*``, unknown
  and verbatim tags, ``%TAG`` directives, tags on the wrong node kind;
* ``huge``: long strings and keys, huge decimal and hex integers, ``1e400``, ``.nan``, many
  keys, long lists, many documents;
* ``encoding``: NUL bytes, invalid UTF-8, BOMs (UTF-8 and UTF-16), CRLF, lone CR, tabs; as
  bytes where the entry point reads a file, else decoded with ``errors="replace"`` or
  ``"surrogateescape"``;
* ``dupkeys``: keys given twice (plain and quoted, top level and nested, merge keys).

Entry points and what counts as an answer (anything else is a crash; a case whose slowest
entry point took over ``LIMIT`` seconds is counted apart, as over the limit):

* ``spec``: ``parse_spec_text`` (``load_spec`` for bytes): a ``JobSpec`` or ``InvalidSpec``;
* ``config``: ``load_config`` on a file, then each cluster through its adapter's settings
  (the Kubeflow ``parse_settings``, ``SlurmSettings.from_cluster``, ``LocalAdapter`` and its
  numeric settings; all three for an unknown adapter): a value or ``ConfigError``;
* ``runtime``: ``yaml12.load`` + ``check_runtime`` (a verdict, or ``YAMLError`` for the
  load), and ``dispatch check-runtime FILE --output json`` (exit 0, 1 or 2);
* ``dump``: ``parse_dump`` (objects or ``ValueError``) and ``dispatch diagnose FILE --output
  json`` (exit 0 or 2), which also builds the evidence and diagnoses.

Each kind runs in its own subprocess; a case is made from ``(seed, kind, index)`` alone, so
when a case hangs (no answer within ``WATCHDOG`` seconds, even inside C code) the child is
killed, the case counted as a crash and over the limit, and a new child goes on after it.

    python -m bench.fuzz_text 200            # 200 cases of each kind, figures as JSON
    python -m bench.fuzz_text 200 --kind dump --show 17   # print case 17 of the dumps
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fuzz import _paths, _replace

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KINDS = ("spec", "config", "runtime", "dump")
FAMILIES = ("value", "text", "alias", "nesting", "tags", "huge", "encoding", "dupkeys")
#: a case answered later than this is a failure (the issue's bound)
LIMIT = 2.0
#: a case silent this long is a hang: its child is killed and the run goes on after it
WATCHDOG = 60.0
#: address space of a child: an input that makes dispatch allocate without bound fails there
MEMORY_BYTES = 4 << 30
NOW = "2026-01-01T00:00:00Z"

# --- the examples the families start from ---------------------------------------------------


def _texts(paths: list[Path]) -> list[str]:
    return [p.read_text() for p in sorted(set(paths))]


def _config_examples() -> list[str]:
    found = [(EXAMPLES / "kubeflow" / "config.yaml").read_text()]
    doc = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    found += [b.split("```", 1)[0] for b in doc.split("```yaml\n")[1:] if "clusters:" in b]
    found.append(
        "clusters:\n  - name: local\n    adapter: local\n    killGrace: 5\n"
        "    startTimeout: 30\n    memoryEnforcement: auto\n"
        "  - name: hpc\n    adapter: slurm\n    transport: local\n    partition: gpu\n"
        "    pollInterval: 10\n    masterPort: 29500\n    commandTimeout: 60\n"
        "    sshOptions: [-i, key]\n    port: 22\n"
        "  - name: kf\n    adapter: kubeflow\n    namespace: team\n    patience: 10m\n"
        "    publish: {via: env}\n    runtimes: [torch]\n    allowRankRestart: false\n"
    )
    return found


def bases(kind: str) -> list[str]:
    """The valid (and a few deliberately invalid) example texts of one input kind."""
    if kind == "spec":
        return _texts(
            list(EXAMPLES.glob("**/job*.yaml"))
            + list((EXAMPLES / "kubeflow" / "jobs").glob("*.yaml"))
            + list((EXAMPLES / "invalid").glob("*.yaml"))
        )
    if kind == "config":
        return _config_examples()
    if kind == "runtime":
        return _texts(list((EXAMPLES / "kubeflow" / "runtimes").glob("*.yaml")))
    if kind == "dump":
        dumps = ROOT / "tests" / "dumps"
        return _texts(
            list((EXAMPLES / "kubeflow" / "dumps").glob("*"))
            + [p for p in dumps.rglob("*") if p.suffix in (".yaml", ".json")]
        )
    raise ValueError(kind)


# --- hostile pieces -------------------------------------------------------------------------

TOKENS = (
    "~", "null", "true", "True", "yes", "on", "0", "-1", "1e400", "-1e400", ".inf", ".nan",
    "0x" + "f" * 40, "0o777", "0b101", "1_000", "2026-13-45", "2026-01-01T25:61:61Z",
    "12:30:45", "*undefined", "&a", "*", "!", "!!", "{", "}", "[", "]", ",", "'open", '"open',
    "|", ">", "- x", "? k", ": v", "---", "...", "%YAML 1.1", "#", "<<: *x", "\x00", "\t",
    "\ufeff", "\u2028", "\U0001f600", "!!int x", "!!float x", "!!timestamp x", "!!binary !!",
    "!!python/object/apply:os.system [id]", "!!python/name:os.system", "!foo bar",
    "!<tag:x,2000:y> z", "[[[[[", "{a: {b: {c:", "@x", "`x", "%x", "'", '"\\x"', '"\\uD800"',
)  # fmt: skip
TAGGED = (
    "!!int abc", "!!int 0x", "!!int " + "9" * 5000, "!!int 0x" + "f" * 5000, "!!float x",
    "!!float 1e400", "!!float .nan", "!!timestamp nope", "!!timestamp 2026-02-30",
    "!!timestamp 2026-01-01T99:00:00Z", "!!binary !!!", "!!binary " + "QUJD" * 50,
    "!!bool maybe", "!!null x", "!!str [a]", "!!map [a]", "!!seq {a: 1}", "!!set {a, b}",
    "!!omap [a]", "!!pairs {a: 1}", "!!python/object/apply:os.system [id]",
    "!!python/object:os.Popen {}", "!!python/name:os.system ''", "!!python/tuple [1, 2]",
    "!!python/bytes eA==", "!!python/complex 1+2j", "!foo bar", "!<tag:example.com,2000:x> y",
    "!local {a: 1}", "!!merge x", "!!value x", "!!yaml x", "!! x", "!<!> x", "!!int",
)  # fmt: skip


def _hostile_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(22 if depth < 3 else 16)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30])
    if pick == 3:
        return rng.choice([0.5, -0.0, 1e308, float("inf"), float("-inf"), float("nan")])
    if pick == 4:
        return rng.choice(["", " ", "0", "1.5", "16Ei", "10m", "-1", "a\x00b", "é", "\U0001f600"])
    if pick == 5:
        return "x" * rng.choice([100, 5_000, 100_000])
    if pick == 6:
        return rng.choice(TOKENS)
    if pick == 7:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 40)))
    if pick == 8:
        return list(range(rng.choice([1_000, 20_000])))
    if pick == 9:
        return {f"k{i}": i for i in range(rng.choice([100, 5_000]))}
    if pick == 10:
        nested: Any = "x"
        for _ in range(rng.choice([10, 150, 199, 250])):
            nested = [nested] if rng.random() < 0.5 else {"n": nested}
        return nested
    if pick == 11:
        return rng.choice(["/", "/" + "a" * 5000, "../../etc", "~", "a b", "$(id)", "`id`"])
    if pick in (12, 13, 14, 15):
        return rng.choice(["a", "b", 1, 2.5, "1", "true"])
    if pick < 19:
        return [_hostile_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {
        rng.choice(["a", "name", "", "0", "x" * 200]): _hostile_value(rng, depth + 1)
        for _ in range(rng.randrange(0, 4))
    }


def _dump(rng: random.Random, document: Any) -> str:
    import yaml

    if rng.random() < 0.3:
        return json.dumps(document, indent=rng.choice([None, 1]), default=str)
    return yaml.dump(
        document,
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
        sort_keys=False,
        allow_unicode=rng.random() < 0.5,
        default_flow_style=rng.choice([False, None, True]),
        width=rng.choice([80, 10_000_000]),
    )


# --- the families -----------------------------------------------------------------------------


def _value(rng: random.Random, base: str) -> str:
    from dispatch.model import yaml12

    documents = list(yaml12.load_all(base)) or [None]
    which = rng.randrange(len(documents))
    paths = _paths(documents[which])
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        path = paths[rng.randrange(len(paths))]
        documents[which] = _replace(documents[which], path, _hostile_value(rng))
        paths = _paths(documents[which])
    if rng.random() < 0.2 and isinstance(documents[which], dict):  # a hostile key, too
        documents[which] = {**documents[which], rng.choice(TOKENS): _hostile_value(rng)}
    return "---\n".join(_dump(rng, d) for d in documents)


def _text(rng: random.Random, base: str) -> str:
    lines = base.splitlines(keepends=True) or [""]
    for _ in range(rng.randrange(1, 5)):
        at = rng.randrange(len(lines))
        op = rng.randrange(8)
        if op == 0 and len(lines) > 1:
            del lines[at]
        elif op == 1:
            lines.insert(at, lines[at])
        elif op == 2:
            other = rng.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif op == 3:
            lines[at] = " " * rng.choice([1, 2, 3, 8]) + lines[at]
        elif op == 4:
            return "".join(lines)[: rng.randrange(len(base) + 1)]
        elif op == 5:  # a hostile token in place of a value
            head, colon, _ = lines[at].partition(": ")
            lines[at] = (
                (head + colon if colon else head.rstrip("\n") + " ") + rng.choice(TOKENS) + "\n"
            )
        elif op == 6:  # a hostile token anywhere in the line
            line = lines[at]
            cut = rng.randrange(len(line) + 1)
            lines[at] = line[:cut] + rng.choice(TOKENS) + line[cut:]
        else:
            lines.insert(at, rng.choice(TOKENS) + "\n")
    return "".join(lines)


def _laughs(depth: int, width: int, indent: str = "") -> tuple[str, str]:
    """Anchor lines of a billion-laughs bomb, and the alias of its last level."""
    lines = [f"{indent}l0: &a0 [{', '.join(['lol'] * width)}]\n"]
    for i in range(1, depth):
        lines.append(f"{indent}l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]\n")
    return "".join(lines), f"*a{depth - 1}"


def _top_value_lines(text: str) -> list[int]:
    return [
        i
        for i, line in enumerate(text.splitlines())
        if line[:1].isalpha() and ":" in line and not line.rstrip().endswith(":")
    ]


def _with_value(rng: random.Random, base: str, value: str) -> str:
    """``base`` with one top-level ``key: value`` line's value replaced (else a new key)."""
    lines = base.splitlines()
    spots = _top_value_lines(base)
    if spots and rng.random() < 0.8:
        at = rng.choice(spots)
        lines[at] = lines[at].split(":", 1)[0] + ": " + value
    else:
        lines.insert(rng.randrange(len(lines) + 1), f"{rng.choice(['x', 'name', 'kind'])}: {value}")
    return "\n".join(lines) + "\n"


def _alias(rng: random.Random, base: str) -> str:
    style = rng.randrange(7)
    if style <= 2:  # a bomb (depth, width) as its own key, its alias in place of a value
        depth, width = rng.randrange(2, 13), rng.randrange(2, 13)
        anchors, alias = _laughs(depth, width, "  ")
        body = _with_value(rng, base, alias)
        return ("anchors:\n" + anchors + body) if style else body.replace(alias, "&b x", 1)
    if style == 3:  # the whole document a bomb in one flow line
        depth, width = rng.randrange(2, 13), rng.randrange(2, 13)
        text = "[" + ", ".join(["lol"] * width) + "]"
        out = [f"- &a0 {text}"]
        out += [f"- &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
        return "\n".join(out) + "\n"
    if style == 4:  # recursive aliases
        return _with_value(
            rng,
            base,
            rng.choice(["&r [*r]", "&r {a: *r}", "&r [a, [b, [*r]]]", "&r {<<: *r}", "*r"]),
        )
    if style == 5:  # merge keys of merge keys
        depth = rng.randrange(2, 30)
        lines = ["m0: &m0 {a: 1, b: 2}"]
        lines += [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: {i}}}" for i in range(1, depth)]
        return "\n".join(lines) + "\n" + base
    # aliases as keys, undefined aliases, anchors without values
    return _with_value(
        rng, base, rng.choice(["{? *k : v}", "{&k a: 1, *k : 2}", "*nope", "&", "&a", "[&a, *a]"])
    )


def _nesting(rng: random.Random, base: str) -> str:
    depth = rng.choice([100, 199, 200, 201, 500, 1_000, 5_000, 10_000, 100_000])
    style = rng.randrange(6)
    closed = rng.random() < 0.7
    if style == 0:
        value = "[" * depth + ("]" * depth if closed else "")
    elif style == 1:
        value = "{a: " * depth + "1" + ("}" * depth if closed else "")
    elif style == 2:
        value = '{"a": ' * depth + "1" + ("}" * depth if closed else "")
        return value if rng.random() < 0.5 else _with_value(rng, base, value)
    elif style == 3:  # block sequences on one line: two characters a level
        return _with_value(rng, base, "\n  " + "- " * depth + "x")
    elif style == 4:  # indented block mappings (size grows with depth squared: capped)
        levels = min(depth, 3_000)
        return base + "deep:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(levels))
    else:
        value = "[{a: " * (depth // 2) + "1" + ("}]" * (depth // 2) if closed else "")
    return _with_value(rng, base, value)


def _tags(rng: random.Random, base: str) -> str:
    if rng.random() < 0.15:
        return (
            rng.choice(
                [
                    "%TAG ! tag:x,2000:\n---\n",
                    "%TAG !e! tag:e,2000:\n---\na: !e!x 1\n",
                    "%YAML 9.9\n---\n",
                ]
            )
            + base
        )
    body = base
    for _ in range(rng.randrange(1, 4)):
        body = _with_value(rng, body, rng.choice(TAGGED))
    return body


def _huge(rng: random.Random, base: str) -> str:
    n = rng.choice([10_000, 100_000, 1_000_000])
    style = rng.randrange(10)
    if style == 0:
        return _with_value(rng, base, "x" * n)
    if style == 1:
        return _with_value(rng, base, "9" * rng.choice([20, 4_300, 4_301, 50_000]))
    if style == 2:
        return _with_value(rng, base, "0x" + "f" * rng.choice([17, 5_000, 100_000]))
    if style == 3:
        return _with_value(
            rng, base, rng.choice(["1e400", "-1e400", ".nan", "-.inf", "1" * 400 + ".5"])
        )
    if style == 4:  # many keys
        keys = min(n, 200_000)
        return _with_value(rng, base, "{" + ", ".join(f"k{i}: {i}" for i in range(keys)) + "}")
    if style == 5:  # a long key
        return base + "x" * n + ": 1\n"
    if style == 6:  # a long list
        return _with_value(rng, base, "[" + "1, " * min(n, 300_000) + "1]")
    if style == 7:  # many documents (about 1 MB: bench/dumps.py times larger dumps)
        copies = max(2, min(rng.choice([100, 1_000]), 1_000_000 // len(base)))
        return (base + "\n---\n") * copies + "---\n" * min(n, 100_000)
    if style == 8:  # a long line of a block scalar
        return _with_value(rng, base, "|\n  " + "y" * n)
    return _with_value(rng, base, '"' + "\\u00e9" * (n // 6) + '"')


def _encoding(rng: random.Random, base: str) -> str | bytes:
    raw = base.encode()
    style = rng.randrange(9)
    if style == 0:  # NUL bytes
        at = rng.randrange(len(raw) + 1)
        raw = raw[:at] + b"\x00" * rng.choice([1, 3]) + raw[at:]
    elif style == 1:  # invalid UTF-8
        at = rng.randrange(len(raw) + 1)
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80"])
        raw = raw[:at] + bad + raw[at:]
    elif style == 2:
        raw = b"\xef\xbb\xbf" + raw
    elif style == 3:
        raw = rng.choice([b"\xff\xfe", b"\xfe\xff"]) + base.encode("utf-16-le")
    elif style == 4:
        raw = raw.replace(b"\n", b"\r\n")
    elif style == 5:
        raw = raw.replace(b"\n", b"\r")
    elif style == 6:  # tabs where spaces were
        raw = raw.replace(b"  ", b"\t", rng.choice([1, 3, -1]))
    elif style == 7:  # control characters
        at = rng.randrange(len(raw) + 1)
        raw = raw[:at] + bytes([rng.choice([1, 7, 8, 11, 12, 27, 127])]) + raw[at:]
    else:  # a BOM in the middle, or only a BOM
        raw = rng.choice(
            [b"\xef\xbb\xbf", raw[: len(raw) // 2] + b"\xef\xbb\xbf" + raw[len(raw) // 2 :]]
        )
    return raw


def _dupkeys(rng: random.Random, base: str) -> str:
    spots = _top_value_lines(base)
    style = rng.randrange(4)
    if style == 0 and spots:
        line = base.splitlines()[rng.choice(spots)]
        return base + line + "\n"
    if style == 1 and spots:
        key, _, value = base.splitlines()[rng.choice(spots)].partition(":")
        return base + f'"{key}":{value}\n'
    if style == 2:
        return _with_value(
            rng,
            base,
            rng.choice(["{a: 1, a: 2}", "{a: 1, 'a': 2}", "{1: a, '1': b}", "{~: a, null: b}"]),
        )
    return _with_value(rng, base, "{<<: {a: 1}, <<: {b: 2}}")


MAKERS = {
    "value": _value,
    "text": _text,
    "alias": _alias,
    "nesting": _nesting,
    "tags": _tags,
    "huge": _huge,
    "encoding": _encoding,
    "dupkeys": _dupkeys,
}


def case(kind: str, index: int, seed: int, examples: list[str]) -> tuple[str, str | bytes]:
    """Case ``index`` of ``kind``: its family and its input (the same for the same arguments)."""
    family = FAMILIES[index % len(FAMILIES)]
    rng = random.Random(f"{seed}:{kind}:{index}")
    base = examples[rng.randrange(len(examples))]
    try:
        made = MAKERS[family](rng, base)
    except Exception:  # an example the value family cannot load: a text edit instead
        made = _text(rng, base)
    if family != "encoding" and rng.random() < 0.05:
        made = made.encode()  # some text cases reach the entry point as a file's bytes
    return family, made


# --- the entry points -------------------------------------------------------------------------


class _Hung(BaseException):
    """Raised by the per-case alarm (a BaseException: no ``except Exception`` swallows it)."""


class Target:
    """The entry points of one input kind, with a scratch folder for the files they read."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.folder = folder
        self.file = folder / ("input.json" if kind == "dump" else "input.yaml")
        from click.testing import CliRunner

        from dispatch.cli.main import cli

        self.runner = CliRunner()
        self.cli = cli
        #: seconds each entry point took to answer the current case
        self.seconds: list[float] = []

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds.append(time.perf_counter() - began)

    def _write(self, made: str | bytes) -> None:
        self.file.write_bytes(
            made if isinstance(made, bytes) else made.encode("utf-8", "surrogateescape")
        )

    def _as_text(self, made: str | bytes, index: int) -> str:
        if isinstance(made, str):
            return made
        return made.decode("utf-8", "surrogateescape" if index % 2 else "replace")

    def _cli(self, args: list[str], allowed: tuple[int, ...]) -> tuple[str, str]:
        with self._timed():
            result = self.runner.invoke(self.cli, args)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        if result.exit_code not in allowed:
            raise AssertionError(f"exit {result.exit_code} (expected one of {allowed})")
        return ("accepted" if result.exit_code == 0 else "refused"), result.output

    def answer(self, made: str | bytes, index: int) -> tuple[str, str]:
        """``(outcome, message)``: ``accepted`` or ``refused`` and the longest text shown;
        any exception that escapes is a crash."""
        return getattr(self, self.kind)(made, index)  # type: ignore[no-any-return]

    def spec(self, made: str | bytes, index: int) -> tuple[str, str]:
        from dispatch.model.spec import InvalidSpec, load_spec, parse_spec_text

        try:
            if isinstance(made, bytes):
                self._write(made)
                with self._timed():
                    load_spec(self.file)
            else:
                with self._timed():
                    parse_spec_text(made)
        except InvalidSpec as exc:
            return "refused", str(exc)
        return "accepted", ""

    def config(self, made: str | bytes, index: int) -> tuple[str, str]:
        from dispatch.adapters.base import AdapterContext
        from dispatch.adapters.kubeflow.planning.settings import parse_settings
        from dispatch.adapters.local.adapter import LocalAdapter
        from dispatch.adapters.slurm.settings import SlurmSettings
        from dispatch.config import load_config
        from dispatch.model import ConfigError

        self._write(made)
        messages = []
        try:
            with self._timed():
                config = load_config(self.file, environ={})
        except ConfigError as exc:
            return "refused", str(exc)
        readers = {
            "kubeflow": parse_settings,
            "slurm": lambda c: SlurmSettings.from_cluster(c, self.folder),
            "local": lambda c: LocalAdapter(c, AdapterContext(state_dir=self.folder)),
        }
        for cluster in config.clusters.values():
            # each cluster through its adapter's settings; an unknown adapter through all
            for read in (
                [readers[cluster.adapter]] if cluster.adapter in readers else readers.values()
            ):
                try:
                    with self._timed():
                        read(cluster)
                except ConfigError as exc:
                    messages.append(str(exc))
        return ("refused" if messages else "accepted"), max(messages, key=len, default="")

    def runtime(self, made: str | bytes, index: int) -> tuple[str, str]:
        from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict, check_runtime
        from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
        from dispatch.model import yaml12

        message = ""
        text = self._as_text(made, index)
        try:
            with self._timed():
                raw = yaml12.load(text)
                verdict = check_runtime(raw, KubeflowSettings(allow_rank_restart=index % 3 == 0))
        except yaml12.YAMLError as exc:
            message = str(exc)
        else:
            if not isinstance(verdict, RuntimeVerdict):
                raise AssertionError(f"check_runtime gave {type(verdict).__name__}")
            message = " ".join(r.message for r in verdict.reasons)
        self._write(made)
        outcome, shown = self._cli(["check-runtime", str(self.file), "--output", "json"], (0, 1, 2))
        return outcome, max(message, shown, key=len)

    def dump(self, made: str | bytes, index: int) -> tuple[str, str]:
        from dispatch.adapters.kubeflow.causes.dump import parse_dump

        message = ""
        text = self._as_text(made, index)
        try:
            with self._timed():
                parse_dump(text)
        except ValueError as exc:
            message = str(exc)
        self._write(made)
        args = ["diagnose", str(self.file), "--output", "json", "--now", NOW]
        outcome, shown = self._cli(args, (0, 2))
        return outcome, max(message, shown, key=len)


def _where(exc: BaseException) -> str:
    """``Type: message (file:line in function)`` of the innermost frame under src/."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/dispatch/" in f.filename] or frames
    last = ours[-1] if ours else None
    at = f" ({Path(last.filename).name}:{last.lineno} in {last.name})" if last else ""
    return f"{type(exc).__name__}: {str(exc)[:160]}{at}"


def _alarm(signum: int, frame: Any) -> None:
    raise _Hung


def child(kind: str, start: int, stop: int, seed: int) -> None:
    """Answer cases ``start`` to ``stop - 1``: one JSON line each on standard output."""
    import signal

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    examples = bases(kind)
    with tempfile.TemporaryDirectory(prefix="dispatch-fuzz-") as folder:
        os.environ["DISPATCH_STATE_DIR"] = str(Path(folder) / "state")
        os.environ["DISPATCH_CONFIG"] = str(Path(folder) / "no-config.yaml")
        target = Target(kind, Path(folder))
        with contextlib.suppress(Exception):  # not counted: the first answer imports modules
            target.answer(examples[0], 0)
        for index in range(start, stop):
            family, made = case(kind, index, seed, examples)
            row: dict[str, Any] = {"i": index, "family": family, "bytes": len(made)}
            signal.alarm(int(WATCHDOG) // 2)
            began = time.perf_counter()
            target.seconds = []
            try:
                row["outcome"], message = target.answer(made, index)
                row["message"] = len(message)
                # the slowest entry point's answer (the bench's own file writes not counted)
                row["seconds"] = round(max(target.seconds, default=0.0), 4)
            except _Hung:
                row["outcome"], row["error"] = "crash", f"no answer in {WATCHDOG // 2:g} s"
            except BaseException as exc:  # every escape is what we count
                row["outcome"], row["error"] = "crash", _where(exc)
            finally:
                signal.alarm(0)
            row.setdefault("seconds", round(time.perf_counter() - began, 4))
            print(json.dumps(row), flush=True)


# --- the parent: one child per kind, restarted after a hang -----------------------------------


def _lines(process: subprocess.Popen[str], into: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.put(line)
    into.put(None)


def run_kind(kind: str, cases: int, seed: int = 0) -> dict[str, Any]:
    """Every case of one kind, in child processes; the figures of the table."""
    rows: list[dict[str, Any]] = []
    began = time.time()
    start = 0
    while start < cases:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.fuzz_text", "--child", kind, str(start), str(cases), str(seed)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_lines, args=(process, lines), daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=WATCHDOG)
            except queue.Empty:
                line = "hang"
            if line is None or line == "hang":
                process.kill()
                process.wait()
                done = rows[-1]["i"] + 1 if rows else start
                if done < cases:  # the case it was on never answered (or killed the child)
                    what = "hang" if line == "hang" else f"child ended ({process.returncode})"
                    rows.append(
                        {"i": done, "family": FAMILIES[done % len(FAMILIES)], "outcome": "crash",
                         "error": what, "seconds": WATCHDOG}
                    )  # fmt: skip
                start = done + 1
                break
            rows.append(json.loads(line))
        if rows and rows[-1]["i"] >= cases - 1:
            break
    return summarize(kind, rows, round(time.time() - began, 1))


def summarize(kind: str, rows: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    crashes = [r for r in rows if r["outcome"] == "crash"]
    slow = [r for r in rows if r["seconds"] > LIMIT]
    slowest = max(
        rows, key=lambda r: r["seconds"], default={"seconds": 0.0, "family": "-", "i": -1}
    )
    samples: dict[str, str] = {}
    for r in crashes:
        samples.setdefault(
            r["error"].split(" (")[0][:80], f"{kind} case {r['i']} ({r['family']}): {r['error']}"
        )
    families = {
        f: {
            "cases": sum(1 for r in rows if r["family"] == f),
            "crashes": sum(1 for r in crashes if r["family"] == f),
            "slowest": max((r["seconds"] for r in rows if r["family"] == f), default=0.0),
        }
        for f in FAMILIES
    }
    return {
        "kind": kind,
        "cases": len(rows),
        "accepted": sum(1 for r in rows if r["outcome"] == "accepted"),
        "refused": sum(1 for r in rows if r["outcome"] == "refused"),
        "crashes": len(crashes),
        "over2s": len(slow),
        "slowestSeconds": slowest["seconds"],
        "slowestCase": f"{slowest['i']}, {slowest['family']}",
        "longestMessage": max((r.get("message", 0) for r in rows), default=0),
        "longestMessageCase": max(rows, key=lambda r: r.get("message", 0), default={"i": -1})["i"],
        "largestInputBytes": max((r.get("bytes", 0) for r in rows), default=0),
        "seconds": seconds,
        "families": families,
        "crashSamples": list(samples.values())[:5],
        "slowSamples": [f"{kind} case {r['i']} ({r['family']}): {r['seconds']} s" for r in slow][
            :5
        ],
    }


def run(cases: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """Every input kind: ``{kind: figures}``."""
    return {kind: run_kind(kind, cases, seed) for kind in kinds}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        kind, start, stop, seed = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
        child(kind, start, stop, seed)
        return
    import argparse

    parser = argparse.ArgumentParser(description="fuzz dispatch's input text")
    parser.add_argument("cases", type=int)
    parser.add_argument("--kind", choices=KINDS, action="append")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, help="print this case of --kind instead")
    args = parser.parse_args(argv)
    kinds = tuple(args.kind or KINDS)
    if args.show is not None:
        family, made = case(kinds[0], args.show, args.seed, bases(kinds[0]))
        print(f"# {family}, {len(made)} {'bytes' if isinstance(made, bytes) else 'characters'}")
        print(repr(made[:3000]))
        return
    print(json.dumps(run(args.cases, args.seed, kinds), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
