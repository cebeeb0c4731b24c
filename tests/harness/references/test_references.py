"""Reference programs: manifests, checksum-verified fetch (file:// URLs), scoring, labelled lines."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evobench.cli import commands_reference
from evobench.cli.commands_reference import reference, reference_lines
from harness.envs.registry import default_registry
from harness.references.fetch import ReferenceError, cached_path, fetch_reference, load_rows
from harness.references.manifest import ReferenceProgram, load_references


@pytest.mark.parametrize("family", ["ahc039", "ahc058", "trimul", "mla_decode"])
def test_family_manifests_name_their_papers_programs(family: str) -> None:
    refs = load_references(default_registry().family_of(family)[0].family_dir)
    assert refs, family
    for r in refs:
        assert default_registry().get(r.variant).family == family
        assert r.paper_value is not None and r.protocol and r.license == "MIT"
        # pinned: a raw URL at a full commit, the file's path inside the repository, its sha256
        assert len(r.commit) == 40 and r.url.startswith("https://raw.githubusercontent.com/")
        assert r.repo_path.startswith("results/") and r.url.endswith(r.repo_path)
        assert len(r.sha256) == 64


def ref_for(path: Path, sha: str, variant: str = "selftest-tiny") -> ReferenceProgram:
    return ReferenceProgram(
        name="demo", variant=variant, url=path.as_uri(), sha256=sha, license="MIT",
        paper_value=1.0, protocol="a test",
    )  # fmt: skip


def test_fetch_verifies_the_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    src = tmp_path / "prog.py"
    src.write_text("print('hi')\n")
    good = hashlib.sha256(src.read_bytes()).hexdigest()
    got = fetch_reference("selftest", ref_for(src, good))
    assert got == cached_path("selftest", ref_for(src, good)) and got.read_bytes() == src.read_bytes()
    got.unlink()
    with pytest.raises(ReferenceError, match="sha256 mismatch"):
        fetch_reference("selftest", ref_for(src, "0" * 64))
    assert not got.exists()  # refused bytes are not saved
    with pytest.raises(ReferenceError, match="no sha256 pinned"):
        fetch_reference("selftest", ref_for(src, ""))
    with pytest.raises(ReferenceError, match="failed"):
        fetch_reference("selftest", ref_for(tmp_path / "missing.py", good))


def test_fetch_eval_and_leaderboard_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    v = default_registry().get("selftest-tiny")
    src = tmp_path / "initial.py"
    src.write_text(v.initial_program)
    ref = ref_for(src, hashlib.sha256(src.read_bytes()).hexdigest())
    monkeypatch.setattr(commands_reference, "load_references", lambda _d: [ref])
    boards = tmp_path / "leaderboards"
    assert reference("fetch", "selftest", leaderboard_dir=boards) == 0
    assert reference("eval", "selftest", leaderboard_dir=boards) == 0
    (row,) = load_rows(boards, "selftest")
    assert row.status == "ok" and row.score is not None and row.paper_value == 1.0
    assert row.env_hash == v.hash
    assert json.loads((boards / "selftest.references.json").read_text())[0]["name"] == "demo"
    table = reference_lines(boards, "selftest", "selftest-tiny")
    assert table is not None and "not runs" in str(table.title)
    assert reference_lines(boards, "selftest", "other-variant") is None


def test_fetch_from_a_mirror_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    commit = "a" * 40
    mirror = tmp_path / "checkout"
    (mirror / "results" / "x").mkdir(parents=True)
    body = b"int main() { return 0; }\n"
    (mirror / "results" / "x" / "prog.cpp").write_bytes(body)
    ref = ReferenceProgram(
        name="mirrored", variant="selftest-tiny", license="MIT", commit=commit,
        url=f"https://example.invalid/repo/{commit}/results/x/prog.cpp",
        sha256=hashlib.sha256(body).hexdigest(),
    )  # fmt: skip
    assert ref.repo_path == "results/x/prog.cpp"
    got = fetch_reference("selftest", ref, mirror=mirror)  # the URL is never opened
    assert got.read_bytes() == body and got.suffix == ".cpp"
    got.unlink()
    (mirror / "results" / "x" / "prog.cpp").write_bytes(body + b"// changed\n")
    with pytest.raises(ReferenceError, match="sha256 mismatch"):
        fetch_reference("selftest", ref, mirror=mirror)
    unpinned = ref.model_copy(update={"commit": ""})
    with pytest.raises(ReferenceError, match="does not pin a commit"):
        fetch_reference("selftest", unpinned, mirror=mirror)
