"""The contract every environment family keeps, checked once for all of them through the real sandbox.

Parametrised over the registry's variants, so a family added to ``environments/`` is checked
without a line here (a family missing from the tables below fails, so the check stays exhaustive):

* every tiny variant's data is present, or it declares none (tiny variants run offline);
* its honest baseline (the initial program) evaluates ``ok`` on the local backend with a finite
  score whose progress u lies clearly inside (0, 1) (a kernel timing: positive), and per-case
  results come back exactly where the family scores units (``CASE_FAMILIES``);
* the hostile corpus (``tests/environments/test_hacks.py``) runs against the family;
* a program written only to the declared contract is scored: for Python, imports plus one function
  whose name and parameter list are taken from the manifest's ``entry_point`` and ``signature``
  (what ``bench envs --json`` prints); for C++, a ``main`` that reads stdin and writes stdout.
  Nothing from the initial program (helpers, adapters, EVOLVE-BLOCK markers) is included.

What is specific to one family stays in ``tests/environments/<family>/``.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from evobench.cli import commands_info
from harness.envs.data import require_data
from harness.envs.draw_bounds import bounds_for
from harness.envs.manifest import Language
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend

from .test_hacks import ALL as HOSTILE_CORPUS

# Imports and body of each Python family's minimal program; the ``def`` line comes from the manifest.
PYTHON_BODIES: dict[str, tuple[str, str]] = {
    "selftest": ("", 'return {"answer": 42.0}'),
    "selftest_bandit": ("", 'return "good"'),
    "llm_sr": (
        "import numpy as np",
        "return np.asarray(params[0] * input_columns[0] + params[1] * input_columns[-1], dtype=float)",
    ),
    "multi_evolve": ("", 'return -test_df["num_mutations"].to_numpy(dtype=float)'),
    "kuairec": (
        "import torch",
        """\
class Mean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.items = torch.nn.Embedding(num_items + 1, embedding_dim, padding_idx=0)

    def forward(self, items, timestamps):
        return self.items(items).mean(dim=1)

    def item_embeddings(self):
        return self.items.weight

return Mean()""",
    ),
    "eplb": (
        "import torch",
        """\
