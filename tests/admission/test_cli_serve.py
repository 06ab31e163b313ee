"""`dispatch admission serve` and `dispatch admission certs` as a user runs them."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio")

from dispatch.adapters.kubeflow.admission import contract
from dispatch.adapters.kubeflow.admission.certs import CertFiles
from dispatch.cli import cmd_admission
from tests.admission.conftest import (
    KUEUE_USER,
    STRANGER,
    request,
    review,
    trainjob,
    with_suspend,
)
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]


def dispatch(*args: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dispatch", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,
    )  # fmt: skip


def _start_line(stderr: IO[str], within: float) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        line = stderr.readline()
        if not line:
            break
        found: dict[str, Any] = json.loads(line)
        if found["event"] == "start":
            return found
    raise AssertionError("no start line")


def serve(pair: CertFiles, *more: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    process = dispatch(
        "admission", "serve", "--cert-file", str(pair.cert), "--key-file", str(pair.key),
        "--address", "127.0.0.1", "--port", "0", *more,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        started = time.monotonic()
        line = _start_line(process.stderr, 15)
        assert time.monotonic() - started < 10, "ready within a few seconds"
        yield process, line["port"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def post(port: int, ca: Path, body: dict[str, Any]) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(ca))
    sent = urllib.request.Request(
        f"https://127.0.0.1:{port}{contract.PATH_IDENTITY}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(sent, context=context, timeout=10) as answer:
        found: dict[str, Any] = json.load(answer)
    return found


def test_serve_answers_and_stops_on_sigterm(pair: CertFiles) -> None:
    for process, port in serve(pair, "--no-events", "--identity", STRANGER):
        old = trainjob(ended="preempted")
        refused = post(port, pair.ca_cert, review(request(with_suspend(old, False), old)))
        assert refused["response"]["allowed"] is False
        changed = trainjob()
        changed["spec"]["trainer"]["numNodes"] = 9
        # --identity replaces the default: the stranger is dispatch now
        assert post(port, pair.ca_cert, review(request(changed, trainjob())))["response"]["allowed"]
        as_kueue = review(request(changed, trainjob(), user=KUEUE_USER))
        assert post(port, pair.ca_cert, as_kueue)["response"]["allowed"] is False
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
        assert process.returncode == 0
        events = [json.loads(line)["event"] for line in stderr.splitlines()]
        assert events.count("decision") == 3 and events[-1] == "stop"


def test_serve_takes_the_runtime_settings_of_a_cluster(pair: CertFiles, tmp_path: Path) -> None:
    runtime = yaml.safe_load(
        (EXAMPLES / "kubeflow" / "runtimes" / "torch-rank-restart.yaml").read_text()
    )
    runtime["metadata"].setdefault("labels", {})[contract.LABEL_CHECKED] = ""
    created = review(request(runtime, None))
    for _, port in serve(pair, "--no-events", "--config", str(EXAMPLES / "kubeflow" / "config.yaml"),
                         "--cluster", "kf-rank-restart"):  # fmt: skip
        answer = post(port, pair.ca_cert, created)["response"]
        assert answer["allowed"] is True
        assert any("allowRankRestart" in w for w in answer["warnings"])
    for _, port in serve(pair, "--no-events", "--runtime-selector", "tier=prod"):
        assert post(port, pair.ca_cert, created)["response"]["allowed"] is True  # not selected
    for _, port in serve(pair, "--no-events"):
        answer = post(port, pair.ca_cert, created)["response"]
        assert answer["allowed"] is False and answer["status"]["code"] == 422


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--cluster", "nope"), "nope"),
        (("--runtime-selector", "=x"), "selector"),
        (("--kubeconfig", "/nonexistent/kubeconfig"), "kubeconfig"),
    ],
)
def test_serve_refuses_bad_usage(pair: CertFiles, args: tuple[str, ...], expected: str) -> None:
    process = dispatch(
        "admission", "serve", "--cert-file", str(pair.cert), "--key-file", str(pair.key),
        "--address", "127.0.0.1", "--port", "0", *args,
    )  # fmt: skip
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2, stderr
    assert expected in stderr


def test_serve_without_a_certificate_is_bad_usage(tmp_path: Path) -> None:
    process = dispatch(
        "admission", "serve", "--cert-file", str(tmp_path / "no.crt"),
        "--key-file", str(tmp_path / "no.key"), "--port", "0", "--no-events",
    )  # fmt: skip
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "cannot load the certificate" in stderr


def test_certs_writes_a_pair_for_the_service(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    process = dispatch("admission", "certs", "--service", "dispatch-admission",
                       "--namespace", "dispatch", "--out", str(out), "-o", "json")  # fmt: skip
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    shown = json.loads(stdout)
    assert "dispatch-admission.dispatch.svc" in shown["dnsNames"]
    for key in ("caCert", "caKey", "cert", "key"):
        assert Path(shown[key]).exists()
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    assert (out / "ca.key").stat().st_mode & 0o777 == 0o600
    import base64

    assert base64.b64decode(shown["caBundle"]) == (out / "ca.crt").read_bytes()
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "dispatch-admission.dispatch.svc" in names.get_values_for_type(x509.DNSName)
    text = dispatch("admission", "certs", "--service", "s", "--namespace", "n", "--out", str(out))
    stdout, _ = text.communicate(timeout=30)
    assert text.returncode == 0
    assert "caBundle: " in stdout and "serving key: " in stdout


def test_the_cli_defaults_are_the_contract_s() -> None:
    assert cmd_admission.DEFAULT_IDENTITIES == contract.DEFAULT_IDENTITIES
    assert cmd_admission.DEFAULT_SELECTOR == (contract.LABEL_CHECKED,)
