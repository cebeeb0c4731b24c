"""Template-constrained prompt edits and the Pareto front with failure-coverage sampling."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agents.pace.front import CATEGORIES, Entry, ParetoFront
from agents.pace.prompt_config import (
    FORMATS,
    MAX_REQUIREMENTS,
    TEMPERATURE_RANGE,
    PromptConfig,
    crossover,
    mutate,
    revise,
)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**31), steps=st.integers(1, 30))
def test_mutations_stay_inside_the_template(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    cfg = PromptConfig()
    for _ in range(steps):
        new = mutate(cfg, rng)
        PromptConfig.model_validate(new.model_dump())  # re-validates every bound
        assert TEMPERATURE_RANGE[0] <= new.temperature <= TEMPERATURE_RANGE[1]
        assert len(new.requirements) <= MAX_REQUIREMENTS and new.response_format in FORMATS
        assert new != cfg  # a mutation always changes something
        cfg = new


def test_apply_edits_system_user_and_format() -> None:
    cfg = PromptConfig(
        role="ROLE.", requirements=("Req one.",), response_format="full-program", temperature=0.3
    )
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Stage: x\n\nbody"}]
    out = cfg.apply(msgs, implementer=True)
    assert out[0]["content"].startswith("ROLE.\n\nsys")
    assert "## Additional requirements\n- Req one." in out[1]["content"]
    assert "complete program" in out[1]["content"]
    assert msgs[1]["content"] == "Stage: x\n\nbody"  # the input is not modified
    assert "Preferred reply format" not in cfg.apply(msgs, implementer=False)[1]["content"]
    assert PromptConfig().apply(msgs, implementer=False) == msgs


def test_revision_is_validated_against_the_template() -> None:
    base = PromptConfig(requirements=("a",))
    assert revise(base, ["b", "  b ", "c"]).requirements == ("a", "b", "c")
    with pytest.raises(ValidationError):
        revise(base, ["x" * 201])
    with pytest.raises(ValidationError):
        revise(base, ["```python\nimport os\n```"])
    many = revise(base, [f"r{i}" for i in range(10)])
    assert len(many.requirements) == MAX_REQUIREMENTS and many.requirements[-1] == "r9"
    with pytest.raises(ValidationError):
        PromptConfig(temperature=2.0)
    with pytest.raises(ValidationError):
        PromptConfig.model_validate({"role": "r", "system_prompt": "x"})  # no field outside the template


def test_crossover_combines_both_parents() -> None:
    a = PromptConfig(role="A", requirements=("x",), temperature=0.2)
    b = PromptConfig(role="B", requirements=("y", "x"), temperature=1.0, response_format="full-program")
    c = crossover(a, b)
    assert (c.role, c.requirements, c.temperature, c.response_format) == (
        "A",
        ("x", "y"),
        0.6,
        "search-replace",
    )


entries = st.builds(
    Entry,
    config=st.builds(
        PromptConfig, temperature=st.sampled_from([0.2, 0.5, 1.0]), role=st.sampled_from(["", "a", "b"])
    ),
    u=st.floats(0.0, 1.0),
    tokens=st.integers(0, 1000),
    failures=st.lists(st.sampled_from(CATEGORIES), unique=True),
)


@settings(max_examples=80)
@given(items=st.lists(entries, max_size=25))
def test_front_is_non_dominated_and_keeps_the_best(items: list[Entry]) -> None:
    front = ParetoFront(max_size=50)
    for e in items:
        front.add(e)
    for a in front.entries:
        assert not any(b.dominates(a) for b in front.entries if b is not a)
    if items:
        assert front.best() is not None
        assert front.best().u == max(e.u for e in items)  # type: ignore[union-attr]
    keys = [e.config.key() for e in front.entries]
    assert len(keys) == len(set(keys))


def test_coverage_sampling_and_complementary_pair() -> None:
    front = ParetoFront()
    cheap = Entry(
        config=PromptConfig(role="cheap"),
        u=0.1,
        tokens=10,
        failures=["extraction_runtime", "format_constraint"],
    )
    good = Entry(config=PromptConfig(role="good"), u=0.6, tokens=500, failures=["reasoning_content"])
    mid = Entry(config=PromptConfig(role="mid"), u=0.3, tokens=100, failures=["extraction_runtime"])
    for e in (cheap, good, mid):
        assert front.add(e)
    assert not front.add(Entry(config=PromptConfig(role="bad"), u=0.05, tokens=600))  # dominated
    assert [front.coverage(e) for e in front.entries] == [3, 3, 2]  # good, mid, cheap
    counts = {e.config.role: 0 for e in front.entries}
    rng = random.Random(0)
    for _ in range(4000):
        counts[front.sample_parent(rng).config.role] += 1  # type: ignore[union-attr]
    assert counts["good"] == pytest.approx(4000 * 3 / 8, rel=0.1)
    assert counts["cheap"] == pytest.approx(4000 * 2 / 8, rel=0.12)
    a, b = front.complementary_pair()  # type: ignore[misc]
    assert {a.config.role, b.config.role} == {"good", "mid"}  # together they avoid every category once
