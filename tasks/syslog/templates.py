"""Syslog templates: every message -> (template id, parameters), mined with drain3 on distinct masked shapes.

The miner is drain3's :class:`drain3.drain.Drain` (He et al., "Drain: an online log parsing approach with fixed
depth tree", ICWS 2017). What we add around it, measured in ``benchmarks/syslog_templates.py``:

1. **Masking**: every whitespace-separated token that holds a digit becomes ``<*>`` (the Loghub/Drain "numeric
   token" rule, applied before the tree instead of inside it), so ``core.2275`` and ``core.3187`` give the same
   *shape*. Done by one compiled pass over the bytes (:mod:`nodewatch.tasks.syslog._kernel`: token bounds, digit
   flags, a 64-bit hash of the masked token sequence); ``compiled=False`` is the pyarrow/RE2 reference path
   (same ids and parameters on text whose tokens are separated by single spaces, tested).
2. **Dedupe before drain3**: a day of syslog has few distinct shapes (the simulator's 1000-node day:
   ~300k lines, a few hundred shapes); each distinct shape goes through the drain3 tree once, in order of
   first appearance, and every line takes its shape's cluster. This is where the throughput comes from.
3. **Parameters** of a line: its tokens at the positions where the final template holds ``<*>`` (one numpy
   pass over all tokens; a line whose token count differs from its template's gets null parameters).
4. **Bounds** (hostile input): a message is mined on its first ``max_message_chars`` characters (its
   parameters are then null and the row counts as ``truncated``); at most ``max_new_templates`` new
   clusters per run; once reached, every shape not seen earlier in this run gets template id ``-1`` and counts as
   ``overflow`` (the row is kept, never dropped; its message stays in ``staged/syslog``).
5. **Stable ids**: the miner state (cluster id, template tokens, size) is saved as plain JSON (no pickle)
   and rebuilt into a drain3 tree the next night, so old templates keep their id and new ones get new ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from drain3.drain import Drain, LogCluster

PARAM = "<*>"
OVERFLOW_ID = -1
"""Template id of a line whose shape would have needed a new template after the per-run cap."""
_DIGIT_TOKEN = r"(^|\s)\S*[0-9]\S*"
STATE_VERSION = 1
MAX_SHAPE_CACHE = 200_000
"""Shapes remembered per run (shape -> id), so a shape seen in an earlier batch of the run skips the tree."""


def mask(messages: pa.Array, max_chars: int) -> pa.Array:
    """The masked *shape* of every message: tokens holding a digit -> ``<*>``, cut to ``max_chars`` characters."""
    m = pc.utf8_slice_codeunits(pc.cast(messages, pa.large_string()), 0, max_chars)
    return pc.replace_substring_regex(m, _DIGIT_TOKEN, r"\1" + PARAM)


@dataclass
class MineCounts:
    """What one :meth:`TemplateMiner.assign` call saw."""

    rows: int = 0
    shapes: int = 0
    new_templates: int = 0
    overflow: int = 0
    truncated: int = 0
    param_mismatch: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain dict for manifests."""
        return dict(self.__dict__)


@dataclass
class Assignment:
    """Template ids and parameters of a batch of messages (same order as the input)."""

    template_id: np.ndarray
    params: pa.Array
    """``list<string>`` per line; null where the line was truncated or its token count differs from the template."""
    counts: MineCounts = field(default_factory=MineCounts)


class MaskedDrain(Drain):
    """drain3's Drain where a masked token of the line (``<*>``) agrees with a ``<*>`` of the template.

    drain3 skips template parameters in the similarity (Drain §3.3, ``simSeq``), which is right for raw lines
    but wrong for pre-masked shapes: a restored tree would no longer match the very shapes it was built from
    (``Connection closed by <*> port <*>`` would be 4/6 similar to itself). Only this one method changes.
    """

    def get_seq_distance(self, seq1, seq2, include_params: bool):  # noqa: ANN001, ANN201 - drain3's signature
        """Similarity of template ``seq1`` and line ``seq2``, and the template's parameter count."""
        if len(seq1) == 0:
            return 1.0, 0
        p = self.param_str
        sim = params = 0
        for t1, t2 in zip(seq1, seq2, strict=True):
            if t1 == p:
                params += 1
                if t2 == p or include_params:
                    sim += 1
            elif t1 == t2:
                sim += 1
        return sim / len(seq1), params


