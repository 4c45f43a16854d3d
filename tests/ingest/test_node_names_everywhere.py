"""One name per node, in every source (issue 24): case, domain and topology aliases, one rule.

The same node is written ``CN0003.example.org``, ``cn0003``, ``CN0003`` and under its topology aliases
(``cn0003-ib``, ``CN0003-BMC``, ``pnnl-mpp2-n3``) in a file of every source and format; every staged
table and the telemetry cube hold the one name ``cn0003``. Before the rule was shared, telemetry kept
``CN0003.example.org`` as written (two rows of one node in the cube and the models).
"""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from nodewatch.schemas.names import canonical_nodes, normalise_node
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files, known_nodes_and_aliases
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.topology import load_topology
from nodewatch.tasks.ingest.validation import node_columns

DAY = date(2024, 3, 1)
T0 = int(datetime(2024, 3, 1, 6, 0, tzinfo=UTC).timestamp())
SPELLINGS = {"CN0003.example.org", "cn0003", "CN0003", "cn0003-ib", "CN0003-BMC", "pnnl-mpp2-n3", "CN0003.EXAMPLE.ORG"}

TOPOLOGY = (
    "node,rack,row,chassis,position,architecture,aliases\n"
    "CN0003.example.org,r01,row1,,,x86,cn0003-ib;CN0003-BMC;pnnl-mpp2-n3\n"
    "cn0004,r01,row1,,,x86,\n"
)


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _inputs() -> dict[str, dict[str, bytes]]:
    """source -> {file name: bytes}: every format that carries a node name, each with spellings of cn0003."""
    ts = [datetime.fromtimestamp(T0 + 60 * i, UTC) for i in range(3)]
    long_pq = pa.table(
        {
            "timestamp": ts,
            "node": ["CN0003", "cn0003.example.org", "CN0003-BMC"],
            "metric": ["load1"] * 3,
            "value": [1.0, 2.0, 3.0],
        }
    )
    turin = pa.table(
        {"date": ts, "power": [300.0, 310.0, 320.0], "cpu1": [40.0] * 3, "cpu2": [41.0] * 3, "cpus_alloc": [12.0] * 3}
    )
    return {
        "telemetry": {
            "long.csv": (
                b"timestamp,node,metric,value\n"
                b"2024-03-01T06:00:00Z,CN0003.example.org,temp_cpu0,40\n"
                b"2024-03-01T06:01:00Z,cn0003,temp_cpu0,41\n"
                b"2024-03-01T06:02:00Z,CN0003-BMC,temp_cpu0,42\n"
            ),
            "ldms.csv": (
                "#Time,Time_usec,ProducerName,component_id,job_id,temp_inlet\n"
                f"{T0 + 600}.0,0,cn0003-ib,1,0,20\n{T0 + 660}.0,0,CN0003.EXAMPLE.ORG,1,0,21\n"
            ).encode(),
            "long.parquet": _parquet(long_pq),
            "CN0003.example.org.parquet": _parquet(turin),
        },
        "syslog": {
            "messages.log": (
                b"<13>1 2024-03-01T06:00:00Z CN0003.example.org kernel - - - one\n"
                b"<13>1 2024-03-01T06:00:01Z cn0003-ib kernel - - - two\n"
                b"<13>1 2024-03-01T06:00:02Z CN0003-BMC kernel - - - three\n"
            ),
        },
        "jobs": {
            "sacct.log": (
                b"JobID|User|Group|Partition|State|Submit|Start|End|NNodes|NodeList\n"
                b"101|alice|users|batch|COMPLETED|2024-03-01T05:00:00|2024-03-01T05:10:00|2024-03-01T06:00:00|2|CN[0003-0004]\n"
            ),
        },
        "alerts": {
            "alerts.csv": (
                "time,node,service,state,state_type,attempt,output\n"
                f"{T0},CN0003.EXAMPLE.ORG,GPU,CRITICAL,HARD,1,hot\n{T0 + 60},cn0003-ib,GPU,OK,HARD,1,ok\n"
            ).encode(),
        },
        "tickets": {
            "tickets.csv": f"ticket_id,node,false_positive,opened,alert_time\nT-1,CN0003-BMC,no,{T0 + 120},{T0}\n".encode(),
        },
        "reservations": {
            "res.csv": b"name,start,end,nodes\nmaint,2024-03-01T08:00:00Z,2024-03-01T09:00:00Z,\"CN[0003-0004]\"\n",
        },
        "failures": {
            "pnnl.csv": (
                b"Date,Hardware Identifier,What Failed,Description of Failure,Action Taken\n"
                b"3/1/2024 7:00,node 3,DISK,io,REPLACE\n"
            ),
        },
    }


