"""Settings: precedence CLI flag > env NODEWATCH_* > TOML file > default, config-file errors, hashing rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodewatch.tasks.core.settings import MIN_SALT_CHARS, SettingsError, load_settings, set_default_config

SALT = "s" * MIN_SALT_CHARS


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No NODEWATCH_* variable from the developer's shell, no CLI default config, cwd in tmp."""
    for k in list(os.environ):
        if k.startswith("NODEWATCH_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    set_default_config(None)
    yield
    set_default_config(None)


def _toml(tmp_path: Path, text: str, name: str = "nodewatch.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults():
    s = load_settings()
    assert s.store == "./nodewatch-data"
    assert (s.step, s.dask_workers, s.node_batch, s.future_tolerance_s) == ("15min", 2, 50, 300)
    assert s.hash_users is True and s.service_hosts == [] and s.data_docs is True


def test_precedence_flag_over_env_over_toml_over_default(tmp_path, monkeypatch):
    cfg = _toml(tmp_path, 'store = "toml-store"\nstep = "5min"\nnode_batch = 7\nservice_hosts = ["ctl1"]\n')
    s = load_settings(cfg)
    assert (s.store, s.step, s.node_batch, s.service_hosts, s.dask_workers) == ("toml-store", "5min", 7, ["ctl1"], 2)
    monkeypatch.setenv("NODEWATCH_STORE", "env-store")
    monkeypatch.setenv("NODEWATCH_NODE_BATCH", "9")
    s = load_settings(cfg)
    assert (s.store, s.node_batch, s.step) == ("env-store", 9, "5min")  # env beats TOML; TOML still beats default
    s = load_settings(cfg, store="flag-store", step=None)  # None = flag not given
    assert (s.store, s.node_batch, s.step) == ("flag-store", 9, "5min")


def test_config_file_sources_and_no_environment_writes(tmp_path, monkeypatch):
    env_cfg = _toml(tmp_path, 'store = "from-env-config"\n', "env.toml")
    cli_cfg = _toml(tmp_path, 'store = "from-cli-config"\n', "cli.toml")
    arg_cfg = _toml(tmp_path, 'store = "from-argument"\n', "arg.toml")
    monkeypatch.setenv("NODEWATCH_CONFIG", str(env_cfg))
    assert load_settings().store == "from-env-config"
    set_default_config(cli_cfg)  # the CLI's --config: used by flows that call load_settings() without one
    assert load_settings().store == "from-cli-config"
    assert load_settings(arg_cfg).store == "from-argument"
    assert os.environ["NODEWATCH_CONFIG"] == str(env_cfg)  # untouched
    set_default_config(None)
    monkeypatch.delenv("NODEWATCH_CONFIG")
    load_settings(arg_cfg)
    assert "NODEWATCH_CONFIG" not in os.environ
    assert load_settings().store == "./nodewatch-data"  # an earlier config does not stick


def test_missing_config_file(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="config file .*nope.toml does not exist"):
        load_settings(tmp_path / "nope.toml")
    monkeypatch.setenv("NODEWATCH_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(FileNotFoundError, match="gone.toml"):
        load_settings()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('store = "unterminated\n', r"bad.toml is not valid TOML: .*line 1"),
        ("stor = 'typo'\n", r"bad.toml: unknown setting\(s\) stor; known: store, "),
        ("node_batch = 'many'\n", r"invalid settings \(config file .*bad.toml\): node_batch: "),
    ],
)
def test_invalid_config_file(tmp_path, text, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(_toml(tmp_path, text, "bad.toml"))


def test_hashing_on_by_default_salt_optional_but_long(tmp_path, monkeypatch):
    """hash_users is on by default; no salt needed (the store's key file is used); a configured salt must
    be >= 16 characters and is never echoed."""
    monkeypatch.delenv("NODEWATCH_HASH_SALT", raising=False)
    s = load_settings()
    assert s.hash_users is True and s.hash_salt.get_secret_value() == ""  # on by default, store key
    assert load_settings(hash_users=False).hash_users is False  # the explicit opt-out
    monkeypatch.setenv("NODEWATCH_HASH_SALT", "k3y-xq")
    with pytest.raises(SettingsError, match="NODEWATCH_HASH_SALT") as e:
        load_settings(hash_users=True)
    assert "k3y-xq" not in str(e.value)  # the salt is never echoed
    monkeypatch.setenv("NODEWATCH_HASH_SALT", SALT)
    s = load_settings(hash_users=True)
    assert s.hash_users and s.hash_salt.get_secret_value() == SALT
    assert SALT not in repr(s) and SALT not in str(s.model_dump())
    monkeypatch.delenv("NODEWATCH_HASH_SALT")
    s = load_settings(_toml(tmp_path, f'hash_users = true\nhash_salt = "{SALT}"\n'))
    assert s.hash_users and s.hash_salt.get_secret_value() == SALT
