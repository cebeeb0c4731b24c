"""The ``bench`` command line as a user runs it: real processes, real sandbox, real scorer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = [sys.executable, "-m", "evobench.cli.main"]


def bench(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_envs_lists_eplb_with_version_and_hash(tmp_path: Path) -> None:
    r = bench("envs", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert {"eplb", "eplb-tiny"} <= set(rows)
    for vid in ("eplb", "eplb-tiny"):
        assert rows[vid]["version"].count(".") == 2
        assert len(rows[vid]["hash"]) == 16
    assert rows["eplb-tiny"]["tiny"] is True
    assert rows["eplb"]["needs_data"] == ["expert-load"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("eval", "--env", "eplb-tinny", "x.py"), "eplb-tiny"),
        (("run", "--agent", "random-serch", "--env", "eplb-tiny"), "random-search"),
        (("leaderboard", "--env", "epbl"), "eplb"),
    ],
)
def test_unknown_ids_exit_nonzero_with_suggestions(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    (tmp_path / "x.py").write_text("pass\n")
    r = bench(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown" in r.stderr and needle in r.stderr


def test_error_messages_are_printed_verbatim(tmp_path: Path) -> None:
    # rich markup would swallow "[rl]" (as in "pip install 'evobench[rl]'")
    r = bench("eval", "--env", "eplb-tiny", "missing[rl].py", cwd=tmp_path)
    assert r.returncode == 2 and "no such file: missing[rl].py" in r.stderr


def test_runs_refuse_validation_subsets_but_eval_scores_them(tmp_path: Path) -> None:
    r = bench(
        "run",
        "--agent",
        "random-search",
        "--env",
        "eplb-tiny~subset-3-2",
        "--max-evaluations",
        "2",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "validation subset of eplb-tiny" in r.stderr
    assert not (tmp_path / "results").exists()
    prog = REPO / "environments" / "eplb" / "initial_program.py"
    r = bench("eval", "--env", "eplb-tiny~subset-3-2", str(prog), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "ok" and res["env_id"] == "eplb-tiny~subset-3-2"


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is not None and __import__("torch").cuda.is_available(),
    reason="needs a machine without a GPU",
)
@pytest.mark.parametrize(
    ("env", "gpu"),
    [("trimul-h100", "H100 SXM"), ("mla-decode-h200", "H200 SXM"), ("trimul-a100", "A100 SXM4 80GB")],
)
def test_runs_of_gpu_variants_fail_fast_without_the_gpu(tmp_path: Path, env: str, gpu: str) -> None:
    r = bench("run", "--agent", "random-search", "--env", env, "--max-evaluations", "2", cwd=tmp_path)
    assert r.returncode == 2 and f"needs an NVIDIA {gpu} GPU" in r.stderr and env in r.stderr
    assert not (tmp_path / "results").exists()


def test_eval_initial_program_ok_and_broken_program_fails(tmp_path: Path) -> None:
    prog = REPO / "environments" / "eplb" / "initial_program.py"
    r = bench("eval", "--env", "eplb-tiny", str(prog), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "ok" and res["score"] > 0
    assert res["env_id"] == "eplb-tiny" and len(res["env_hash"]) == 16

    bad = tmp_path / "bad.py"
    bad.write_text("def rebalance_experts(*a):\n    raise ValueError('nope')\n")
    r = bench("eval", "--env", "eplb-tiny", str(bad), "--json", cwd=tmp_path)
    assert r.returncode == 1
    res = json.loads(r.stdout)
    assert res["status"] == "error" and "ValueError" in res["reason"]


def test_eval_full_variant_without_data_names_fetch_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prog = REPO / "environments" / "eplb" / "initial_program.py"
    env = {"EVOBENCH_DATA": str(tmp_path / "empty-cache")}
    r = subprocess.run(
        [*BENCH, "eval", "--env", "eplb", str(prog)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, **env},
    )
    assert r.returncode == 2
    assert "bench data fetch eplb" in r.stderr


def test_missing_program_file_is_a_usage_error(tmp_path: Path) -> None:
    r = bench("eval", "--env", "eplb-tiny", "nope.py", cwd=tmp_path)
    assert r.returncode == 2 and "no such file" in r.stderr


def test_a_binary_candidate_file_is_one_usage_line(tmp_path: Path) -> None:
    """A candidate that is not UTF-8 text once gave a 27-line UnicodeDecodeError and exit 1."""
    program = tmp_path / "blob.py"
    program.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 20)
    r = bench("eval", "--env", "eplb-tiny", str(program), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "is not UTF-8 text" in r.stderr