class TemplateMiner:
    """drain3 behind masking, dedupe, a per-run cap and a JSON state (module doc)."""

    def __init__(self, sim_th: float = 0.4, depth: int = 4, max_children: int = 100,
                 max_new_templates: int = 2000, max_message_chars: int = 4096, compiled: bool = True) -> None:
        self.drain = MaskedDrain(depth=depth, sim_th=sim_th, max_children=max_children, parametrize_numeric_tokens=True)
        self.max_new_templates = max_new_templates
        self.max_message_chars = max_message_chars
        self.compiled = compiled
        """One compiled pass over the bytes (default); ``False``: the pyarrow/RE2 reference path (same results on
        ASCII text; the compiled pass cuts at ``max_message_chars`` bytes, the reference at characters)."""
        self.created_this_run = 0
        self._shape_ids: dict[str, int] = {}

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """JSON-able state: config + clusters (id, template tokens, size)."""
        d = self.drain
        return {
            "version": STATE_VERSION,
            "config": {"sim_th": d.sim_th, "depth": d.log_cluster_depth, "max_children": d.max_children},
            "next_id": d.clusters_counter + 1,
            "clusters": [{"id": c.cluster_id, "tokens": list(c.log_template_tokens), "size": c.size}
                         for c in sorted(d.clusters, key=lambda c: c.cluster_id)],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], **limits: int) -> TemplateMiner:
        """Rebuild a miner from :meth:`state` (ids and templates kept); ``ValueError`` on a malformed state."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError("syslog miner state: unknown version")
        cfg = state.get("config") or {}
        try:
            m = cls(sim_th=float(cfg["sim_th"]), depth=int(cfg["depth"]), max_children=int(cfg["max_children"]),
                    **limits)
            for c in state["clusters"]:
                cid, toks, size = int(c["id"]), [str(t) for t in c["tokens"]], int(c["size"])
                cl = LogCluster(toks, cid)
                cl.size = size
                m.drain.id_to_cluster[cid] = cl
                m.drain.add_seq_to_prefix_tree(m.drain.root_node, cl)
            m.drain.clusters_counter = max(int(state["next_id"]) - 1, max(m.drain.id_to_cluster, default=0))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"syslog miner state is malformed ({type(e).__name__}: {e})") from None
        return m

    # ------------------------------------------------------------------ mining
    def _add_shape(self, shape: str) -> int:
        known = self._shape_ids.get(shape)
        if known is not None:
            return known
        d = self.drain
        if self.created_this_run >= self.max_new_templates:
            # after the cap, only shapes seen before are assigned (drain3's search of an unseen shape in a tree
            # full of hostile clusters is linear in the clusters: quadratic over a run of unique lines)
            return OVERFLOW_ID
        cluster, change = d.add_log_message(shape)
        if change == "cluster_created":
            self.created_this_run += 1
        if len(self._shape_ids) < MAX_SHAPE_CACHE:
            self._shape_ids[shape] = int(cluster.cluster_id)
        return int(cluster.cluster_id)

    def templates(self) -> dict[int, str]:
        """Current template text per id."""
        return {int(c.cluster_id): " ".join(c.log_template_tokens) for c in self.drain.clusters}

    def assign(self, messages: pa.Array | list[str]) -> Assignment:
        """Template id and parameters of every message (module doc, steps 1-4)."""
        if isinstance(messages, list):
            try:
                msgs = pa.array(messages, pa.large_string())
            except UnicodeEncodeError:  # lone surrogates from a caller's str: replaced (staged data is valid UTF-8)
                msgs = pa.array([None if m is None else m.encode("utf-8", "replace").decode("utf-8") for m in messages],
                                pa.large_string())
        else:
            msgs = pc.cast(messages, pa.large_string())
        msgs = pc.fill_null(msgs, "")
        counts = MineCounts(rows=len(msgs))
        if len(msgs) == 0:
            return Assignment(np.zeros(0, np.int64), pa.nulls(0, pa.list_(pa.string())), counts)
        if isinstance(msgs, pa.ChunkedArray):
            msgs = msgs.combine_chunks()
        if self.compiled:
            return self._assign_compiled(msgs, counts)
        shapes = mask(msgs, self.max_message_chars).dictionary_encode()
        if isinstance(shapes, pa.ChunkedArray):
            shapes = shapes.combine_chunks()
        dictionary = shapes.dictionary.to_pylist()
        counts.shapes = len(dictionary)
        before = self.created_this_run
        shape_cid = np.fromiter((self._add_shape(s) for s in dictionary), np.int64, len(dictionary))
        counts.new_templates = self.created_this_run - before
        codes = shapes.indices.to_numpy(zero_copy_only=False)
        tid = shape_cid[codes]
        counts.overflow = int((tid == OVERFLOW_ID).sum())
        lengths = pc.utf8_length(msgs).to_numpy(zero_copy_only=False)
        truncated = lengths > self.max_message_chars
        counts.truncated = int(truncated.sum())
        params, mismatch = self._params(msgs, tid, truncated)
        counts.param_mismatch = mismatch
        return Assignment(tid, params, counts)

    def _assign_compiled(self, msgs: pa.Array, counts: MineCounts) -> Assignment:
        """:meth:`assign` through one compiled pass over the bytes (:mod:`nodewatch.tasks.syslog._kernel`)."""
        import pandas as pd

        from nodewatch.tasks.ingest._syslog_kernel import strings
        from nodewatch.tasks.syslog import _kernel as kern

        n = len(msgs)
        bufs = msgs.buffers()
        offsets = np.frombuffer(bufs[1], np.int64)[msgs.offset:msgs.offset + n + 1]
        buf = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
        mx = self.max_message_chars
        ntok = kern.count_tokens(buf, offsets, mx)
        h, ts, te, td = kern.scan(buf, offsets, mx, ntok)
        # shapes in order of first appearance, as drain3 would see them (a hash table, not a sort)
        inv, uniq = pd.factorize(h, sort=False)
        first = kern.first_rows(inv, len(uniq))
        tok0 = np.concatenate([[0], np.cumsum(ntok)])
        shape_cid = np.empty(len(uniq), np.int64)
        before = self.created_this_run
        for u in range(len(uniq)):
            r = int(first[u])
            toks = [PARAM if td[k] else buf[ts[k]:te[k]].tobytes().decode("utf-8", "replace")
                    for k in range(tok0[r], tok0[r + 1])]
            shape_cid[u] = self._add_shape(" ".join(toks))
        counts.shapes = len(uniq)
        counts.new_templates = self.created_this_run - before
        tid = shape_cid[inv]
        counts.overflow = int((tid == OVERFLOW_ID).sum())
        truncated = np.diff(offsets) > mx
        counts.truncated = int(truncated.sum())
        tpl = {int(c.cluster_id): c.log_template_tokens for c in self.drain.clusters}
        ids = np.array(sorted(tpl), np.int64)
        if len(ids) == 0:
            return Assignment(tid, pa.nulls(n, pa.list_(pa.string())), counts)
        tlen = np.array([len(tpl[i]) for i in ids], np.int64)
        toff = np.concatenate([[0], np.cumsum(tlen)[:-1]])
        flags = np.fromiter((t == PARAM for i in ids for t in tpl[i]), bool, int(tlen.sum()))
        lut = np.full(int(ids[-1]) + 2, -1, np.int64)  # template id + 1 -> position in ids (-1: none)
        lut[ids + 1] = np.arange(len(ids))
        pos_of = lut[np.clip(tid, OVERFLOW_ID, int(ids[-1])) + 1]
        known = (pos_of >= 0) & ~truncated
        pos_of = np.maximum(pos_of, 0)
        ok = known & (ntok == tlen[pos_of])
        counts.param_mismatch = int((known & ~ok).sum())
        idx, per_row = kern.param_tokens(ntok, ok, toff[pos_of], flags)
        values = strings(buf, int(offsets[-1]), ts[idx], te[idx])
        new_off = np.zeros(n + 1, np.int32)
        np.cumsum(per_row, out=new_off[1:])
        params = pa.ListArray.from_arrays(pa.array(new_off, pa.int32()), values, mask=pa.array(~ok))
        return Assignment(tid, params, counts)

    def _params(self, msgs: pa.Array, tid: np.ndarray, skip: np.ndarray) -> tuple[pa.Array, int]:
        """Tokens of each message at the ``<*>`` positions of its template (vectorised)."""
        tpl = {int(c.cluster_id): c.log_template_tokens for c in self.drain.clusters}
        ids = np.array(sorted(tpl), np.int64)
        n = len(tid)
        if len(ids) == 0:
            return pa.nulls(n, pa.list_(pa.string())), 0
        tlen = np.array([len(tpl[i]) for i in ids], np.int64)
        toff = np.concatenate([[0], np.cumsum(tlen)[:-1]])
        flags = np.fromiter((t == PARAM for i in ids for t in tpl[i]), bool, int(tlen.sum()))
        pos_of = np.searchsorted(ids, tid)
        pos_of = np.clip(pos_of, 0, len(ids) - 1)
        known = (ids[pos_of] == tid) & ~skip
        toks = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(msgs))
        if isinstance(toks, pa.ChunkedArray):
            toks = toks.combine_chunks()
        ntok = pc.list_value_length(toks).to_numpy(zero_copy_only=False).astype(np.int64)
        ok = known & (ntok == tlen[pos_of])
        mismatch = int((known & ~ok).sum())
        offsets = toks.offsets.to_numpy()
        first = offsets[:-1]
        total = int(offsets[-1] - offsets[0])
        row_of_tok = np.repeat(np.arange(n), ntok)
        pos_in_row = np.arange(total, dtype=np.int64) - np.repeat(first - offsets[0], ntok)
        okt = ok[row_of_tok]
        take = np.zeros(total, bool)
        idx = toff[pos_of[row_of_tok[okt]]] + pos_in_row[okt]
        take[okt] = flags[idx]
        values = toks.flatten()
        kept = values.filter(pa.array(take))
        per_row = np.bincount(row_of_tok[take], minlength=n).astype(np.int32)
        new_off = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
        out = pa.ListArray.from_arrays(pa.array(new_off, pa.int32()), pc.cast(kept, pa.string()),
                                       mask=pa.array(~ok))
        return out, mismatch
