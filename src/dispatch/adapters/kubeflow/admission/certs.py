"""Certificates for the guard's HTTPS server: a private CA and a serving pair it signs.

The API server calls a webhook over HTTPS only, and trusts it through the ``caBundle`` of the
webhook configuration. ``issue`` makes what a cluster without cert-manager needs: a CA
(``ca.crt``, ``ca.key``) and a serving certificate for the Service's DNS names
(``tls.crt``, ``tls.key``, the names a ``kubernetes.io/tls`` Secret uses), and returns the
CA's PEM in base64 for ``caBundle``. Keys are ECDSA P-256 (small, fast handshakes), files are
written atomically (a temporary file in the same directory, then a rename), keys with mode
0600, so a server reloading its certificate never reads half a file.

Tests and the benchmark issue a pair for ``localhost`` and ``127.0.0.1`` (IP addresses become
IP SANs).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertFiles", "issue", "service_names", "write_atomically"]


@dataclass(frozen=True, slots=True)
class CertFiles:
    """The files ``issue`` wrote, and the CA for ``caBundle``."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path
    #: base64 of the CA certificate's PEM: the webhook configuration's ``caBundle``
    ca_bundle: str
    #: the serving certificate's serial number (a reload test tells two pairs apart by it)
    serial: int


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use for a Service (it dials ``<svc>.<ns>.svc``)."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]  # fmt: skip


def issue(
    dns_names: Sequence[str],
    directory: Path,
    *,
    days: int = 365,
    now: Callable[[], datetime.datetime] | None = None,
) -> CertFiles:
    """Write a new CA and a serving certificate for ``dns_names`` (IP addresses allowed) into
    ``directory`` (made if missing); replaces the files there. ``ValueError`` for no names."""
    if not dns_names:
        raise ValueError("a serving certificate needs at least one DNS name")
    moment = (now or _utc_now)()
    start, end = moment - datetime.timedelta(minutes=5), moment + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dispatch-admission-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in dns_names]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    files = CertFiles(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        cert=directory / "tls.crt",
        key=directory / "tls.key",
        ca_bundle=base64.b64encode(ca_pem).decode("ascii"),
        serial=cert.serial_number,
    )
    write_atomically(files.ca_cert, ca_pem, mode=0o644)
    write_atomically(files.ca_key, _key_pem(ca_key), mode=0o600)
    # the key first: a server polling both files sees the pair change together, or the
    # new key with the old certificate (refused, the old pair kept) and then both
    write_atomically(files.key, _key_pem(key), mode=0o600)
    write_atomically(files.cert, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return files


def write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    """Replace ``path`` with ``data`` in one rename; the file has ``mode`` from its birth."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
