"""The run report names the models each role really called, not only the configured ones (issue 23 case 7)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from harness.report.run_report import _config_pairs, effective_models
from harness.results.records import RunInfo


def test_report_shows_called_models_next_to_configured_ones(tmp_path: Path) -> None:
    info = RunInfo(
        run_id="r",
        env_id="eplb-tiny",
        family="eplb",
        variant="eplb-tiny",
        env_version="1",
        env_hash="h",
        agent="pacevolve",
        seed=0,
        models={"advisor": "gemini/gemini-2.5-pro", "implementer": "gemini/gemini-2.5-pro"},
        budget={"max_evaluations": 10},
    )
    store = SimpleNamespace(info=info, run_dir=tmp_path)
    pairs = dict(_config_pairs(store))  # type: ignore[arg-type]
    assert effective_models(tmp_path) is None and pairs["models called"].startswith("none")
    pd.DataFrame(
        {"role": ["advisor", "implementer", "advisor"], "model": ["offline/pacevolve"] * 3}
    ).to_parquet(tmp_path / "llm_calls.parquet")
    assert effective_models(tmp_path) == {
        "advisor": ["offline/pacevolve"],
        "implementer": ["offline/pacevolve"],
    }
    pairs = dict(_config_pairs(store))  # type: ignore[arg-type]
    assert "gemini" in pairs["models configured"] and "gemini" not in pairs["models called"]
    assert "advisor: offline/pacevolve (offline proposer, not an LLM)" in pairs["models called"]
    assert pairs["identity"].startswith("pacevolve@") and len(pairs["identity"]) == len("pacevolve@") + 6
