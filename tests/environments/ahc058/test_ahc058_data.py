"""AHC058 inputs: the generator meets the statement's constraints; public inputs match their pins."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from environments.ahc058.data import MAX_COST, check_instance, format_input, generate, parse_input
from harness.envs.registry import default_registry


def cost_factor(inst) -> np.ndarray:  # noqa: ANN001
    """C_{i,j} / (A_j * 500^i): the statement draws it as 10^u with u uniform in [0, 2]."""
    return inst.c / (inst.a[None, :] * (500.0 ** np.arange(inst.levels))[:, None])


@pytest.mark.parametrize("seed", [0, 1, 2, 999])
def test_generated_inputs_satisfy_the_constraints(seed: int) -> None:
    inst = generate(seed)
    check_instance(inst)  # N, L, T, K fixed; 1 <= A <= 100 sorted; 1 <= C <= 1.25e12
    assert inst.a[0] == 1 and inst.c[0, 0] == 1
    assert inst.c.max() <= MAX_COST
    factor = cost_factor(inst)
    factor[0, 0] = 1.0
    # Rounding moves the factor by at most 0.5 / (A_j * 500^i) <= 0.5.
    assert (factor >= 0.5).all() and (factor <= 100.5).all()
    back = parse_input(format_input(inst))
    assert np.array_equal(back.a, inst.a) and np.array_equal(back.c, inst.c)


def test_generator_is_deterministic_per_seed() -> None:
    assert format_input(generate(7)) == format_input(generate(7))
    assert format_input(generate(7)) != format_input(generate(8))


def test_parse_input_rejects_broken_files() -> None:
    with pytest.raises(ValueError):
        parse_input(b"2 1 5 1\n1 2\n3\n")  # one cost missing
    with pytest.raises(ValueError, match="sorted"):
        parse_input(b"2 1 5 1\n5 2\n3 4\n")
    with pytest.raises(ValueError, match="C must"):
        parse_input(b"1 1 5 1\n1\n0\n")


def test_public_inputs_match_the_pins_and_the_constraints(shared_data: Path) -> None:
    variant = default_registry().get("ahc058")
    ((key, source),) = variant.data
    assert key == "public-inputs" and len(source.files) == 150
    assert sorted(source.files) == [f"ahc058_{seed:06d}_input.txt" for seed in range(150)]
    folder = shared_data / "ahc" / "ahc058" / "inputs"
    factors = []
    for name, sha in source.files.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha, name
        inst = parse_input(data)
        check_instance(inst)
        assert inst.a[0] == 1 and inst.c[0, 0] == 1
        factors.append(cost_factor(inst).ravel()[1:])
    # The official inputs follow the distribution our generator implements.
    f = np.concatenate(factors)
    assert (f >= 0.5).all() and (f <= 100.5).all()
    assert abs(np.log10(f).mean() - 1.0) < 0.05  # log10 of the factor is uniform on [0, 2]
