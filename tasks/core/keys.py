"""Per-store secret key files (``keys/*.key``): created at first use, private, never copied into outputs."""

from __future__ import annotations

import os
import secrets
import uuid

from nodewatch.tasks.core.store import Store


def store_key(store: Store, *parts: str) -> str:
    """The store's key file ``parts`` (64 hex digits), created at first use.

    On a local store the key file is created with mode 0600 in a 0700 directory, atomically and
    exclusively (written under a temporary name, then hard-linked into place: when two runs race, both
    use the one that won); a file found with looser permissions is tightened to 0600. On a remote
    store it is written once if absent (object stores have no modes: restrict the bucket). The key is
    returned to the caller only: it is never written to a manifest, log, report or artifact. A key file
    shorter than 32 characters is a ``ValueError`` (damaged: restore it).
    """
    path = store.path(*parts)
    if store.is_local:
        d = os.path.dirname(path)
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)
        if not os.path.exists(path):
            tmp = os.path.join(d, f".tmp-{uuid.uuid4().hex}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
        with open(path, encoding="ascii") as f:
            key = f.read().strip()
    else:
        if not store.exists(*parts):
            store.write_bytes(secrets.token_hex(32).encode(), *parts)
        key = store.fs.cat_file(path).decode("ascii").strip()
    if len(key) < 32:
        raise ValueError(f"the store's key {'/'.join(parts)} is damaged (too short); restore it")
    return key
