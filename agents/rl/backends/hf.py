"""transformers + peft LoRA backend (CPU or one GPU); samples from the current adapter.

Sampling runs a KV-cached loop over the ``n`` copies of one prompt at a time (equal lengths,
so no padding enters the sampler), drawing from ``softmax(logits / T)`` and recording
``log_softmax(logits / T)`` of the drawn token. The learner scores right-padded batches with
one full forward at the same temperature, so both sides compute the same quantity in fp32.

:meth:`HFBackend.sample_requests` serves rows with their own prompts, seeds and regex
constraints as one left-padded batch (``hf_sampling.py``). A constrained completion carries its
regex; the learner replays its tokens through a fresh matcher of the same regex and masks the
same logits before its ``log_softmax``, so importance ratios stay exact (a forced token has
log-prob 0 on both sides and no gradient).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.rl.backends.base import Completion, PolicyBackend, SampleRequest, UpdateStats
from agents.rl.backends.hf_sampling import sample_rows
from agents.rl.constrain import Constrainer, constrainer_for
from agents.rl.loss import LossConfig, kl_shaped_advantages, policy_loss
from agents.rl.policy import LoadedPolicy


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter shape (peft ``LoraConfig``)."""

    r: int = 8
    alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")


@dataclass(frozen=True)
class OptimSettings:
    """AdamW on adapter parameters only, with gradient-norm clipping and micro-batching."""

    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch: int = 8


