import pytest

from nodewatch.schemas.names import UnsafeNameError, check_node_name, check_path_token, is_valid_node_name


@pytest.mark.parametrize("name", ["cn0001", "node-12", "gpu_3", "cn1.cluster.example.org", "R00-M0-N0", "a"])
def test_valid_node_names(name):
    assert is_valid_node_name(name)
    assert check_node_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "../x", "../../etc", "/", "a/b", "x\x00y", "cn 1", ".hidden", "a..b", "a" * 64, "cn０1", "cnⅠ", "-x", "x.", None, 5],
)
def test_hostile_node_names_rejected(name):
    assert not is_valid_node_name(name)
    with pytest.raises(UnsafeNameError):
        check_node_name(name)


@pytest.mark.parametrize("tok", ["..", "a/b", "", "x\x00", "../runs"])
def test_path_tokens(tok):
    with pytest.raises(UnsafeNameError):
        check_path_token(tok)
