"""The S3 lease lock (``nodewatch.tasks.core.s3lease``) against the real S3 endpoint of ``infra/local/cluster.sh``.

Conditional puts are checked on the endpoint itself (a server that ignored ``If-None-Match`` would make
every test here pass vacuously). Then: a run holding a table's lease makes a second ingest of that table
on the same ``s3://`` store wait and end with one line (exit code 2); the holder SIGKILLed, the next ingest
takes the lease over at once (owner on this host, gone) and completes; a holder on "another host" keeps
its lease alive by renewing it and loses it once killed (expiry on the server's clock); the lease object
holds no secret.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from scaleout_helpers import BIN

from nodewatch.tasks.core.locks import LockBusyError, store_lock
from nodewatch.tasks.core.s3lease import S3Lease, precondition_failed
from nodewatch.tasks.core.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

HOLDER = """
import socket, sys
if sys.argv[3] != "-":
    socket.gethostname = lambda: sys.argv[3]  # pose as a holder on another host (lease expiry, not pid check)
from nodewatch.tasks.core.locks import store_lock
from nodewatch.tasks.core.store import Store
with store_lock(Store(sys.argv[1]), "staged", sys.argv[2], name="holder", timeout_s=30, lease_s=float(sys.argv[4])):
    print("held", flush=True)
    sys.stdin.read()
"""

CSV = "name,start,end,nodes,flags,users\nm0,2024-03-01T08:00:00,2024-03-01T12:00:00,n[001-002],MAINT,root\n"


@pytest.fixture(scope="module")
def s3(local_cluster):
    """(store URL, env with the endpoint's credentials) of a fresh prefix; the env is also set in this process."""
    local_cluster.need("s3")
    old = {k: os.environ.get(k) for k in local_cluster.env}
    os.environ.update(local_cluster.env)
    url = f"s3://{local_cluster.env['NODEWATCH_LOCAL_BUCKET']}/lease-{uuid.uuid4().hex[:8]}"
    yield url, local_cluster.full_env(NODEWATCH_STORE=url)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def hold(env: dict[str, str], url: str, lock: str, host: str = "-", lease_s: float = 60) -> subprocess.Popen:
    """A process holding ``staged/<lock>`` of ``url`` until its stdin closes (or it is killed)."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, url, lock, host, str(lease_s)], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().strip() == "held", p.stderr.read()
    return p


def test_the_endpoint_enforces_conditional_puts(s3):
    url, _ = s3
    st = Store(url)
    bucket, _, key = st.path("probe").partition("/")
    r = st.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"a", IfNoneMatch="*")
    with pytest.raises(Exception) as e1:
        st.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"b", IfNoneMatch="*")
    with pytest.raises(Exception) as e2:
        st.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"b", IfMatch='"0123"')
    assert precondition_failed(e1.value) and precondition_failed(e2.value)
    assert st.fs.cat_file(st.path("probe")) == b"a"  # neither conditional put wrote
    st.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=r["ETag"])
    assert not st.fs.exists(st.path("probe"))


def test_second_ingest_waits_then_fails_in_one_line_and_a_killed_holder_never_blocks(s3, local_cluster, tmp_path,
                                                                                     caplog):
    url, env = s3
    csv = tmp_path / "reservations.csv"
    csv.write_text(CSV)
    holder = hold(env, url, ".reservations.lock")
    try:
        obj = Store(url).fs.cat_file(Store(url).path("staged", ".reservations.lock")).decode()
        for secret in [*local_cluster.secrets(), env["AWS_SECRET_ACCESS_KEY"], env["AWS_ACCESS_KEY_ID"]]:
            assert secret not in obj  # owner, token, times and lease only
        cmd = [str(BIN / "nodewatch"), "--store", url, "ingest", "reservations", str(csv)]
        t = time.monotonic()
        r = subprocess.run(cmd, env={**env, "NODEWATCH_LOCK_TIMEOUT_S": "2"}, capture_output=True, text=True,
                           timeout=300)
        waited = time.monotonic() - t
        assert r.returncode == 2, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
        assert "lock ingest reservations" in lines[0] and f"pid {holder.pid}" in lines[0], lines[0]
        assert waited >= 2
        holder.send_signal(signal.SIGKILL)  # a writer killed mid-run: its lease object stays behind
        holder.wait(30)
        assert Store(url).fs.exists(Store(url).path("staged", ".reservations.lock"))
        from nodewatch.tasks.core.runs import RunRecorder
        from nodewatch.tasks.ingest.pipeline import ingest_files
        from nodewatch.tasks.ingest.registry import sources

        st = Store(url)
        with caplog.at_level(logging.WARNING, logger="nodewatch.locks"):
            ingest_files(st, sources()["reservations"], [csv], RunRecorder(st, "ingest", {}), data_docs=False)
        took = [m.getMessage() for m in caplog.records if "took over lock ingest reservations" in m.getMessage()]
        assert len(took) == 1 and f"pid {holder.pid}" in took[0] and "is gone" in took[0], took
        assert not st.fs.exists(st.path("staged", ".reservations.lock"))  # released at the end
        assert len(st.read_staged("reservations")) == 1
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_lease_of_another_host_is_renewed_while_it_lives_and_expires_once_it_is_killed(s3, caplog):
    url, env = s3
    st = Store(url)
    holder = hold(env, url, ".x.lock", host="other-host.example", lease_s=1.5)
    try:
        first = S3Lease(st.fs, st.path("staged", ".x.lock")).read()
        busy = r"held by host other-host\.example pid \d+ .*after its holder last renewed it\)$"
        with pytest.raises(LockBusyError, match=busy), store_lock(st, "staged", ".x.lock", name="x", timeout_s=3.5):
            pass  # 3.5 s > its 1.5 s lease: only renewals kept it
        assert S3Lease(st.fs, st.path("staged", ".x.lock")).read().etag != first.etag  # renewed meanwhile
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        t = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="nodewatch.locks"), store_lock(st, "staged", ".x.lock", name="x",
                                                                                   timeout_s=30):
            waited = time.monotonic() - t
            mine = S3Lease(st.fs, st.path("staged", ".x.lock")).read()
            assert mine.owner is not None and mine.owner.pid == os.getpid()
        assert 0.5 < waited < 15, waited  # about its lease (1 s resolution of Last-Modified), not the 30 s timeout
        assert any("expired" in r.getMessage() and "other-host.example" in r.getMessage() for r in caplog.records)
        assert not st.fs.exists(st.path("staged", ".x.lock"))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_two_waiters_for_one_stale_lease_one_takes_it(s3):
    url, _ = s3
    st = Store(url)
    path = st.path("staged", ".y.lock")
    bucket, _, key = path.partition("/")
    st.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"not a lease")  # garbage: stale after 1 s unchanged
    leases = [S3Lease(st.fs, path, name="y", timeout_s=4, busy_error=LockBusyError) for _ in range(2)]
    out: dict[int, str] = {}

    def take(i: int) -> None:
        try:
            leases[i].acquire()
            out[i] = "held"
        except LockBusyError:
            out[i] = "busy"

    threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out.values()) == ["busy", "held"], out  # the take-over is a conditional put: one winner
    winner = leases[[i for i, v in out.items() if v == "held"][0]]
    assert winner.read().etag == winner.etag
    winner.release()
    assert not st.fs.exists(path)
