"""The installation's held-out key: created once 0600, overridable, keyed seeds."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.envs import secret
from harness.envs.secret import KEY_ENV, HeldoutKeyError, heldout_seed, installation_key, key_id, secret_seed


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    return tmp_path / "data"


def test_key_file_is_created_once_private(data_root: Path) -> None:
    key = installation_key()
    path = data_root / secret.KEY_FILE
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert installation_key() == key
    assert [p.name for p in data_root.iterdir()] == [secret.KEY_FILE]  # no temporary file left


def test_a_world_readable_key_is_refused(data_root: Path) -> None:
    installation_key()
    os.chmod(data_root / secret.KEY_FILE, 0o644)
    with pytest.raises(HeldoutKeyError, match="chmod 600"):
        installation_key()


def test_unwritable_data_root_falls_back_to_a_process_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EVOBENCH_DATA", str(blocker / "data"))  # cannot be created
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setattr(secret, "_PROCESS_KEY", [])
    key = installation_key()
    assert len(key) == 32 and installation_key() == key
    assert sum("for this process only" in r.getMessage() for r in caplog.records) == 1


def test_environment_variable_overrides_the_file(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "0f" * 32)
    assert installation_key() == bytes([15]) * 32
    assert not data_root.exists()
    monkeypatch.setenv(KEY_ENV, "0f" * 31)
    with pytest.raises(HeldoutKeyError, match="64 hex digits"):
        installation_key()


@given(
    scope=st.text(max_size=40), k1=st.binary(min_size=32, max_size=32), k2=st.binary(min_size=32, max_size=32)
)
def test_seeds_depend_on_key_and_scope(scope: str, k1: bytes, k2: bytes) -> None:
    s = secret_seed(scope, k1)
    assert 0 <= s < 2**63 and s == secret_seed(scope, k1)
    if k1 != k2:
        assert s != secret_seed(scope, k2)
    assert s != secret_seed(scope + "x", k1)


def test_heldout_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "11" * 32)
    assert heldout_seed({}, "fam", 7) == (7, None)
    assert heldout_seed({"heldout": "public"}, "fam", 7) == (7, None)
    seed, kid = heldout_seed({"heldout": "secret"}, "fam", 7)
    assert seed == secret_seed("fam/7", bytes([0x11]) * 32) and kid == key_id(bytes([0x11]) * 32)
    assert heldout_seed({"heldout": "secret"}, "fam", 8)[0] != seed
    with pytest.raises(ValueError, match="heldout"):
        heldout_seed({"heldout": "hidden"}, "fam", 7)


def test_an_exported_key_imported_elsewhere_is_the_same_key(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = secret.export_key()
    fp = secret.fingerprint()
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "teammate"))
    path = secret.import_key(text + "\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret.fingerprint() == fp and installation_key().hex() == text
    assert secret.import_key(text) == path  # the same key again: nothing to do


def test_import_keeps_a_different_installed_key_unless_forced(data_root: Path) -> None:
    old = installation_key()
    other = bytes(range(32))
    with pytest.raises(HeldoutKeyError, match="--force"):
        secret.import_key(other.hex())
    assert installation_key() == old
    secret.import_key(other.hex(), force=True)
    assert installation_key() == other
    kept = data_root / f"{secret.KEY_FILE}.{secret.fingerprint(old)}"
    assert kept.read_text() == old.hex()  # scores made with the old key stay reproducible
    with pytest.raises(HeldoutKeyError, match="64 hex digits"):
        secret.import_key("not a key", force=True)


def test_public_selects_the_public_draw_and_says_so(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "public")
    assert heldout_seed({"heldout": "secret"}, "fam/v", 7) == (7, None)
    assert secret.fingerprint() == "public" and secret.key_env_value() == "public"
    with pytest.raises(HeldoutKeyError, match="no key to export"):
        secret.export_key()
    monkeypatch.setenv(KEY_ENV, "0f" * 32)
    seed, kid = heldout_seed({"heldout": "secret"}, "fam/v", 7)
    assert seed != 7 and kid == key_id(bytes([15]) * 32)
    assert secret.key_env_value() == "0f" * 32
