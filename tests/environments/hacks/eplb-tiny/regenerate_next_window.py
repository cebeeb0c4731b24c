# hack: regenerates the synthetic workload from public code (data.synthetic_windows) and the
# manifest's seed, recognises the window it is shown and places replicas for the NEXT window, the
# one it is scored on (the honest placement of a window it should never see)
# expect: no-gain
# base: initial-program
import numpy as np
import torch

_honest_rebalance = rebalance_experts  # noqa: F821 (defined by the initial program above)


def _regenerate(seed, layers=4, experts=32, count=6, tokens=20000):
    zipf, sigma, drift, idle = 0.6, 0.3, 0.25, 0.03
    rng = np.random.default_rng(seed)
    ranks = np.stack([rng.permutation(experts) + 1 for _ in range(layers)])
    log_pop = -zipf * np.log(ranks) + sigma * rng.standard_normal((layers, experts))
    out = []
    for _ in range(count):
        log_pop = log_pop + drift * rng.standard_normal((layers, experts))
        prob = np.exp(log_pop - log_pop.max(axis=1, keepdims=True))
        active = rng.random((layers, experts)) >= idle
        active[~active.any(axis=1)] = True
        prob = prob * active
        prob = prob / prob.sum(axis=1, keepdims=True)
        out.append(np.stack([rng.multinomial(tokens, prob[layer]) for layer in range(layers)]))
    return out


_WINDOWS = _regenerate(20250324)


def rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):
    seen = weight.detach().cpu().numpy().astype(np.int64)
    for i, w in enumerate(_WINDOWS[:-1]):
        if w.shape == seen.shape and np.array_equal(w, seen):
            weight = torch.from_numpy(_WINDOWS[i + 1].astype(np.float32))
            break
    return _honest_rebalance(weight, num_replicas, num_groups, num_nodes, num_gpus)
