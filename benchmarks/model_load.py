"""Loading per-node model files: one ``fs.cat`` of every file (now) vs one ``open``/``read`` per file (before).

Scoring loads the weights and JSON of each node of a batch (``tasks/anomaly/registry.py: load_models``). Before
29 Nov every file was opened and read in turn, so on an object store a batch of B nodes waited for 2·B GET round
trips one after the other; now the batch's files are fetched in one ``fs.cat`` call (s3fs runs the GETs
concurrently) and then checked node by node as before (sha256, safetensors).

Writes ``--nodes`` node files (a real safetensors blob of ``--kib`` KiB and its JSON with the sha256, as
``write_node`` does) under a temporary store, then times loading them in batches of ``--batch`` nodes both ways,
interleaved, ``--repeat`` times (medians). Local disk always; the S3 endpoint too when ``AWS_ENDPOINT_URL`` is set
(the one-host cluster: ``. "$(infra/local/cluster.sh env)"``), under ``s3://$NODEWATCH_LOCAL_BUCKET/bench-<id>``
(deleted at the end). Prints the walls and ``ratio=<before / now>`` of the last store measured (S3 if present).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
import uuid

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save


def before(store, prefix: tuple[str, ...], nodes: list[str]) -> list[dict]:
    """The loader as before 29 Nov: per node, read the JSON, then the weights, each by its own open/read."""
    out = []
    for node in nodes:
        meta = store.read_json(*prefix, "nodes", f"{node}.json")
        with store.fs.open(store.path(*prefix, "nodes", f"{node}.safetensors"), "rb") as f:
            blob = f.read()
        assert hashlib.sha256(blob).hexdigest() == meta["weights_sha256"]
        out.append(st_load(blob))
    return out


def main() -> None:
    """Write the node files, time both loaders per store, print ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32, help="nodes per load (scoring loads one node batch)")
    ap.add_argument("--kib", type=int, default=64, help="weights per node")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from nodewatch.tasks.anomaly.registry import _node_files, run_prefix
    from nodewatch.tasks.core.store import Store

    rng = np.random.default_rng(0)
    names = [f"cn{i:04d}" for i in range(a.nodes)]
    urls = [tempfile.mkdtemp(prefix="nodewatch-bench-models-")]
    if os.environ.get("AWS_ENDPOINT_URL"):
        urls.append(f"s3://{os.environ.get('NODEWATCH_LOCAL_BUCKET', 'nodewatch')}/bench-{uuid.uuid4().hex[:8]}")
    ratio = None
    for url in urls:
        st = Store(url)
        run = "bench"
        prefix = (run_prefix("exp", run),)
        t = time.perf_counter()
        for n in names:
            blob = st_save({"w": rng.standard_normal(a.kib * 256).astype(np.float32)})
            st.write_bytes(blob, *prefix, "nodes", f"{n}.safetensors")
            st.write_bytes(json.dumps({"weights_sha256": hashlib.sha256(blob).hexdigest(),
                                       "weights_bytes": len(blob)}).encode(), *prefix, "nodes", f"{n}.json")
        where = "s3" if url.startswith("s3://") else "local disk"
        print(f"{where}: wrote {a.nodes} nodes x 2 files in {time.perf_counter() - t:.1f} s", flush=True)
        batches = [names[i:i + a.batch] for i in range(0, len(names), a.batch)]
        walls: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(a.repeat):
            t = time.perf_counter()
            old = [before(st, prefix, b) for b in batches]
            walls["before"].append(time.perf_counter() - t)
            t = time.perf_counter()
            new = [_node_files(st, "exp", run, b, skip_bad=False)[0] for b in batches]
            walls["now"].append(time.perf_counter() - t)
            same = all(np.array_equal(o["w"], n[node][0]["w"]) for ob, nb, b in zip(old, new, batches, strict=True)
                       for o, node in zip(ob, b, strict=True) for n in [nb])
            assert same, "the two loaders disagree"
        m = {k: statistics.median(v) for k, v in walls.items()}
        ratio = m["before"] / m["now"]
        print(f"{where}: {a.nodes} nodes in batches of {a.batch}: before {m['before']:.3f} s, now {m['now']:.3f} s "
              f"(medians of {a.repeat}; load {os.getloadavg()[0]:.1f}); same arrays: True; ratio_{where.split()[0]}="
              f"{ratio:.2f}", flush=True)
        st.fs.rm(st.path(), recursive=True)
    print(f"ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
