"""Who may act through the UI: the per-start token and the same-origin checks. Pure.

Actions (cancel, release, hold) are off unless the server was started with
``--allow-actions``. Then every action request must carry the token printed at start (header
``X-Dispatch-Token``; compared in constant time) and come from the UI's own pages: its
``Origin`` must be the server's own origin, and its ``Host`` one the server answers to. A page
of another site cannot read the token (the same-origin policy) nor pass these checks; a DNS
name rebound to the loopback address fails the ``Host`` check.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

TOKEN_HEADER = "X-Dispatch-Token"


def new_token() -> str:
    """A fresh random token (256 bits), made once per start."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values a server bound to ``host``:``port`` answers; None: any (bound to
    another interface, the names it is reached by are not known here)."""
    if not is_loopback(host):
        return None
    names = {host, "localhost", "127.0.0.1", "[::1]"}
    return frozenset(f"{name}:{port}" for name in names)


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int  # the HTTP status to answer
    reason: str


@dataclass(frozen=True, slots=True)
class Guard:
    """The checks of one server start; ``token`` is None when actions are off."""

    token: str | None
    hosts: frozenset[str] | None

    def check_host(self, headers: Mapping[str, str]) -> Refusal | None:
        """Every request: the ``Host`` must be one the server answers to."""
        if self.hosts is not None and headers.get("Host", "") not in self.hosts:
            return Refusal(421, "this server answers only to its own loopback address")
        return None

    def check_action(self, headers: Mapping[str, str]) -> Refusal | None:
        """An action request: actions on, same origin, and the token."""
        if self.token is None:
            return Refusal(403, "actions are off: start the UI with `dispatch ui --allow-actions`")
        refused = self.check_host(headers)
        if refused is not None:
            return refused
        host = headers.get("Host", "")
        if headers.get("Origin") not in (f"http://{host}", f"https://{host}"):
            return Refusal(403, "refused: the request does not come from this UI's own pages")
        if headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return Refusal(403, "refused: the request does not come from this UI's own pages")
        given = headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return Refusal(403, "refused: the action token is missing or wrong")
        return None