layers, experts = weight.shape
slots = torch.arange(num_replicas) % experts
phy2log = slots.expand(layers, num_replicas).clone()
logcnt = torch.bincount(slots, minlength=experts).expand(layers, experts).clone()
log2phy = torch.full((layers, experts, int(logcnt.max())), -1, dtype=torch.int64)
for slot in range(num_replicas):
    log2phy[:, slot % experts, slot // experts] = slot
return phy2log, log2phy, logcnt""",
    ),
    "trimul": (
        "import torch\nimport torch.nn.functional as F",
        """\
x, mask, w, config = data
c, h = config["dim"], config["hidden_dim"]
xn = F.layer_norm(x, (c,), w["norm.weight"], w["norm.bias"], 1e-5)
m = mask.to(x.dtype).unsqueeze(-1)
left = F.linear(xn, w["left_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["left_gate.weight"]))
right = F.linear(xn, w["right_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["right_gate.weight"]))
o = torch.einsum("bikh,bjkh->bijh", left, right)
o = F.layer_norm(o, (h,), w["to_out_norm.weight"], w["to_out_norm.bias"], 1e-5)
return F.linear(o * torch.sigmoid(F.linear(xn, w["out_gate.weight"])), w["to_out.weight"])""",
    ),
    "mla_decode": (
        "import math\nimport torch",
        """\
def rope(t, pos, dim):
    half = dim // 2
    theta = (10000.0 ** (-torch.arange(0, half, dtype=torch.bfloat16) * 2 / dim)).to(torch.bfloat16)
    f = pos.to(torch.bfloat16)[:, None] * theta[None, :]
    cos = torch.cat([f.cos(), f.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([f.sin(), f.sin()], -1).to(torch.bfloat16)
    return t * cos + torch.cat([-t[..., half:], t[..., :half]], -1) * sin

config, x, kv = data
w, bs, h = config["weights"], x.shape[0], config["n_heads"]
nope, rp, vd = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
lora, cache, n = config["kv_lora_rank"], kv["data"], kv["seq_len"]
cache[:, n : n + 1] = x @ w["KV_proj_down"].T
q = ((x @ w["Q_proj_down"].T) @ w["Q_proj_up"].T).view(bs, h, nope + rp)
q_rope = rope(q[..., nope:], torch.tensor([n]), rp)
latent, k_rope = cache[:, : n + 1, :lora], rope(cache[:, : n + 1, lora:], torch.arange(n + 1), rp)
up = w["KV_proj_up"].view(h, nope + vd, lora)
q_lat = torch.einsum("bhn,hnl->bhl", q[..., :nope].float(), up[:, :nope].float())
s = torch.einsum("bhl,btl->bht", q_lat, latent.float())
s = s + torch.einsum("bhr,btr->bht", q_rope.float(), k_rope.float())
a = torch.softmax(s / math.sqrt(nope + rp), dim=-1).to(torch.bfloat16)
ctx = torch.einsum("bht,btl->bhl", a.float(), latent.float())
y = torch.einsum("bhl,hvl->bhv", ctx, up[:, nope:].float()).to(torch.bfloat16)
return y.reshape(bs, 1, h * vd) @ w["wo"].T, cache""",
    ),
}

# Python families whose scorer runs the candidate only through ``run`` (fresh sandboxed processes),
# where warm and cold mode do the same thing.
FRESH_PROCESS_ONLY = {"kuairec"}

# Python families whose entry point is a class (KernelBench's ModelNew mirrors the problem's Model;
# kernelbench-tiny's problem: a linear layer, GELU, a scale).
CLASS_PROGRAMS: dict[str, str] = {
    "kernelbench": """\
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return nn.functional.gelu(self.linear(x)) * self.scale
""",
}

# Whole programs of the C++ families (their contract is a main reading stdin, writing stdout).
CPP_PROGRAMS: dict[str, str] = {
    "ahc039": """\
#include <iostream>
int main() {
    int n;
    if (!(std::cin >> n)) return 1;
    std::cout << "4\\n0 0\\n1 0\\n1 1\\n0 1\\n";
}
""",
    "ahc058": """\
#include <iostream>
int main() {
    long n, l, t, k;
    if (!(std::cin >> n >> l >> t >> k)) return 1;
    for (long i = 0; i < t; ++i) std::cout << "-1\\n";
}
""",
}


def declared_parameters(entry_point: str, signature: str) -> str:
    """The parameter list of a human-readable signature as Python, annotations dropped.

    ``"f(a: T [n], *b: U, c: dict [x, y]) -> R; notes"`` gives ``"a, *b, c"``.

    Raises:
        ValueError: If the signature does not start with ``entry_point(`` or is unbalanced.
    """
    if not signature.startswith(entry_point + "("):
        raise ValueError(f"signature {signature!r} does not start with {entry_point!r}(")
    depth, parts, current = 0, [], ""
    for ch in signature[len(entry_point) + 1 :]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                parts.append(current)
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    else:
        raise ValueError(f"signature {signature!r} has no closing parenthesis")
    names = [p.split(":", 1)[0].strip() for p in parts if p.strip()]
    for name in names:
        if not re.fullmatch(r"\*{0,2}[A-Za-z_]\w*", name):
            raise ValueError(f"signature {signature!r}: {name!r} is not a parameter name")
    return ", ".join(names)


def minimal_program(variant: Variant) -> str:
    """The smallest program honouring the variant's declared contract (see the module docstring)."""
    if variant.language is Language.CPP:
        assert (
            variant.entry_point == "main" and "stdin" in variant.signature and "stdout" in variant.signature
        )
        if variant.family not in CPP_PROGRAMS:
            pytest.fail(f"add a minimal C++ program for family {variant.family!r} to {__name__}")
        return CPP_PROGRAMS[variant.family]
    if variant.family in CLASS_PROGRAMS:
        assert f"class {variant.entry_point}(" in CLASS_PROGRAMS[variant.family]
        return CLASS_PROGRAMS[variant.family]
    if variant.family not in PYTHON_BODIES:
        pytest.fail(f"add a minimal program body for family {variant.family!r} to {__name__}")
    imports, body = PYTHON_BODIES[variant.family]
    params = declared_parameters(variant.entry_point, variant.signature)
    indented = "\n".join("    " + line for line in body.splitlines())
    return f"{imports}\n\n\ndef {variant.entry_point}({params}):\n{indented}\n".lstrip("\n")


def tiny_variants() -> list[Variant]:
    """The first tiny variant of each family."""
    reg = default_registry()
    return [next(v for v in reg.variants(fam) if v.tiny) for fam in reg.families()]


def all_tiny_variants() -> list[Variant]:
    """Every tiny variant of every family."""
    return [v for v in default_registry().variants() if v.tiny]


def test_declared_parameters_parses_manifest_style_signatures() -> None:
    assert declared_parameters("f", "f() -> dict") == ""
    assert declared_parameters("f", "f(a: T [n, m], *b: U, c: dict [x, y]) -> R; g(z)") == "a, *b, c"
    for bad in ("g(a)", "f(a: T", "f(a b)"):
        with pytest.raises(ValueError):
            declared_parameters("f", bad)


def test_bench_envs_prints_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert commands_info.envs(json_out=True) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    for v in tiny_variants():
        assert rows[v.id]["entry_point"] == v.entry_point and rows[v.id]["signature"] == v.signature


def test_every_family_has_a_minimal_program() -> None:
    families = {v.family for v in tiny_variants()}
    assert families == set(PYTHON_BODIES) | set(CPP_PROGRAMS) | set(CLASS_PROGRAMS)


@pytest.fixture(scope="module", params=["cold", "warm"])
def backend(request: pytest.FixtureRequest) -> LocalBackend:
    """``cold`` is what ``bench eval`` uses by default; ``warm`` is what agent runs use."""
    b = request.getfixturevalue(f"local_{request.param}_backend")
    assert isinstance(b, LocalBackend)
    return b


@pytest.mark.parametrize("variant", tiny_variants(), ids=lambda v: v.id)
def test_program_with_only_the_declared_entry_point_is_scored(
    backend: LocalBackend, variant: Variant
) -> None:
    if backend.mode == "warm" and (variant.language is Language.CPP or variant.family in FRESH_PROCESS_ONLY):
        pytest.skip("this family runs candidates only as fresh processes; the cold run covers it")
    source = minimal_program(variant)
    result = backend.evaluate(variant, source)
    assert result.status is Status.OK, (result.status, result.reason, source)
    assert result.score is not None and math.isfinite(result.score)
    assert variant.combined in result.metrics


# Families whose scorer reports per-unit results (``EvalResult.cases``): test cases, window steps,
# benchmark shapes, splits, assays. The others report only aggregate metrics.
CASE_FAMILIES = {"ahc039", "ahc058", "eplb", "kernelbench", "llm_sr", "mla_decode", "multi_evolve", "trimul"}
NO_CASE_FAMILIES = {"kuairec", "selftest", "selftest_bandit"}
# Families whose combined score is a kernel time or speedup (machine- and load-dependent).
TIMED_FAMILIES = {"kernelbench", "mla_decode", "trimul"}


def test_every_family_says_whether_it_has_cases() -> None:
    assert CASE_FAMILIES | NO_CASE_FAMILIES == set(default_registry().families())
    assert not CASE_FAMILIES & NO_CASE_FAMILIES
    assert TIMED_FAMILIES <= CASE_FAMILIES


@pytest.mark.parametrize("variant", all_tiny_variants(), ids=lambda v: v.id)
def test_tiny_variant_needs_no_data_or_has_it(variant: Variant) -> None:
    if variant.data:  # a tiny variant that needs data must find all of it in the cache
        require_data(variant)


@pytest.mark.parametrize("variant", all_tiny_variants(), ids=lambda v: v.id)
def test_honest_baseline_is_ok_finite_and_inside_its_progress_bounds(
    local_cold_backend: LocalBackend, variant: Variant
) -> None:
    result = local_cold_backend.evaluate(variant, variant.initial_program)
    assert result.status is Status.OK, (result.status, result.reason[:1000])
    assert result.env_id == variant.id and result.env_hash == variant.hash
    score = result.score
    assert score is not None and math.isfinite(score) and result.metrics[variant.combined] == score
    assert all(math.isfinite(float(x)) for x in result.metrics.values() if isinstance(x, int | float))
    if variant.family in TIMED_FAMILIES:  # a time or a speedup
        assert score > 0, score
    # The unchanged program is clearly inside (0, 1) on the draw it is scored on (a held-out key's
    # bounds are its own; a timing's bounds leave room for the noise of this loaded machine), so
    # neither the floor nor the target is decided by noise.
    if variant.family == "selftest":  # the sandbox probe, not a benchmark: it scores 1 when it ran
        return
    u = bounds_for(variant, lambda: score).u(score)
    assert 0.05 < u < 0.95, (variant.id, score, u, variant.progress)
    assert bool(result.cases) == (variant.family in CASE_FAMILIES), result.cases[:3]
    for case in result.cases:
        assert case.name and case.status, case
        assert case.score is None or math.isfinite(case.score), case


@pytest.mark.parametrize("variant", all_tiny_variants(), ids=lambda v: v.id)
def test_the_hostile_corpus_runs_against_the_family(variant: Variant) -> None:
    reg = default_registry()
    attacked = {h.variant_id for h in HOSTILE_CORPUS if reg.get(h.variant_id).family == variant.family}
    assert attacked, f"no hostile candidate in tests/environments/hacks applies to {variant.family}"
    assert all(reg.get(vid).tiny for vid in attacked), attacked  # the corpus runs offline, on CPU
