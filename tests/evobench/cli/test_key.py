"""``bench key``: a team (or CI) shares the held-out key, and its tiny scores then agree.

Two data roots stand for two machines: given the same key (exported from one, imported on the
other) they score the initial programs of the secret-keyed variants identically; a third root with
its own key scores eplb-tiny differently, so the check can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs.registry import default_registry

BENCH = [sys.executable, "-m", "evobench.cli.main"]


def bench(root: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "EVOBENCH_HELDOUT_KEY"}
    full_env.update({"EVOBENCH_DATA": str(root), **env})
    return subprocess.run(
        [*BENCH, *args], input=stdin, capture_output=True, text=True, timeout=600, env=full_env
    )


def test_export_import_show(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    fresh = bench(a, "key", "show")
    assert fresh.returncode == 0 and "no held-out key yet" in fresh.stdout, fresh.stderr
    assert not a.exists()  # showing creates nothing
    exported = bench(a, "key", "export")
    assert exported.returncode == 0 and len(exported.stdout.strip()) == 64
    shown = bench(a, "key", "show")
    assert shown.returncode == 0 and "held-out key " in shown.stdout, shown.stderr
    fp = shown.stdout.split("held-out key ")[1].split()[0]
    assert fp in exported.stderr
    assert exported.stdout.strip() not in shown.stdout + exported.stderr  # never printed but by export
    imported = bench(b, "key", "import", "-", stdin=exported.stdout)
    assert imported.returncode == 0 and fp in imported.stdout, imported.stderr
    assert fp in bench(b, "key", "show").stdout
    refused = bench(b, "key", "import", "-", stdin="ab" * 32)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert "public draws" in bench(b, "key", "show", EVOBENCH_HELDOUT_KEY="public").stdout


def _score(root: Path, variant: str, program: Path) -> dict[str, object]:
    r = bench(root, "eval", "--env", variant, "--json", str(program))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.sandbox
@pytest.mark.parametrize("variant", ["eplb-tiny", "multi-evolve-tiny"])
def test_two_machines_with_one_key_score_alike(tmp_path: Path, variant: str) -> None:
    v = default_registry().get(variant)
    assert v.scorer_params.get("heldout") == "secret"
    program = tmp_path / v.initial_program_name
    program.write_text(v.initial_program, encoding="utf-8")
    first, second, other = tmp_path / "first", tmp_path / "second", tmp_path / "other"
    key = bench(first, "key", "export").stdout
    assert bench(second, "key", "import", "-", stdin=key).returncode == 0
    a, b = _score(first, variant, program), _score(second, variant, program)
    assert a["status"] == b["status"] == "ok", (a, b)
    assert a["score"] == b["score"]
    assert a["metrics"]["heldout_key"] == b["metrics"]["heldout_key"]  # type: ignore[index]
    if variant == "eplb-tiny":  # another key is another draw: the comparison above can fail
        c = _score(other, variant, program)
        assert c["metrics"]["heldout_key"] != a["metrics"]["heldout_key"]  # type: ignore[index]
        assert c["score"] != a["score"]
