"""Runs INSIDE the sandbox: the fixed training protocol, or the final inference, of one candidate.

``python -I -B <dir>/sandbox_driver.py train`` trains the candidate's module on the training
histories (``inputs.npz``: ``s[:-2]`` of every user, never a validation or test target) with the
manifest's sampled-softmax protocol, and after every epoch writes the validation-input user
representations, the item embeddings and a checkpoint into ``<dir>``. The trusted scorer picks
the epoch by validation metrics it computes itself, then runs
``python -I -B <dir>/sandbox_driver.py test EPOCH`` in a fresh process, which loads that
checkpoint and writes representations of the test histories (``test_inputs.npz``: ``s[:-1]``).

Nothing here is secret. The candidate can read and patch this code; that gains it nothing beyond
spending its own time budget differently: this process never holds a target the scorer checks.

Exit codes: 0 success, 3 a task rule is broken (message on stderr), 4 the scorer asked for CUDA
and this sandbox has none (never a silent CPU run), anything else an error.
"""

import importlib.util
import json
import os
import sys
import time

import numpy as np

RULE_EXIT = 3
NO_CUDA_EXIT = 4


def _rule(msg):
    sys.stderr.write(f"rule {msg}\n")
    sys.stderr.flush()
    os._exit(RULE_EXIT)


def _device(p, torch):
    """The scorer's device; exit NO_CUDA_EXIT if it is CUDA and this sandbox cannot use CUDA."""
    if p["device"] != "cuda":
        return "cpu"
    if not torch.cuda.is_available():
        sys.stderr.write("no CUDA GPU is usable in the sandbox although the scorer runs on one\n")
        sys.stderr.flush()
        os._exit(NO_CUDA_EXIT)
    return "cuda"


def _load(here, name):
    with np.load(os.path.join(here, name), allow_pickle=False) as z:
        return z["items"], z["times"], z["offsets"], int(z["num_items"])


