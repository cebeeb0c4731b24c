"""Answer-format regexes accept exactly what the PACEvolve parsers accept (and xgrammar agrees)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agents.learning import answer_formats as af
from agents.pacevolve.parsing import (
    parse_classification,
    parse_drop,
    parse_edit,
    parse_ideas,
    parse_repeat,
    parse_selection,
)
from agents.rl.constrain import constrainer_for
from agents.rl.policy import byte_tokenizer
from harness.envs.registry import default_registry
from harness.llm.offline.vocabulary import apply_named_edit, vocabulary
from harness.runner.runner import task_spec

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TASK = task_spec(default_registry().get("eplb-tiny"))
PROGRAM, LANG = TASK.initial_program, TASK.language.value
ENTRIES = vocabulary(PROGRAM, LANG, TASK.mutations)
EDIT = af.edit_names(ENTRIES)
POOL = {1, 3, 12}
PRUNED = {2, 30}


def _xgrammar_accepts(regex: str, answer: str) -> bool:
    """Whether xgrammar (byte tokenizer) accepts ``answer`` and then allows EOS."""
    m = constrainer_for(byte_tokenizer(), 258).matcher(regex)
    for b in answer.encode():
        if not bool(m.allowed()[b]):
            return False
        m.accept(b)
    return bool(m.allowed()[257])


def _sample(regex: str) -> st.SearchStrategy[str]:
    return st.from_regex(re.compile(regex), fullmatch=True)


def test_vocabulary_is_not_empty_here():
    assert EDIT is not None and ENTRIES


@FAST
@given(st.data())
def test_idea_generation_answers_parse_and_name_a_published_edit(data):
    regex = af.idea_generation(EDIT)
    answer = data.draw(_sample(regex))
    [idea] = parse_ideas(answer, 1)
    assert apply_named_edit(PROGRAM, LANG, TASK.mutations, idea).program is not None
    assert _xgrammar_accepts(regex, answer)


@FAST
@given(st.data())
def test_free_hypotheses_parse(data):
    answer = data.draw(_sample(af.idea_generation(None)))
    assert parse_ideas(answer, 1)


@FAST
@given(st.data())
def test_classification_answers_parse_with_ids_from_the_right_set(data):
    regex = af.classification(POOL, PRUNED, EDIT)
    answer = data.draw(_sample(regex))
    c = parse_classification(answer, POOL, PRUNED)
    assert (c.kind == "refine") == (c.idea_id in POOL) and (c.kind == "known_failure") == (
        c.idea_id in PRUNED
    )
    assert _xgrammar_accepts(regex, answer)


@FAST
@given(st.data(), st.integers(0, 200))
def test_selection_answers_parse_and_foreign_ids_never_match(data, other):
    regex = af.selection(POOL, EDIT)
    assert regex is not None
    answer = data.draw(_sample(regex))
    sel = parse_selection(answer, POOL)
    assert sel.idea_id in POOL and apply_named_edit(PROGRAM, LANG, TASK.mutations, sel.hypothesis).program
    assume(other not in POOL)
    forged = re.sub(r"^Idea ID: \d+", f"Idea ID: {other}", answer)
    assert not re.fullmatch(regex, forged) and not _xgrammar_accepts(regex, forged)


@FAST
@given(st.data(), st.integers(1, 3))
def test_pruning_and_repetition_answers_parse(data, n_drop):
    regex = af.pruning(POOL, n_drop)
    assert regex is not None
    ids, _ = parse_drop(data.draw(_sample(regex)), POOL, n_drop)
    assert ids and set(ids) <= POOL
    assert not re.fullmatch(regex, "Drop: [7]")
    parse_repeat(data.draw(_sample(af.repetition())))


def test_empty_pools_give_no_format():
    assert af.selection(set(), EDIT) is None and af.pruning(set(), 1) is None
    assert "yes" not in af.classification(set(), set(), None)


@FAST
@given(st.data())
def test_edit_blocks_apply_or_change_nothing(data):
    regex = af.edit_block(PROGRAM, LANG)
    assert regex is not None
    answer = data.draw(_sample(regex))
    try:
        new = parse_edit(answer, PROGRAM, LANG)
    except ValueError as e:  # the only way a well-formed block fails: it changes nothing / breaks syntax
        assert "unchanged" in str(e) or "cannot be applied" in str(e), e
        return
    assert new != PROGRAM


def test_edit_block_search_lines_are_exact_program_lines():
    runs = af.search_runs(PROGRAM, LANG)
    assert runs and all(PROGRAM.count(r + "\n") == 1 for r in runs)
    regex = af.edit_block(PROGRAM, LANG)
    assert regex is not None
    answer = f"<<<<<<< SEARCH\n{runs[0]}\n=======\n    pass  # changed\n>>>>>>> REPLACE"
    assert re.fullmatch(regex, answer) and _xgrammar_accepts(regex, answer)
    assert not re.fullmatch(regex, answer.replace(runs[0], runs[0] + "x", 1))


@pytest.mark.parametrize("bad", ["", "a  b"])
def test_text_rejects_what_the_parsers_would_shorten(bad):
    assert not re.fullmatch(af.text(2), bad)