def _ingest(store: Store, source: str, files: dict[str, bytes], tmp: Path) -> None:
    d = tmp / source
    d.mkdir()
    paths = []
    for name, data in files.items():
        (d / name).write_bytes(data)
        paths.append(d / name)
    known, aliases = known_nodes_and_aliases(store) if source != "topology" else (None, {})
    res = ingest_files(
        store, sources()[source], paths, RunRecorder(store, "ingest", {}), known_nodes=known, aliases=aliases, data_docs=False
    )
    for r in res.inputs:
        assert r.status == "ingested", (source, r.path, r.message)
    assert res.counts.quarantined == 0, (source, [pq.read_table(f).to_pylist() for f in res.quarantine_files])


def _names(store: Store, table: str) -> set[str]:
    t = store.read_staged(table)
    assert t is not None and t.num_rows, table
    scalar, lists = node_columns(sources()[table].table)
    out: set[str] = set()
    for c in scalar:
        out |= {v for v in t.column(c).to_pylist() if v is not None}
    for c in lists:
        out |= {v for v in pc.list_flatten(t.column(c)).to_pylist() if v is not None}
    return out


def test_the_rule():
    assert normalise_node("CN0003.example.org") == ("cn0003", None)
    assert normalise_node("CN0003-BMC", {"cn0003-bmc": "cn0003"}) == ("cn0003", None)
    assert normalise_node("x.example.org", {"x.example.org": "cn0009"}) == ("cn0009", None)  # full-name alias wins
    assert normalise_node("10.1.2.3") == ("10.1.2.3", None)  # an IPv4 literal keeps its dots
    assert normalise_node("n\u043e01")[0] is None and normalise_node("../etc")[0] is None
    # refused names are kept as written for the validation to reject; two spellings share one code
    arr = canonical_nodes(pa.array(["CN0003", "cn0003.x", "../etc", None]).dictionary_encode())
    assert arr.to_pylist() == ["cn0003", "cn0003", "../etc", None] and arr.dictionary.to_pylist() == ["cn0003", "../etc"]


def test_one_name_for_a_node_in_every_source_and_the_cube(tmp_path):
    store = Store(str(tmp_path / "store"))
    _ingest(store, "topology", {"topology.csv": TOPOLOGY.encode()}, tmp_path)
    known, aliases, _ = load_topology(store)
    assert known == {"cn0003", "cn0004"}
    assert aliases == {"cn0003-ib": "cn0003", "cn0003-bmc": "cn0003", "pnnl-mpp2-n3": "cn0003"}
    assert _names(store, "topology") == {"cn0003", "cn0004"}

    inputs = _inputs()
    for source, files in inputs.items():
        _ingest(store, source, files, tmp_path)
    want = {"telemetry": {"cn0003"}, "syslog": {"cn0003"}, "jobs": {"cn0003", "cn0004"}, "alerts": {"cn0003"},
            "tickets": {"cn0003"}, "reservations": {"cn0003", "cn0004"}, "failures": {"cn0003"}}
    for table, names in want.items():
        got = _names(store, table)
        assert got == names, (table, got)
        assert not got & (SPELLINGS - {"cn0003"}), table
    # every telemetry file was staged under the one name: 3 + 2 + 3 + 3*4 rows
    assert store.read_staged("telemetry").num_rows == 20

    pytest.importorskip("dask.distributed")
    from nodewatch.api import open_cube
    from nodewatch.tasks.cubes.build import build_days, dask_client

    with dask_client(n_workers=1, processes=False) as c:
        build_days(store, "telemetry", [DAY], c)
    cube = open_cube("telemetry", store)
    nodes = [str(n) for n in cube["node"].values]
    assert "cn0003" in nodes and not set(nodes) & (SPELLINGS - {"cn0003"}), nodes
    mean = cube["mean"].sel(node="cn0003", metric="power")
    assert float(mean.max()) == pytest.approx(310.0)  # mean of 300, 310, 320 W: the Turin file named CN0003.example.org.parquet
