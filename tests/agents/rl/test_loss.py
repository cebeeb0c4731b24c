import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.rl.loss import LossConfig, aggregate, kl_shaped_advantages, policy_loss

MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])  # a 2x3 padded batch: lengths 3 and 1


def test_aggregation_modes_by_hand():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0]])
    assert float(aggregate(x, MASK, "token_mean", 4, 2)) == pytest.approx(10 / 4)
    assert float(aggregate(x, MASK, "seq_mean", 4, 2)) == pytest.approx((2 + 4) / 2)
    assert float(aggregate(x, MASK, "token_sum", 4, 2)) == pytest.approx(10)
    with pytest.raises(ValueError):
        aggregate(x, MASK, "token_mean", 0, 2)


def test_ratio_one_gives_reinforce_gradient():
    logits = torch.randn(2, 3, requires_grad=True)
    logp = torch.nn.functional.logsigmoid(logits)
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    terms = policy_loss(logp, logp.detach(), adv, MASK, LossConfig(), 4, 2)
    (g_ppo,) = torch.autograd.grad(terms.loss, logits, retain_graph=True)
    reinforce = -(logp * adv * MASK).sum() / 4
    (g_pg,) = torch.autograd.grad(reinforce, logits)
    torch.testing.assert_close(g_ppo, g_pg)
    assert terms.clipped_tokens == 0


def test_asymmetric_clip_zeroes_gradient_outside_bounds():
    cfg = LossConfig(eps_lo=0.2, eps_hi=0.28)
    mask = torch.ones(1, 4)
    old = torch.zeros(1, 4)
    # ratios 1.5 (A>0: clipped), 1.1 (A>0: not), 0.5 (A<0: clipped), 0.5 (A>0: not clipped, min picks ratio)
    logp = torch.log(torch.tensor([[1.5, 1.1, 0.5, 0.5]])).requires_grad_()
    adv = torch.tensor([[1.0, 1.0, -1.0, 1.0]])
    terms = policy_loss(logp, old, adv, mask, cfg, 4, 1)
    (g,) = torch.autograd.grad(terms.loss, logp)
    assert g[0, 0] == 0 and g[0, 2] == 0
    assert g[0, 1] != 0 and g[0, 3] != 0
    assert terms.clipped_tokens == 2
    # Unclipped importance-sampling loss keeps every gradient.
    (g2,) = torch.autograd.grad(policy_loss(logp, old, adv, mask, LossConfig(clip=False), 4, 1).loss, logp)
    assert bool((g2 != 0).all())


def test_truncated_importance_weights():
    mask = torch.ones(1, 2)
    sampler = torch.log(torch.tensor([[0.5, 0.1]]))
    logp = torch.log(torch.tensor([[0.5, 0.5]])).requires_grad_()  # learner/sampler = 1 and 5
    adv = torch.ones(1, 2)
    cfg = LossConfig(ratio_ref="learner", tis_cap=2.0, aggregation="token_sum")
    loss = policy_loss(logp, sampler, adv, mask, cfg, 2, 1).loss
    assert float(loss) == pytest.approx(-(1.0 + 2.0))  # ratio 1 with weights 1 and min(5, 2)


def test_masked_tokens_do_not_matter():
    logp = torch.zeros(2, 3, requires_grad=True)
    adv = torch.ones(2, 3)
    adv2 = adv.clone()
    adv2[1, 1:] = 1e6
    a = policy_loss(logp, logp.detach(), adv, MASK, LossConfig(), 4, 2).loss
    b = policy_loss(logp, logp.detach(), adv2, MASK, LossConfig(), 4, 2).loss
    assert float(a) == float(b)
    (g,) = torch.autograd.grad(b, logp)
    assert bool((g[1, 1:] == 0).all())


def test_kl_loss_and_shaping():
    mask = torch.ones(1, 2)
    logp = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    base = torch.log(torch.tensor([[0.25, 0.25]]))
    cfg = LossConfig(kl_mode="loss", kl_coef=0.5, aggregation="token_sum")
    terms = policy_loss(logp, logp.detach(), torch.zeros(1, 2), mask, cfg, 2, 1, base_logp=base)
    k3 = 0.5 - math.log(0.5) - 1.0  # exp(d) - d - 1 with d = log(0.25 / 0.5)
    assert float(terms.loss) == pytest.approx(0.5 * k3)
    assert terms.kl_sum == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        policy_loss(logp, logp.detach(), torch.zeros(1, 2), mask, cfg, 2, 1)
    shaped = kl_shaped_advantages(torch.zeros(1, 2), logp.detach(), base, mask, coef=0.1)
    d = torch.tensor([math.log(2), 0.0])
    torch.testing.assert_close(shaped[0], 0.1 * (d.mean() - d))


@settings(max_examples=50, deadline=None)
@given(st.floats(0.0, 0.9), st.floats(0.0, 2.0))
def test_loss_config_validation(eps_lo, eps_hi):
    LossConfig(eps_lo=eps_lo, eps_hi=eps_hi)
    with pytest.raises(ValueError):
        LossConfig(eps_lo=1.0 + eps_lo)
    with pytest.raises(ValueError):
        LossConfig(aggregation="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LossConfig(tis_cap=-eps_hi - 1)
