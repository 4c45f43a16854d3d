"""Check the store URL before a command starts a flow: a bad one is a one-line user error, not a flow traceback."""

from __future__ import annotations

import os
import tempfile


def check_store(url: str, write: bool) -> None:
    """Refuse an unusable store root with :class:`~nodewatch.flows.cli.UserError`.

    * the protocol must be known to fsspec (``--store foo://bar``: "unknown protocol 'foo'") and its
      implementation importable;
    * a local root must be a directory if it exists; with ``write``, the root (created if missing, as
      the flow would) must accept a new file (``NODEWATCH_STORE=/proc/x``: "not writable").
    """
    import fsspec

    from nodewatch.flows.cli import UserError

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except ValueError as e:  # fsspec: "Protocol not known: foo"
        proto = url.split("://", 1)[0] if "://" in url else url
        raise UserError(f"store {url!r}: unknown protocol {proto!r} ({e}); use a local path or e.g. s3://, gcs://, "
                        "memory://") from None
    except ImportError as e:
        raise UserError(f"store {url!r}: {e}") from None
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol not in ("file", "local"):
        return
    if os.path.exists(root) and not os.path.isdir(root):
        raise UserError(f"store {root}: exists and is not a directory")
    if not write:
        return
    try:
        os.makedirs(root, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UserError(f"store {root} is not writable: {e.strerror or e}") from None
