"""The CLI starts light: ``bench --help`` and the listing commands load no pandas, pyarrow, scipy,
numpy, torch or agent code (each of those costs 0.2-3 s of CPU at every start; the command that
needs one imports it); ``bench leaderboard`` reads its Parquet file with pyarrow alone, never
pandas. The CPU figures are in ``benchmarks/bench_cli_start.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "pyarrow", "scipy", "numpy", "torch", "transformers", "agents")

PROBE = """
import json, sys
from evobench.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(%r)))
print("\\nHEAVY " + json.dumps({"code": code, "heavy": heavy}))
"""


def _loaded(*argv: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE % json.dumps(HEAVY), *argv], capture_output=True, text=True, timeout=120
    )
    line = [x for x in proc.stdout.splitlines() if x.startswith("HEAVY ")]
    assert line, proc.stderr[-2000:]
    return {**json.loads(line[-1][len("HEAVY ") :]), "stdout": proc.stdout}


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("run", "--help"), ("eval", "--help"), ("compare", "--help"), ("plot", "--help")]
    + [("envs",)],
)
def test_a_light_command_loads_no_heavy_module(argv: tuple[str, ...]) -> None:
    got = _loaded(*argv)
    assert got["code"] == 0, got
    assert got["heavy"] == [], got


def test_the_probe_sees_a_heavy_import() -> None:
    """The check can fail: ``compare`` reads its tables with pandas (even missing ones) and is caught."""
    lb = ("--leaderboard-dir", "/nonexistent-evobench-dir")
    got = _loaded("compare", "--env", "eplb-tiny", "--agents", "a", "b", *lb)
    assert got["code"] == 2 and "pandas" in got["heavy"], got  # type: ignore[operator]


def test_leaderboard_reads_parquet_without_pandas(tmp_path: Path) -> None:
    """``bench leaderboard`` of a real table: pyarrow (and the numpy it loads) only, identities named."""
    from harness.envs.registry import default_registry
    from harness.results.leaderboard import append_leaderboard_row
    from harness.results.records import LeaderboardRow

    v = default_registry().get("eplb-tiny")
    for i, budget in enumerate((20, 20, 50)):
        row = LeaderboardRow(
            run_id=f"r{i}", family=v.family, variant=v.id, env_version=v.version, env_hash=v.hash,
            agent="pacevolve", budget_json=json.dumps({"max_evaluations": budget}), seed=i, best_score=0.5,
            progress=0.1, direction=v.direction, finished_at="2026-01-01T00:00:00+00:00",
        )  # fmt: skip
        append_leaderboard_row(tmp_path, row)
    got = _loaded("leaderboard", "--env", "eplb-tiny", "--leaderboard-dir", str(tmp_path))
    heavy, out = list(got["heavy"]), str(got["stdout"])  # type: ignore[call-overload]
    assert got["code"] == 0 and "pandas" not in heavy and set(heavy) <= {"pyarrow", "numpy"}, got
    assert "pacevolve[budget=20]" in out and "pacevolve[budget=50]" in out, out


def test_listing_agents_loads_agent_code_but_no_dataframe_or_model_library() -> None:
    """``bench agents`` imports every agent class (numpy with them), never pandas, pyarrow, scipy or torch:
    those load when an agent runs (its train log, its journal snapshot, its policy)."""
    got = _loaded("agents")
    assert got["code"] == 0, got
    assert "agents" in got["heavy"], got  # type: ignore[operator]
    assert set(got["heavy"]) <= {"agents", "numpy"}, got  # type: ignore[call-overload]
