"""The CLI starts light: ``bench --help`` and the listing commands load no pandas, pyarrow, scipy,
numpy, torch or agent code (each of those costs 0.2-3 s of CPU at every start; the command that
needs one imports it). The CPU figures are in ``benchmarks/bench_cli_start.py``."""

from __future__ import annotations

import json
import subprocess
import sys

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
    return json.loads(line[-1][len("HEAVY ") :])


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
    """The check can fail: ``leaderboard`` of a missing table reads Parquet (pandas) and is caught."""
    got = _loaded("leaderboard", "--env", "eplb-tiny", "--leaderboard-dir", "/nonexistent-evobench-dir")
    assert "pandas" in got["heavy"], got  # type: ignore[operator]


def test_listing_agents_loads_agent_code_but_no_dataframe_or_model_library() -> None:
    """``bench agents`` imports every agent class (numpy with them), never pandas, pyarrow, scipy or torch:
    those load when an agent runs (its train log, its journal snapshot, its policy)."""
    got = _loaded("agents")
    assert got["code"] == 0, got
    assert "agents" in got["heavy"], got  # type: ignore[operator]
    assert set(got["heavy"]) <= {"agents", "numpy"}, got  # type: ignore[call-overload]
