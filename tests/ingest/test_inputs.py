import gzip
import lzma

import pytest

from nodewatch.tasks.ingest.discovery import expand_paths
from nodewatch.tasks.ingest.inputs import InputError, detect_compression, iter_lines, open_binary


def _lines(data: bytes, **kw):
    import io

    return list(iter_lines(io.BytesIO(data), **kw))


def test_lines_numbering_crlf_and_last_line_without_newline():
    assert _lines(b"a\r\nb\n\nc") == [(1, b"a"), (2, b"b"), (3, b""), (4, b"c")]


def test_overlong_line_is_marked_and_skipped_consistently():
    data = b"x" * 100 + b"\nok\n"
    out = _lines(data, max_line=10, block=7)
    assert out[0][0] == 1 and out[0][1].endswith(b"\x00<truncated>") and out[0][1].startswith(b"x" * 10)
    assert out[1] == (2, b"ok")


@pytest.mark.parametrize("block", [3, 64, 1 << 16])
def test_block_size_does_not_change_lines(block):
    data = b"".join(b"line %d\n" % i for i in range(1000))
    assert _lines(data, block=block) == [(i + 1, b"line %d" % i) for i in range(1000)]


def test_truncated_gzip_keeps_lines_before_the_break(tmp_path):
    payload = b"".join(b"row %06d\n" % i for i in range(20000))
    gz = gzip.compress(payload)
    p = tmp_path / "t.gz"
    p.write_bytes(gz[: len(gz) // 2])
    got = []
    with pytest.raises(InputError, match="stream ends unexpectedly after line"), open_binary(p) as f:
        for n, line in iter_lines(f):
            got.append((n, line))
    assert len(got) > 1000
    assert got[-1][1] == b"row %06d" % (len(got) - 1)


def test_compression_detected_by_magic(tmp_path):
    p = tmp_path / "x.log"  # misleading name
    p.write_bytes(lzma.compress(b"a\nb\n"))
    assert detect_compression(p) == "xz"
    with open_binary(p) as f:
        assert [line for _, line in iter_lines(f)] == [b"a", b"b"]


def test_expand_paths_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        expand_paths([tmp_path / "missing"])
    with pytest.raises(InputError, match="glob matches no file"):
        expand_paths([str(tmp_path / "*.none")])
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_text("x")
    assert [p.name for p in expand_paths([tmp_path / "d", tmp_path / "d" / "a"])] == ["a"]