def _candidate(here):
    spec = importlib.util.spec_from_file_location("candidate", os.path.join(here, "candidate.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "build_recommender", None)):
        raise AttributeError("the candidate has no function 'build_recommender'")
    return module


def _hyperparameters(module, p):
    """The candidate's declared HYPERPARAMETERS, checked against the manifest's bounds."""
    declared = getattr(module, "HYPERPARAMETERS", {}) or {}
    if not isinstance(declared, dict):
        _rule("'hyperparameters': HYPERPARAMETERS must be a dict")
    hp = {"lr": p["lr"], "weight_decay": p["weight_decay"]}
    for k, v in declared.items():
        bounds = p["allowed_hyperparameters"].get(k)
        if bounds is None:
            allowed = sorted(p["allowed_hyperparameters"])
            _rule(f"'hyperparameters': {k!r} is not adjustable (allowed: {allowed})")
        if not isinstance(v, (int, float)) or not (bounds[0] <= float(v) <= bounds[1]):
            _rule(f"'hyperparameters': {k}={v!r} outside [{bounds[0]}, {bounds[1]}]")
        hp[k] = float(v)
    return hp


def _batch(items, times, offsets, users, ends, max_len, torch, device):
    """Left-padded histories ``s[max(0, end - max_len):end]`` of ``users``."""
    lengths = np.minimum(ends, max_len)
    width = int(lengths.max())
    x = np.zeros((len(users), width), dtype=np.int64)
    t = np.zeros((len(users), width), dtype=np.int64)
    for r, (u, e, n) in enumerate(zip(users, ends, lengths, strict=True)):
        a = offsets[u] + e - n
        x[r, width - n :] = items[a : a + n]
        t[r, width - n :] = times[a : a + n]
    return torch.from_numpy(x).to(device), torch.from_numpy(t).to(device)


def _check_rep(rep, rows, torch):
    if not torch.is_tensor(rep) or rep.dim() != 2 or rep.shape[0] != rows or not rep.is_floating_point():
        got = getattr(rep, "shape", type(rep))
        _rule(f"'output': forward must return a float [batch, d] tensor, got {got}")
    return rep


def _represent(model, items, times, offsets, max_len, batch_size, torch, device):
    """User representations of every user's whole history (float32 numpy)."""
    users = np.arange(offsets.shape[0] - 1)
    ends = np.diff(offsets)
    out = []
    with torch.no_grad():
        for a in range(0, len(users), batch_size):
            u = users[a : a + batch_size]
            x, t = _batch(items, times, offsets, u, ends[u], max_len, torch, device)
            rep = _check_rep(model(x, t), len(u), torch)
            out.append(rep.detach().float().cpu().numpy())
        emb = model.item_embeddings()
    if not torch.is_tensor(emb) or emb.dim() != 2 or emb.shape[1] != out[0].shape[1]:
        _rule("'output': item_embeddings() must return a [num_items + 1, d] tensor matching forward's d")
    return np.concatenate(out), emb.detach().float().cpu().numpy()


def _save(path, arr):
    np.save(path, np.ascontiguousarray(arr, dtype=np.float32), allow_pickle=False)


def train(here, p, torch):
    """The fixed protocol: epochs of sampled softmax; per epoch, validation outputs and a checkpoint."""
    device = _device(p, torch)  # before any candidate code runs
    items, times, offsets, num_items = _load(here, "inputs.npz")
    module = _candidate(here)
    hp = _hyperparameters(module, p)
    torch.manual_seed(p["seed"])
    rng = np.random.default_rng(p["seed"])
    context = {"num_users": int(offsets.shape[0] - 1), "epochs": p["epochs"], "device": device}
    model = module.build_recommender(num_items, p["embedding_dim"], p["max_seq_len"], context)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    lengths = np.diff(offsets)
    trainable = np.flatnonzero(lengths >= 2)
    t0 = time.perf_counter()
    for epoch in range(1, p["epochs"] + 1):
        model.train()
        users = np.repeat(trainable, p["samples_per_user"])
        # A cut c in [1, L-1]: history s[:c] predicts s[c].
        cuts = (rng.random(users.shape[0]) * (lengths[users] - 1)).astype(np.int64) + 1
        order = rng.permutation(users.shape[0])
        users, cuts = users[order], cuts[order]
        for a in range(0, users.shape[0], p["batch_size"]):
            u, c = users[a : a + p["batch_size"]], cuts[a : a + p["batch_size"]]
            x, t = _batch(items, times, offsets, u, c, p["max_seq_len"], torch, device)
            target = torch.from_numpy(items[offsets[u] + c]).to(device)
            neg_ids = rng.integers(1, num_items + 1, size=(len(u), p["negatives"]))
            negatives = torch.from_numpy(neg_ids).to(device)
            rep = torch.nn.functional.normalize(_check_rep(model(x, t), len(u), torch), dim=-1)
            emb = torch.nn.functional.normalize(model.item_embeddings(), dim=-1)
            pos = (rep * emb[target]).sum(-1, keepdim=True)
            neg = torch.einsum("bd,bnd->bn", rep, emb[negatives])
            logits = torch.cat([pos, neg], dim=1) / p["temperature"]
            first = torch.zeros(len(u), dtype=torch.long, device=device)  # the positive is column 0
            loss = torch.nn.functional.cross_entropy(logits, first)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        reps, emb = _represent(model, items, times, offsets, p["max_seq_len"], p["batch_size"], torch, device)
        _save(os.path.join(here, f"val_reps_{epoch}.npy"), reps)
        _save(os.path.join(here, f"items_{epoch}.npy"), emb)
        torch.save(model.state_dict(), os.path.join(here, f"ckpt_{epoch}.pt"))
    with open(os.path.join(here, "train_done.json"), "w") as f:
        json.dump({"epochs": p["epochs"], "seconds": time.perf_counter() - t0}, f)


def test(here, p, epoch, torch):
    """Load the chosen epoch's checkpoint in this fresh process and represent the test histories."""
    device = _device(p, torch)
    items, times, offsets, num_items = _load(here, "test_inputs.npz")
    module = _candidate(here)
    torch.manual_seed(p["seed"])
    context = {"num_users": int(offsets.shape[0] - 1), "epochs": p["epochs"], "device": device}
    model = module.build_recommender(num_items, p["embedding_dim"], p["max_seq_len"], context).to(device)
    state = torch.load(os.path.join(here, f"ckpt_{epoch}.pt"), map_location=device, weights_only=True)
    model.load_state_dict(state)
    model.eval()
    reps, emb = _represent(model, items, times, offsets, p["max_seq_len"], p["batch_size"], torch, device)
    _save(os.path.join(here, "test_reps.npy"), reps)
    _save(os.path.join(here, "test_items.npy"), emb)


def main():
    """``train`` or ``test EPOCH`` (see the module docstring)."""
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "params.json")) as f:
        p = json.load(f)
    import torch

    torch.set_num_threads(max(1, int(p.get("threads", 1))))
    if sys.argv[1] == "train":
        train(here, p, torch)
    else:
        test(here, p, int(sys.argv[2]), torch)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
