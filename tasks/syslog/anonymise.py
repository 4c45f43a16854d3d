"""PaRS-style anonymisation of syslog messages (Ghiasvand & Ciorba, §II-C; PaRS, FICC 2018).

PaRS keeps the *template* of every message and replaces its variable and sensitive parts by keyed hashes, so
the frequency of each kind of message (and the SG of every node) is exactly that of the original log.
Here:

* the template of every line comes from the miner (:mod:`nodewatch.tasks.syslog.templates`); every token at a
  parameter position (``<*>``) is replaced by ``a0`` + the first 10 hex digits of HMAC-SHA256(site key, token);
* tokens of the template's constant part are hashed too (``k`` + 10 letters, no digit) when they look sensitive
  (IPv4 addresses, paths with a
  ``/``, e-mail addresses, the word after ``user``/``for``/``by``/``from`` and a parenthesised name like ``(root)``);
  numbers at parameter positions are kept when ``anonymise_numbers`` is off and the token is digits only;
* a parameter's hash always holds a digit and a constant's never does, so the masked shape of an anonymised
  line has its parameters where the original's template has them: the anonymised log mines to the same
  grouping of lines (tested, and measured in docs/syslog.md);
* the node column is kept (the vicinities need it); app names are kept.

The key: ``$NODEWATCH_SYSLOG_SECRET`` (settings ``syslog.secret_env``) or the per-store key file
``keys/syslog-anon.key`` (created at first use, 0600, like ``keys/user-hash.key``); it is never written to an
output. The mapping hash -> original is written encrypted (AES-GCM, key derived from the site key by HKDF), so
only holders of the key can reverse it (:func:`reveal`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterable

import pyarrow as pa

from nodewatch.tasks.core.keys import store_key
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.templates import PARAM

ANON_KEY = ("keys", "syslog-anon.key")
_SENSITIVE = re.compile(
    r"^(?:\(?\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?[),;]?|.*/.*|[^@\s]+@[^@\s]+\.[A-Za-z]{2,}|\([A-Za-z_][\w.-]{0,31}\))$", re.A
)
_CONTEXT = frozenset({"user", "for", "by", "from", "USER=", "user=", "ruser=", "rhost="})
_DIGITS = re.compile(r"^\d+$", re.A)
HASH_PREFIX = "a0"
CONST_PREFIX = "k"
_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


class AnonKeyError(ValueError):
    """The anonymisation key is missing or damaged (one line)."""


def anon_key(store: Store, secret_env: str = "NODEWATCH_SYSLOG_SECRET") -> bytes:
    """The site key: ``$secret_env`` if set (>= 16 chars), else ``keys/syslog-anon.key`` (created at first use)."""
    env = os.environ.get(secret_env)
    if env is not None:
        if len(env) < 16:
            raise AnonKeyError(f"${secret_env} is shorter than 16 characters; use a long random secret")
        return env.encode()
    try:
        return store_key(store, *ANON_KEY).encode()
    except (ValueError, UnicodeDecodeError):
        raise AnonKeyError(f"the store's syslog key {'/'.join(ANON_KEY)} is damaged (too short); restore it") from None


class Anonymiser:
    """Keyed hashing of the variable and sensitive tokens of templated messages (module doc)."""

    def __init__(self, key: bytes, numbers: bool = False) -> None:
        self._key = key
        self.numbers = numbers
        self.mapping: dict[str, str] = {}

    def token(self, tok: str, constant: bool = False) -> str:
        """Keyed hash of ``tok``: ``a0`` + 10 hex digits of HMAC-SHA256(key, tok) for a parameter (holds a digit,
        so it is masked like the original); for a constant ``k`` + the same 10 digits as letters ``a-p`` (no digit,
        so the template keeps a constant there). Remembered for the encrypted mapping."""
        hx = hmac.new(self._key, tok.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:10]
        h = CONST_PREFIX + hx.translate(_LETTERS) if constant else HASH_PREFIX + hx
        self.mapping.setdefault(h, tok)
        return h

    def line(self, message: str, template: str | None) -> str:
        """The anonymised message (template constants kept unless sensitive, parameters hashed)."""
        toks = message.split()
        ttoks = template.split() if template is not None else None
        if ttoks is not None and len(ttoks) != len(toks):
            ttoks = None  # no usable template (overflow, truncated): every token is treated as a parameter
        out = []
        prev = ""
        for i, tok in enumerate(toks):
            is_param = ttoks is None or ttoks[i] == PARAM
            if is_param:
                keep = not self.numbers and _DIGITS.match(tok) is not None
                out.append(tok if keep else self.token(tok))
            elif _SENSITIVE.match(tok) or prev in _CONTEXT:
                out.append(self.token(tok, constant=True))
            else:
                out.append(tok)
            prev = tok
        return " ".join(out)

    def messages(self, messages: Iterable[str], templates: Iterable[str | None]) -> list[str]:
        """:meth:`line` over two parallel iterables."""
        return [self.line(m or "", t) for m, t in zip(messages, templates, strict=True)]


def _aead(key: bytes):  # noqa: ANN202 - cryptography's AESGCM
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    k = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"nodewatch syslog anon map").derive(key)
    return AESGCM(k)


def seal_mapping(key: bytes, mapping: dict[str, str]) -> bytes:
    """The mapping hash -> original, encrypted (AES-GCM; 12-byte nonce first)."""
    nonce = secrets.token_bytes(12)
    return nonce + _aead(key).encrypt(nonce, json.dumps(mapping, sort_keys=True).encode(), b"v1")


def open_mapping(key: bytes, blob: bytes) -> dict[str, str]:
    """Decrypt :func:`seal_mapping`; :class:`AnonKeyError` with a wrong key or a damaged file."""
    from cryptography.exceptions import InvalidTag

    try:
        return json.loads(_aead(key).decrypt(blob[:12], blob[12:], b"v1"))
    except (InvalidTag, ValueError) as e:
        raise AnonKeyError(f"cannot open the mapping: wrong key or damaged file ({type(e).__name__})") from None


def reveal(key: bytes, blob: bytes, tokens: Iterable[str]) -> dict[str, str | None]:
    """Original of each hash token (``None`` when the mapping does not hold it)."""
    m = open_mapping(key, blob)
    return {t: m.get(t) for t in tokens}


def anonymise_table(rows: pa.Table, templates: dict[int, str], anon: Anonymiser) -> pa.Table:
    """``rows`` (with ``message`` and ``template_id``) with anonymised messages."""
    tids = rows["template_id"].to_pylist()
    msgs = rows["message"].to_pylist()
    out = anon.messages(msgs, [templates.get(t) for t in tids])
    return rows.set_column(rows.schema.get_field_index("message"), "message", pa.array(out, pa.string()))
