"""The EPLB initial program: golden example, block structure, validity, mutation operators."""

from __future__ import annotations

import ast
import importlib.util
import random
import types
from pathlib import Path

import pytest
import torch

from environments.eplb.data import synthetic_windows
from environments.eplb.mutations import operators
from environments.eplb.scorer import validate_placement

FAMILY_DIR = Path(__file__).resolve().parents[3] / "environments" / "eplb"
INITIAL = FAMILY_DIR / "initial_program.py"

GOLDEN_WEIGHT = [
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
]
GOLDEN_PHY2LOG = [
    [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
    [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1],
]


def load_program(source: str, name: str) -> types.ModuleType:
    """Execute a (trusted) program text as a fresh module."""
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def initial() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("eplb_initial_program", INITIAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_golden_example_exact(initial: types.ModuleType) -> None:
    weight = torch.tensor(GOLDEN_WEIGHT)
    phy2log, log2phy, logcnt = initial.rebalance_experts(weight, 16, 4, 2, 8)
    assert phy2log.tolist() == GOLDEN_PHY2LOG
    assert phy2log.dtype == log2phy.dtype == logcnt.dtype == torch.int64
    # Counts follow from phy2log, and log2phy lists exactly the slots phy2log assigns.
    for layer in range(2):
        assert logcnt[layer].tolist() == torch.bincount(phy2log[layer], minlength=12).tolist()
        for e in range(12):
            c = int(logcnt[layer, e])
            slots = log2phy[layer, e, :c].tolist()
            assert sorted(slots) == [s for s in range(16) if GOLDEN_PHY2LOG[layer][s] == e]
            assert (log2phy[layer, e, c:] == -1).all()
    validate_placement((phy2log, log2phy, logcnt), 2, 12, 16)


def test_golden_example_accepts_float_input(initial: types.ModuleType) -> None:
    phy2log, _, _ = initial.rebalance_experts(torch.tensor(GOLDEN_WEIGHT, dtype=torch.float32), 16, 4, 2, 8)
    assert phy2log.tolist() == GOLDEN_PHY2LOG


def test_global_fallback_when_groups_do_not_split_over_nodes(initial: types.ModuleType) -> None:
    # 3 groups over 2 nodes -> the global policy (one node, one group) must be used.
    weight = torch.tensor(GOLDEN_WEIGHT, dtype=torch.float32)
    got = initial.rebalance_experts(weight, 16, 3, 2, 8)
    want = initial.hierarchical_placement(weight, 16, 1, 1, 8)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[2], want[2])
    validate_placement(got, 2, 12, 16)


def test_balanced_packing_ties_pick_lowest_pack(initial: types.ModuleType) -> None:
    pack, rank = initial.balanced_packing(torch.tensor([[1.0, 1.0, 1.0, 1.0]]), 2)
    assert pack.tolist() == [[0, 1, 0, 1]]
    assert rank.tolist() == [[0, 0, 1, 1]]


def test_replicate_experts_gives_spares_to_busiest(initial: types.ModuleType) -> None:
    slot_expert, slot_rank, count = initial.replicate_experts(torch.tensor([[10.0, 1.0, 4.0]]), 6)
    # spares: 10 -> (5), then 10/2=5 vs 4 -> expert 0 again (10/3), then 4 > 3.33 -> expert 2.
    assert slot_expert.tolist() == [[0, 1, 2, 0, 0, 2]]
    assert slot_rank.tolist() == [[0, 0, 0, 1, 2, 1]]
    assert count.tolist() == [[3, 1, 2]]


@pytest.mark.parametrize(
    ("layers", "experts", "replicas", "groups", "nodes", "gpus"),
    [(4, 32, 40, 4, 2, 8), (3, 16, 24, 4, 2, 4), (2, 12, 16, 3, 2, 8), (5, 64, 72, 8, 4, 8)],
)
def test_initial_program_is_valid_on_synthetic(
    initial: types.ModuleType, layers: int, experts: int, replicas: int, groups: int, nodes: int, gpus: int
) -> None:
    windows = synthetic_windows({"layers": layers, "experts": experts, "windows": 3, "seed": 7})
    for w in windows:
        out = initial.rebalance_experts(w.float(), replicas, groups, nodes, gpus)
        validate_placement(out, layers, experts, replicas)


def test_evolve_block_structure() -> None:
    lines = INITIAL.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "# EVOLVE-BLOCK-START"]
    ends = [i for i, line in enumerate(lines) if line.strip() == "# EVOLVE-BLOCK-END"]
    assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0]
    imports = [i for i, line in enumerate(lines) if line.strip() == "import torch"]
    assert imports and all(i < starts[0] for i in imports)
    body = "\n".join(lines[starts[0] + 1 : ends[0]])
    assert "def rebalance_experts(" in body


def test_mutation_operators_yield_valid_programs() -> None:
    source = INITIAL.read_text()
    ops = operators()
    assert ops and len({op.name for op in ops}) == len(ops)
    windows = synthetic_windows({"layers": 3, "experts": 16, "windows": 2, "seed": 3})
    for op in ops:
        assert source.count(op.search) == 1, op.name
        assert op.replacements, op.name
        for k, replacement in enumerate(op.replacements):
            assert replacement != op.search
            mutated = source.replace(op.search, replacement)
            ast.parse(mutated)
            module = load_program(mutated, f"mutant_{op.name}_{k}")
            for groups, nodes in ((4, 2), (3, 2)):
                out = module.rebalance_experts(windows[0].float(), 24, groups, nodes, 4)
                validate_placement(out, 3, 16, 24)


def test_mutation_operators_apply_inside_the_block() -> None:
    source = INITIAL.read_text()
    rng = random.Random(0)
    for op in operators():
        mutated = op.apply(source, rng, "python")
        assert mutated is not None and mutated != source, op.name
        ast.parse(mutated)
