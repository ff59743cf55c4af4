"""Who syncs a machine name: the ``machines/<m>/claims/<epoch>`` objects.

A sync holds the name while the newest claim carries its token (docs/store.md, "Claims").
Claims are store content, so they are read as untrusted input: an object at a claim key
that is not a small JSON object with a string ``token`` (not JSON, ``[]``, a huge object)
is a claim by someone else: the sync refuses, naming the key, and ``--takeover`` claims
the next epoch above it. Keys that are not 8 ASCII digits are not claims at all.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

import orjson

from .client import AlreadyExists, StoreClient, StoreError, Unreachable
from .layout import KeyOutOfRange, StoreLayout

__all__ = ["Claim", "ClaimedElsewhere", "claim_body", "newest_claim", "take_claim"]

#: A claim is four short fields; anything bigger is not one (and is never fetched).
CLAIM_LIMIT = 4096


class ClaimedElsewhere(RuntimeError):
    """The machine name's newest claim belongs to another sync (or is not a claim)."""


@dataclass(frozen=True)
class Claim:
    key: str
    #: the claim's JSON object, or ``None`` when the object is not a claim
    body: dict[str, object] | None

    def token(self) -> str | None:
        token = self.body.get("token") if self.body is not None else None
        return token if isinstance(token, str) else None

    def holder(self) -> str:
        """Who holds it, for the refusal's one line."""
        if self.token() is None or self.body is None:
            return f"{self.key} is not a claim sessionfs wrote"
        return (
            f"another sync holds it (host {str(self.body.get('host', '?'))[:100]!r}, "
            f"claimed {str(self.body.get('created', '?'))[:40]!r}, {self.key})"
        )


def _parsed_body(data: bytes) -> dict[str, object] | None:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def newest_claim(client: StoreClient, layout: StoreLayout, machine: str) -> tuple[int, Claim]:
    """The newest claim of ``machine`` (epoch 0: none). Only its body is fetched: a flood
    of claim keys costs one listing, not a download each."""
    newest, key, size = 0, "", 0
    for item in client.list(layout.claims_prefix(machine)):
        parsed = layout.parse_machine_key(item.key)
        epoch = layout.parse_claim(parsed[1]) if parsed else None
        if epoch is not None and epoch > newest:
            newest, key, size = epoch, item.key, item.size
    if not newest:
        return 0, Claim("", None)
    body = None
    if 0 < size <= CLAIM_LIMIT:
        try:
            body = _parsed_body(client.get(key, CLAIM_LIMIT))
        except Unreachable:
            raise
        except StoreError:
            body = None  # vanished, too big by now, refused: not a claim we can read
    return newest, Claim(key, body)


def claim_body(token: str) -> bytes:
    return orjson.dumps(
        {
            "token": token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )


def take_claim(
    client: StoreClient, layout: StoreLayout, machine: str, token: str, takeover: bool
) -> tuple[int, bool]:
    """Hold the newest claim of ``machine``: ``(epoch, created now)``, or
    :class:`ClaimedElsewhere` (one line naming the key) when refused."""
    newest, claim = newest_claim(client, layout, machine)
    if newest and claim.token() == token:
        return newest, False
    if newest and not takeover:
        raise ClaimedElsewhere(
            f"machine name {machine!r}: {claim.holder()}; "
            "pick another --machine, or --takeover if that sync is gone for good"
        )
    try:
        key = layout.claim(machine, newest + 1)
    except KeyOutOfRange as error:
        raise ClaimedElsewhere(f"machine name {machine!r}: cannot claim it: {error}") from None
    try:
        client.put_if_absent(key, claim_body(token))
    except AlreadyExists:
        raise ClaimedElsewhere(
            f"machine name {machine!r}: another sync claimed it at the same moment ({key})"
        ) from None
    return newest + 1, True