def _plain_head(model: Any) -> bool:
    """Whether logits are exactly ``lm_head(decoder(x))`` (no soft-capping or scaling after the head)."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "final_logit_softcapping", None) is not None or getattr(cfg, "logit_scale", None):
        return False
    return callable(getattr(model, "get_decoder", None)) and model.get_output_embeddings() is not None


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
    return out


class HFBackend(PolicyBackend):
    """LoRA policy on a transformers causal LM.

    Args:
        policy: The loaded base model and tokenizer.
        lora: Adapter shape.
        optim: Optimiser settings.
        loss: Policy-loss settings.
        device: ``cpu`` or a CUDA device.
        seed: Seed for the adapter's initialisation.
    """

    def __init__(
        self,
        policy: LoadedPolicy,
        lora: LoraSettings | None = None,
        optim: OptimSettings | None = None,
        loss: LossConfig | None = None,
        device: str = "cpu",
        seed: int = 0,
    ) -> None:
        """Wrap the model with a fresh LoRA adapter and build the optimiser."""
        from peft import LoraConfig, get_peft_model

        self.lora = lora or LoraSettings()
        self.optim = optim or OptimSettings()
        self.loss_cfg = loss or LossConfig()
        self.device = torch.device(device)
        self.tokenizer = policy.tokenizer
        self.pad_id = int(policy.tokenizer.pad_token_id)
        self.eos_id = int(policy.tokenizer.eos_token_id)
        cfg = LoraConfig(
            r=self.lora.r,
            lora_alpha=self.lora.alpha,
            target_modules=list(self.lora.target_modules),
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model: Any = get_peft_model(policy.model, cfg)
        self.model.to(self.device)
        self.model.eval()  # no dropout anywhere; gradients still flow
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=self.optim.lr, betas=self.optim.betas, weight_decay=self.optim.weight_decay
        )
        self.adapter_version = 0
        forward = self.model.get_base_model().forward
        self._keeps_logits = "logits_to_keep" in inspect.signature(forward).parameters
        # The mask width is the model's vocabulary (lm_head rows), which may exceed the tokenizer's.
        base: Any = self.model.get_base_model()
        self.vocab_size = int(base.get_output_embeddings().weight.shape[0])
        self._constrainer: Constrainer | None = None

    def constrainer(self) -> Constrainer:
        """The xgrammar constrainer of this policy's tokenizer (built on first use).

        Raises:
            ImportError: If xgrammar is not installed.
        """
        if self._constrainer is None:
            self._constrainer = constrainer_for(self.tokenizer, self.vocab_size)
        return self._constrainer

    # ----------------------------------------------------------------- sampling
    @torch.no_grad()
    def sample(
        self, prompts: Sequence[Sequence[int]], n: int, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt (see :class:`PolicyBackend`).

        Raises:
            ValueError: If ``n``, ``max_new_tokens`` or ``temperature`` is not positive, or a prompt is empty.
        """
        if n <= 0 or max_new_tokens <= 0 or not temperature > 0:
            raise ValueError("n, max_new_tokens and temperature must be positive")
        gen = torch.Generator(device=self.device).manual_seed(seed)
        return [self._sample_one(list(p), n, max_new_tokens, temperature, gen) for p in prompts]

    def sample_requests(self, requests: Sequence[SampleRequest], temperature: float) -> list[Completion]:
        """One completion per request, sampled as one left-padded batch (see the module docstring).

        Raises:
            ValueError: If the temperature or a limit is not positive, or a prompt is empty.
            agents.rl.constrain.ConstraintError: If a constraint does not compile.
        """
        if not temperature > 0 or any(r.max_new_tokens <= 0 for r in requests):
            raise ValueError("temperature and max_new_tokens must be positive")
        if not requests:
            return []
        matchers = [
            None if r.constraint is None else self.constrainer().matcher(r.constraint) for r in requests
        ]
        gens = [torch.Generator(device=self.device).manual_seed(r.seed) for r in requests]
        rows = sample_rows(
            self.model,
            [r.prompt_ids for r in requests],
            [r.max_new_tokens for r in requests],
            temperature,
            gens,
            matchers,
            self.eos_id,
            self.pad_id,
            keep_one_logit=self._keeps_logits,
        )
        return [
            Completion(
                prompt_ids=tuple(r.prompt_ids),
                token_ids=tuple(row.tokens),
                logprobs=tuple(row.logprobs),
                text=self.tokenizer.decode(row.tokens, skip_special_tokens=True),
                finished=row.finished,
                adapter_version=self.adapter_version,
                constraint=r.constraint,
            )
            for r, row in zip(requests, rows, strict=True)
        ]

    def _allowed(self, batch: Sequence[Completion]) -> torch.Tensor | None:
        """Bool masks ``[B, T, V]`` of the constrained rows' tokens (None when no row is constrained)."""
        if all(c.constraint is None for c in batch):
            return None
        width, vocab = max(len(c.token_ids) for c in batch), self.vocab_size
        allowed = torch.ones(len(batch), width, vocab, dtype=torch.bool)
        for i, c in enumerate(batch):
            if c.constraint is None or not c.token_ids:
                continue
            masks = self.constrainer().replay(c.constraint, c.token_ids)
            v = min(vocab, masks.shape[1])
            allowed[i, : len(c.token_ids), :v] = masks[:, :v]
            allowed[i, : len(c.token_ids), v:] = False
        return allowed.to(self.device)

    def _sample_one(
        self, prompt: list[int], n: int, max_new: int, temperature: float, gen: torch.Generator
    ) -> list[Completion]:
        if not prompt:
            raise ValueError("empty prompt")
        tokens, logps, done = sample_tokens(
            self.model, prompt, n, max_new, temperature, gen, self.eos_id, keep_one_logit=self._keeps_logits
        )
        return [
            Completion(
                prompt_ids=tuple(prompt),
                token_ids=tuple(tokens[i]),
                logprobs=tuple(logps[i]),
                text=self.tokenizer.decode(tokens[i], skip_special_tokens=True),
                finished=done[i],
                adapter_version=self.adapter_version,
            )
            for i in range(n)
        ]

    # ----------------------------------------------------------------- learner
    def _forward(
        self,
        batch: Sequence[Completion],
        temperature: float,
        allowed: torch.Tensor | None,
        adapter: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs ``[B, T]``, entropies ``[B, T]`` and policy mask for a micro-batch.

        ``allowed`` is :meth:`_allowed` of the same batch (the sampler's grammar masks, replayed).
        """
        rows = [list(c.prompt_ids) + list(c.token_ids) for c in batch]
        ids = _pad(rows, self.pad_id).to(self.device)
        attn = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            attn[i, : len(r)] = 1
        # Position t predicts token t + 1; completion token j sits at P + j, so it is predicted at P - 1 + j.
        width = max(len(c.token_ids) for c in batch)
        mask = torch.zeros(len(batch), width, device=self.device)
        idx = torch.zeros(len(batch), width, dtype=torch.long, device=self.device)
        for i, c in enumerate(batch):
            p, m = len(c.prompt_ids), len(c.token_ids)
            mask[i, :m] = 1.0
            idx[i, :m] = torch.arange(p - 1, p - 1 + m, device=self.device)
        targets = ids.gather(1, idx + 1)
        with contextlib.ExitStack() as stack:
            if not adapter:
                stack.enter_context(self.model.disable_adapter())
            base = self.model.get_base_model()
            if _plain_head(base):
                # The vocabulary projection only where completion tokens are predicted: the prompt's
                # [B, L, V] logits (GBs for long prompts) are never built.
                hidden = base.get_decoder()(input_ids=ids, attention_mask=attn).last_hidden_state
                h = hidden.gather(1, idx[:, :, None].expand(-1, -1, hidden.shape[-1]))
                logits = base.get_output_embeddings()(h)
            else:
                logits = self.model(input_ids=ids, attention_mask=attn).logits
                logits = logits.gather(1, idx[:, :, None].expand(-1, -1, logits.shape[-1]))
        scaled = logits.float() / temperature
        if allowed is not None:
            scaled = scaled.masked_fill(~allowed, float("-inf"))  # the sampler's masks, replayed
        logp_all = torch.log_softmax(scaled, dim=-1)
        logp = logp_all.gather(2, targets[:, :, None]).squeeze(2)
        with torch.no_grad():
            finite = logp_all if allowed is None else logp_all.masked_fill(~allowed, 0.0)  # no 0 * -inf
            entropy = -(logp_all.exp() * finite).sum(-1)
        out = logp * mask
        ent = entropy * mask
        return out, ent, mask

    def score(
        self, completions: Sequence[Completion], temperature: float, adapter: bool = True
    ) -> list[np.ndarray]:
        """Learner log-probs of each completion's tokens (no gradient).

        With the current adapter, or with it off (``adapter = False``): the initial weights.
        """
        result: list[np.ndarray] = []
        with torch.no_grad():
            for start in range(0, len(completions), self.optim.micro_batch):
                mb = [c for c in completions[start : start + self.optim.micro_batch]]
                logp, _, _ = self._forward(mb, temperature, self._allowed(mb), adapter=adapter)
                for i, c in enumerate(mb):
                    result.append(logp[i, : len(c.token_ids)].cpu().numpy().astype(np.float64))
        return result

    def update(
        self, completions: Sequence[Completion], advantages: Sequence[float], temperature: float
    ) -> UpdateStats:
        """One AdamW step on adapter parameters (see :class:`PolicyBackend`).

        Raises:
            ValueError: If lengths differ, an advantage is non-finite, or no completion has tokens.
        """
        t0 = time.perf_counter()
        adv = np.asarray(advantages, dtype=np.float64)
        if adv.shape != (len(completions),) or not np.all(np.isfinite(adv)):
            raise ValueError("need one finite advantage per completion")
        items = [(c, float(a)) for c, a in zip(completions, adv, strict=True) if len(c.token_ids) > 0]
        if not items:
            raise ValueError("no completion has policy tokens")
        cfg = self.loss_cfg
        total_tokens = sum(len(c.token_ids) for c, _ in items)
        total_seqs = len(items)
        need_base = cfg.kl_mode != "none"
        base_cache: list[torch.Tensor] = []
        shaped_cache: list[torch.Tensor] = []
        mbs = [items[s : s + self.optim.micro_batch] for s in range(0, len(items), self.optim.micro_batch)]
        grammar = [self._allowed([c for c, _ in mb]) for mb in mbs]  # replayed once, used by both passes
        if need_base:
            with torch.no_grad():
                for mb, allowed in zip(mbs, grammar, strict=True):
                    base = self._forward([c for c, _ in mb], temperature, allowed, adapter=False)
                    base_cache.append(base[0])
        # Token advantages (and TTT shaping, centred on the whole batch's mean d).
        tok_adv = []
        samp = []
        for mb in mbs:
            width = max(len(c.token_ids) for c, _ in mb)
            a = torch.zeros(len(mb), width, device=self.device)
            s = torch.zeros(len(mb), width, device=self.device)
            for i, (c, ai) in enumerate(mb):
                a[i, : len(c.token_ids)] = ai
                s[i, : len(c.token_ids)] = torch.tensor(c.logprobs, dtype=torch.float32)
            tok_adv.append(a)
            samp.append(s)
        if cfg.kl_mode == "shaping" and cfg.kl_coef > 0:
            masks = [
                (torch.arange(t.shape[1])[None, :] < torch.tensor([len(c.token_ids) for c, _ in mb])[:, None])
                .float()
                .to(self.device)
                for t, mb in zip(tok_adv, mbs, strict=True)
            ]
            flat_mask = torch.cat([m.flatten() for m in masks])
            flat_samp = torch.cat([s.flatten() for s in samp])
            flat_base = torch.cat([b.flatten() for b in base_cache])
            flat_adv = torch.cat([a.flatten() for a in tok_adv])
            shaped = kl_shaped_advantages(flat_adv, flat_samp, flat_base, flat_mask, cfg.kl_coef)
            pos = 0
            for a in tok_adv:
                shaped_cache.append(shaped[pos : pos + a.numel()].view_as(a))
                pos += a.numel()
            tok_adv = shaped_cache
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = ent_sum = clip_sum = kl_sum = gap_sum = 0.0
        for j, mb in enumerate(mbs):
            logp, ent, mask = self._forward([c for c, _ in mb], temperature, grammar[j])
            terms = policy_loss(
                logp,
                samp[j],
                tok_adv[j],
                mask,
                cfg,
                total_tokens,
                total_seqs,
                base_logp=base_cache[j] if need_base else None,
            )
            terms.loss.backward()
            loss_sum += float(terms.loss.detach())
            ent_sum += float((ent * mask).sum())
            clip_sum += terms.clipped_tokens
            kl_sum += terms.kl_sum
            gap_sum += float(((logp.detach() - samp[j]).abs() * mask).sum())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.optim.max_grad_norm))
        stats = UpdateStats(
            loss=loss_sum,
            entropy=ent_sum / total_tokens,
            grad_norm=grad_norm,
            clip_frac=clip_sum / total_tokens,
            kl=kl_sum / total_tokens if need_base else math.nan,
            logprob_gap=gap_sum / total_tokens,
            tokens=total_tokens,
        )
        if not math.isfinite(grad_norm) or not math.isfinite(loss_sum):
            self.optimizer.zero_grad(set_to_none=True)
            stats.stepped = False
            stats.skip_reason = "non-finite loss or gradient"
        else:
            self.optimizer.step()
            self.adapter_version += 1
        stats.extra["seconds"] = time.perf_counter() - t0
        return stats

    # ----------------------------------------------------------------- versions and state
    def export_adapter(self, path: Path) -> None:
        """Write the adapter as a PEFT directory (``adapter_config.json`` + safetensors)."""
        # the base weights never change (no resized vocabulary): with LoRA on a tied lm_head, peft
        # would otherwise save the whole embedding matrix (113 MB for SmolLM2) in every checkpoint
        self.model.save_pretrained(str(path), save_embedding_layers=False)

    def load_adapter(self, path: Path, version: int) -> None:
        """Load adapter weights from a PEFT directory.

        Raises:
            FileNotFoundError: If the directory holds no adapter weights.
        """
        from peft import load_peft_weights, set_peft_model_state_dict

        if not (Path(path) / "adapter_config.json").is_file():
            raise FileNotFoundError(f"no PEFT adapter in {path}")
        weights = load_peft_weights(str(path), device=str(self.device))
        result = set_peft_model_state_dict(self.model, weights)
        unexpected = getattr(result, "unexpected_keys", [])
        if unexpected:
            raise ValueError(f"adapter in {path} does not match this model: {unexpected[:3]}")
        self.adapter_version = version

    def save_state(self, path: Path) -> None:
        """Adapter directory plus ``optimizer.pt`` under ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        self.export_adapter(path / "adapter")
        torch.save(self.optimizer.state_dict(), path / "optimizer.pt")

    def load_state(self, path: Path, version: int) -> None:
        """Restore adapter and optimiser state written by :meth:`save_state`.

        Raises:
            FileNotFoundError: If either part is missing.
        """
        self.load_adapter(path / "adapter", version)
        state = torch.load(path / "optimizer.pt", map_location=self.device, weights_only=True)
        self.optimizer.load_state_dict(state)


@torch.no_grad()
def sample_tokens(
    model: Any,
    prompt: list[int],
    n: int,
    max_new: int,
    temperature: float,
    gen: torch.Generator,
    eos_id: int,
    *,
    keep_one_logit: bool,
) -> tuple[list[list[int]], list[list[float]], list[bool]]:
    """KV-cached sampling of ``n`` continuations of one prompt.

    Draws from ``softmax(logits / T)`` and records ``log_softmax(logits / T)`` of each drawn
    token; ``temperature <= 0`` decodes greedily (log-probs at T = 1).

    Returns:
        Token ids, their log-probs and whether each continuation ended on ``eos_id``.
    """
    device = next(model.parameters()).device
    ids = torch.tensor([prompt] * n, dtype=torch.long, device=device)
    keep = {"logits_to_keep": 1} if keep_one_logit else {}  # no [n, P, V] prefill logits
    out = model(input_ids=ids, use_cache=True, **keep)
    past = out.past_key_values
    logits = out.logits[:, -1, :].float()
    tokens: list[list[int]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    done = [False] * n
    for _ in range(max_new):
        if temperature > 0:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            nxt = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
        else:
            logp = torch.log_softmax(logits, dim=-1)
            nxt = logp.argmax(dim=-1)
        chosen = logp.gather(1, nxt[:, None]).squeeze(1)
        for i in range(n):
            if not done[i]:
                tokens[i].append(int(nxt[i]))
                logps[i].append(float(chosen[i]))
                done[i] = int(nxt[i]) == eos_id
        if all(done):
            break
        out = model(input_ids=nxt[:, None], past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
    return tokens, logps, done
