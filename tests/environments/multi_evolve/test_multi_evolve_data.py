"""Multi-Evolve data recipe: raw CSV parsing, the reference split, the synthetic landscape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from environments.multi_evolve.data import (
    load_assays,
    mutation_tokens,
    read_assay_table,
    split_assay,
    synthetic_assays,
    synthetic_table,
    write_synthetic_csv,
)
from harness.envs.data import DataMissingError

WT_SEQ = "MKTAYIAKQR"  # positions 1..10

# A small table in the published format (ProteinGym-style columns, ':' separators, one '/' row).
# Singles pool: M1A, K2R, T3S, A4G, Y5F, I6V (I6V's own score is NaN: it stays in the pool).
CSV = """mutant,mutated_sequence,DMS_score,DMS_score_bin,extra
WT,MKTAYIAKQR,1.0,1,x
M1A,AKTAYIAKQR,0.5,0,x
K2R,MRTAYIAKQR,0.9,1,x
T3S,MKSAYIAKQR,0.8,1,x
A4G,MKTGYIAKQR,0.2,0,x
Y5F,MKTAFIAKQR,0.7,1,x
I6V,MKTAYVAKQR,,0,x
M1A:K2R,ARTAYIAKQR,0.4,0,x
K2R/T3S,MRSAYIAKQR,0.75,1,x
K2R:Q9E,MRTAYIAKER,0.3,0,x
Y5F:T3S:K2R,MRSAFIAKQR,0.65,1,x
M1A:K2R:T3S,ARSAYIAKQR,0.35,0,x
A4G:Y5F:I6V,MKTGFVAKQR,0.1,0,x
M1A:K2R:T3S:A4G,ARSGYIAKQR,nan,0,x
M1A:K2R:T3S:Y5F,ARSAFIAKQR,inf,0,x
Q9E:K2R:T3S,MRSAYIAKER,0.2,0,x
M1A:K2R:T3S:A4G:Y5F:I6V,ARSGFVAKQR,0.05,0,x
,MKTAYIAKQR,0.99,1,x
"""


@pytest.fixture
def table(tmp_path: Path) -> pd.DataFrame:
    path = tmp_path / "ASSAY_TEST_2024.csv"
    path.write_text(CSV)
    return read_assay_table(path)


def test_mutation_tokens() -> None:
    assert mutation_tokens("A23G:K45R") == ["A23G", "K45R"]
    assert mutation_tokens("A23G/K45R") == ["A23G", "K45R"]
    assert mutation_tokens(" A23G : K45R ") == ["A23G", "K45R"]
    assert mutation_tokens("WT") == [] and mutation_tokens("") == [] and mutation_tokens("_wt") == []
    assert mutation_tokens("WT:A1G") == ["A1G"]


def test_split_follows_the_reference_protocol(table: pd.DataFrame) -> None:
    a = split_assay("ASSAY_TEST_2024", table)
    # Train: WT, singles with finite scores, doubles whose tokens are all singles (K2R:Q9E is not).
    assert a.train["mutant"] == ["WT", "M1A", "K2R", "T3S", "A4G", "Y5F", "M1A:K2R", "K2R:T3S"]
    assert a.train["num_mutations"].tolist() == [0, 1, 1, 1, 1, 1, 2, 2]
    assert a.train["fitness"].tolist() == [1.0, 0.5, 0.9, 0.8, 0.2, 0.7, 0.4, 0.75]
    assert a.train["DMS_score_bin"].tolist() == [1, 0, 1, 1, 0, 1, 0, 1]
    # Test: 3..10 mutants, tokens all in the singles pool (I6V counts though its score is NaN),
    # finite scores only; canonical order by (count, mutant string); separators normalised.
    assert a.test["mutant"] == [
        "A4G:Y5F:I6V",
        "M1A:K2R:T3S",
        "Y5F:T3S:K2R",
        "M1A:K2R:T3S:A4G:Y5F:I6V",
    ]
    assert a.test["num_mutations"].tolist() == [3, 3, 3, 6]
    assert a.truth.tolist() == [0.1, 0.35, 0.65, 0.05]
    assert set(a.test) == {"mutant", "num_mutations"}
    assert a.context["target_seq"] == WT_SEQ and a.context["seq_len"] == 10
    assert "ASSAY" not in repr(a.context) and "ASSAY" not in repr(a.test) and "ASSAY" not in repr(a.train)


def test_split_bounds_and_empty_split(table: pd.DataFrame) -> None:
    a = split_assay("x", table, min_test_mutations=3, max_test_mutations=5)
    assert a.test["num_mutations"].max() == 3
    with pytest.raises(ValueError, match="empty split"):
        split_assay("x", table, min_test_mutations=7)


def test_missing_columns_and_optional_columns(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("mutant,score\nA1G,1\n")
    with pytest.raises(ValueError, match="DMS_score"):
        read_assay_table(bad)
    minimal = tmp_path / "minimal.csv"
    minimal.write_text("mutant,DMS_score\nWT,0\nA1G,1\nC2D,2\nE3F,3\nA1G:C2D:E3F,6\nC2D:A1G,3\n")
    a = split_assay("m", read_assay_table(minimal))
    assert "DMS_score_bin" not in a.train
    assert a.context["target_seq"] == "" and a.context["seq_len"] == 3  # no sequence column
    assert a.test["mutant"] == ["A1G:C2D:E3F"] and a.truth.tolist() == [6.0]


def test_inconsistent_sequence_is_not_guessed(tmp_path: Path) -> None:
    p = tmp_path / "offset.csv"
    p.write_text(
        "mutant,mutated_sequence,DMS_score\nWT,MKT,0\nA1G,MGT,1\nK2R,MRT,1\nT3S,MKS,1\nA1G:K2R:T3S,GRS,2\n"
    )
    a = split_assay("o", read_assay_table(p))
    assert a.context["target_seq"] == ""  # position 1 of the sequence is not the mutant residue G


def test_load_assays_reads_the_cache_and_names_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match="bench data fetch multi_evolve"):
        load_assays(tmp_path, [("A", "A.csv")], {})
    (tmp_path / "A.csv").write_text(CSV)
    write_synthetic_csv(tmp_path / "B.csv", {"seed": 3}, index=0)
    a, b = load_assays(tmp_path, [("A", "A.csv"), ("B", "B.csv")], {})
    assert a.name == "A" and len(a.test["mutant"]) == 4
    assert b.name == "B" and len(b.test["mutant"]) == 200


def test_synthetic_csv_round_trip_matches_in_memory_assays(tmp_path: Path) -> None:
    params = {"seed": 9, "assays": 1}
    write_synthetic_csv(tmp_path / "s.csv", params, index=0)
    (loaded,) = load_assays(tmp_path, [("s", "s.csv")], params)
    (direct,) = synthetic_assays(params)
    assert loaded.train["mutant"] == direct.train["mutant"]
    assert loaded.test["mutant"] == direct.test["mutant"]
    np.testing.assert_allclose(loaded.truth, direct.truth, rtol=1e-12)
    assert loaded.context == direct.context


def test_synthetic_landscape_is_seeded_and_shaped() -> None:
    params = {"seed": 5, "assays": 2, "sites": 15, "double_fraction": 0.4, "test_size": 200}
    a, b = synthetic_assays(params)
    a2, _ = synthetic_assays(params)
    c, _ = synthetic_assays({**params, "seed": 6})
    assert a.test["mutant"] == a2.test["mutant"] and np.array_equal(a.truth, a2.truth)
    assert a.test["mutant"] != b.test["mutant"]  # each assay has its own landscape
    assert a.test["mutant"] != c.test["mutant"]
    counts = a.train["num_mutations"]
    assert (counts == 0).sum() == 1 and (counts == 1).sum() == 15 and (counts == 2).sum() == 42
    assert len(a.test["mutant"]) == 200 and len(set(a.test["mutant"])) == 200
    assert 3 <= a.test["num_mutations"].min() and a.test["num_mutations"].max() <= 10
    assert np.isfinite(a.truth).all() and a.truth.std() > 0.1
    seq = a.context["target_seq"]
    for m in a.test["mutant"]:
        for tok in m.split(":"):
            assert seq[int(tok[1:-1]) - 1] == tok[0]


def test_synthetic_alternatives_never_combine_one_site_twice() -> None:
    table, _ = synthetic_table({"seed": 1, "sites": 6, "alternatives": 3, "test_size": 50})
    for m in table["mutant"]:
        positions = [tok[1:-1] for tok in mutation_tokens(m)]
        assert len(positions) == len(set(positions))
    assert (table["mutant"].map(lambda m: len(mutation_tokens(m))) == 1).sum() == 18
