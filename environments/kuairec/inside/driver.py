"""Runs INSIDE the sandbox: gradients for the trusted trainer, or the final inference, of one candidate.

``python -I -B <dir>/sandbox_driver.py train OUT`` and ``... test OUT`` read stdin as length-prefixed
frames (8-byte little-endian length, then the bytes): first the protocol parameters (JSON), and
only *after* the candidate's module is built, the data (``.npz``; in ``test``: the validation
histories, then the test histories). So no data exist in this process while the candidate's module
code and ``build_recommender`` run, and no data file is ever on disk where the candidate could read
it. ``OUT`` is a directory the trusted side created fresh just before this process started.

``train`` holds no optimiser and takes no step (issue 30): the trusted trainer (``trainer.py``, in
the scorer's process) owns the parameters, the buffers and AdamW. Over the Unix socket ``OUT/s``
this driver reports the module's tensors and declared ``HYPERPARAMETERS`` once, then, per request,
writes the trusted values into the module's own tensors and returns the sampled-softmax loss's
gradients for a batch the trainer chose (``step``) or the validation representations and item
embeddings (``represent``). Whatever this process does to its copy is overwritten at the next
request. ``test``: in a fresh process, the module is built, the trusted checkpoint (written by the
scorer) is assigned tensor by tensor into its parameters and buffers (not through
``load_state_dict``, which the candidate could override), every submodule is put in eval mode, and
under ``torch.no_grad()`` the test histories and then the validation histories are represented;
the scorer re-derives the validation metric from the latter and requires it to match the training
phase's, and this driver checks that the weights still equal the checkpoint afterwards.

What this process checks (rule ``protocol``; the candidate's code runs here too, so these are
detections a candidate that rewrites this driver could evade, not the guarantee): the data stream
was not read before it was handed over; torch's loss and autograd entry points are the ones present
before the candidate was imported; after each request the module still holds the very tensors it
started with, with the values sent (except the running statistics of torch's batch norms).

Exit codes: 0 success, 3 a task rule is broken (message on stderr), 4 the scorer asked for CUDA
and this sandbox has none (never a silent CPU run), anything else an error.
"""

import importlib.util
import io
import json
import os
import struct
import sys

import numpy as np

RULE_EXIT = 3
NO_CUDA_EXIT = 4
MAX_PARAMS_FRAME = 1 << 20


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


class _Stdin:
    """Length-prefixed frames on fd 0, read with references taken before any candidate code ran."""

    def __init__(self):
        self.readv, self.fstat = os.readv, os.fstat
        st = self.fstat(0)
        self.identity = (st.st_dev, st.st_ino)

    def _exact(self, n):
        buf = bytearray(n)  # filled in place: no second copy of a large frame
        view, pos = memoryview(buf), 0
        while pos < n:
            got = self.readv(0, [view[pos : pos + (1 << 24)]])
            if not got:
                break
            pos += got
        return buf if pos == n else buf[:pos]

    def frame(self, what, cap):
        st = self.fstat(0)
        if (st.st_dev, st.st_ino) != self.identity:
            _rule(f"'protocol': the input stream was replaced before the driver read the {what}")
        head = self._exact(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 <= n <= cap:
            _rule(f"'protocol': the {what} frame is missing or damaged: the candidate read the input stream")
        data = self._exact(n)
        if len(data) != n:
            _rule(f"'protocol': the {what} frame is truncated: the candidate read the input stream")
        return data


def _arrays(blob, prefix=""):
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return (z[prefix + "items"], z[prefix + "times"], z[prefix + "offsets"], int(z[prefix + "num_items"]))


def _candidate(here):
    spec = importlib.util.spec_from_file_location("candidate", os.path.join(here, "candidate.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "build_recommender", None)):
        raise AttributeError("the candidate has no function 'build_recommender'")
    return module


def _named(model, torch, kind):
    """``{name: tensor}`` of every registered parameter (kind ``_parameters``) or buffer.

    Found through the modules' own dictionaries, so no method the candidate defines is called.
    """
    out, seen, stack = {}, set(), [("", model)]
    get = object.__getattribute__
    while stack:
        prefix, m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        for name, t in get(m, kind).items():
            if t is not None and torch.is_tensor(t):
                out.setdefault(prefix + name, t)
        for name, child in get(m, "_modules").items():
            if child is not None:
                stack.append((prefix + name + ".", child))
    return out


def _modules(model):
    out, stack, get = [], [model], object.__getattribute__
    while stack:
        m = stack.pop()
        if any(m is o for o in out):
            continue
        out.append(m)
        stack.extend(c for c in get(m, "_modules").values() if c is not None)
    return out


def _set_mode(model, training):
    for m in _modules(model):
        object.__setattr__(m, "training", training)


def _guarded(torch):
    """Entry points of torch the protocol relies on; a candidate replacing one breaks the protocol."""
    F = torch.nn.functional
    return {
        "torch.optim.AdamW.step": torch.optim.AdamW.step,
        "torch.optim.AdamW.__init__": torch.optim.AdamW.__init__,
        "torch.optim.Optimizer.zero_grad": torch.optim.Optimizer.zero_grad,
        "torch.Tensor.backward": torch.Tensor.backward,
        "torch.autograd.backward": torch.autograd.backward,
        "torch.nn.functional.cross_entropy": F.cross_entropy,
        "torch.nn.functional.normalize": F.normalize,
        "torch.einsum": torch.einsum,
        "torch.no_grad": torch.no_grad,
        "torch.load": torch.load,
        "torch.save": torch.save,
        "torch.manual_seed": torch.manual_seed,
    }


def _check_guarded(torch, before, when):
    now = _guarded(torch)
    for name, ref in before.items():
        if now[name] is not ref:
            _rule(f"'protocol': the candidate replaced {name} ({when})")


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


def _build(here, p, torch, stdin, num_items, num_users):
    """Import the candidate and build its module; no data exist in this process yet."""
    # torch wraps Optimizer.step once, at the first optimiser's creation: let it do so now.
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])
    device = _device(p, torch)  # before any candidate code runs
    guarded = _guarded(torch)
    module = _candidate(here)
    torch.manual_seed(p["seed"])
    context = {"num_users": num_users, "epochs": p["epochs"], "device": device}
    model = module.build_recommender(num_items, p["embedding_dim"], p["max_seq_len"], context)
    _check_guarded(torch, guarded, "while the module was built")
    if not isinstance(model, torch.nn.Module):
        _rule(f"'output': build_recommender must return a torch.nn.Module, got {type(model).__name__}")
    return module, torch.nn.Module.to(model, device), device, guarded


_RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")


def _norm_types(torch):
    """The batch-norm classes of torch itself, taken before the candidate is imported."""
    nn = torch.nn
    return tuple(getattr(nn, n) for n in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"))


def _watched(model, torch, norms):
    """Every registered parameter and buffer, except the running statistics of torch's batch norms.

    Weights kept in buffers are saved in the checkpoint like parameters, so they too may change
    only in the optimiser's step (issue 20: a candidate trained its weights as buffers with a
    private optimiser inside forward). ``type(m) is`` (not ``in``): a metaclass cannot fake it.
    """
    out, seen, stack = {}, set(), [("", model)]
    get = object.__getattribute__
    while stack:
        prefix, m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        stats = any(type(m) is n for n in norms)
        for kind in ("_parameters", "_buffers"):
            for name, t in get(m, kind).items():
                running = kind == "_buffers" and stats and name in _RUNNING_STATS
                if t is None or not torch.is_tensor(t) or running:
                    continue
                out.setdefault(prefix + name, t)
        for name, child in get(m, "_modules").items():
            if child is not None:
                stack.append((prefix + name + ".", child))
    return out


# -- wire to the trusted trainer: length-prefixed JSON header, then each array's raw bytes ----------
# The format of harness/kernels/driver.py (this file imports nothing from the harness). The trusted
# side decodes what comes back under its own limits; these helpers only serve its messages here.
_LEN = struct.Struct(">Q")
_WIRE = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}
_FLOATS = ("float64", "float32", "float16", "bfloat16")


def _send(sock, header, arrays=()):
    specs = [{"dtype": d, "shape": list(a.shape)} for d, a in arrays]
    head = json.dumps({**header, "arrays": specs}).encode()
    sock.sendall(_LEN.pack(len(head)) + head)
    for _, a in arrays:
        if a.nbytes:
            sock.sendall(memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8)))


def _fill(sock, view):
    got = 0
    while got < len(view):
        k = sock.recv_into(view[got : got + (1 << 22)])
        if not k:
            raise EOFError("the trusted trainer closed the connection")
        got += k


def _recv(sock):
    head = bytearray(8)
    _fill(sock, memoryview(head))
    body = bytearray(_LEN.unpack(head)[0])
    _fill(sock, memoryview(body))
    header = json.loads(body)
    arrays = []
    for spec in header.get("arrays", []):
        d = spec["dtype"]
        a = np.empty(spec["shape"], dtype="int16" if d == "bfloat16" else d)
        if a.nbytes:
            _fill(sock, memoryview(a.reshape(-1).view(np.uint8)))
        arrays.append((d, a))
    return header, arrays


def _to_wire(t, torch):
    """A tensor as ``(wire dtype, host numpy array)``; bfloat16 travels as its 16-bit pattern."""
    d = str(t.dtype).replace("torch.", "")
    t = t.detach().to("cpu").contiguous()
    return d, (t.view(torch.int16) if d == "bfloat16" else t).numpy()


def _from_wire(d, a, torch, device):
    t = torch.from_numpy(a)
    return (t.view(torch.bfloat16) if d == "bfloat16" else t).to(device)


def _tensors(model, torch):
    """``[(name, kind, tensor)]``: every registered parameter, then every buffer, in a fixed order."""
    out = []
    for kind, attr in (("param", "_parameters"), ("buffer", "_buffers")):
        for name, t in sorted(_named(model, torch, attr).items()):
            d = str(t.dtype).replace("torch.", "")
            if d not in _WIRE or (kind == "param" and d not in _FLOATS):
                allowed = f"parameters: {_FLOATS}; buffers: {sorted(_WIRE)}"
                _rule(f"'output': {kind} {name} has dtype {d} ({allowed})")
            out.append((name, kind, t))
    return out


def _assign(tensors, arrays, torch, device):
    """Put the trusted values into the module's own tensors; return them by name (the reference)."""
    if len(arrays) != len(tensors):
        raise ValueError("the trusted trainer sent another number of tensors")
    sent = {}
    with torch.no_grad():
        for (name, _, t), (d, a) in zip(tensors, arrays, strict=True):
            v = _from_wire(d, a, torch, device)
            t.copy_(v)
            sent[name] = v
    return sent


def _same(model, torch, norms, tensors, sent, when):
    """Still the very tensors sent, with the values sent (torch's batch-norm statistics excepted).

    A detection only: whatever this process holds is overwritten by the trusted values before the
    next step, and the tested checkpoint is the trusted side's.
    """
    now = {**_named(model, torch, "_buffers"), **_named(model, torch, "_parameters")}
    if set(now) != {name for name, _, _ in tensors} or any(now[n] is not t for n, _, t in tensors):
        _rule(f"'protocol': the module's parameters or buffers were replaced or re-registered ({when})")
    watched = _watched(model, torch, norms)
    for name, _, t in tensors:
        if name in watched and not torch.equal(t.detach(), sent[name]):
            _rule(f"'protocol': {name} changed outside the scorer's optimiser step ({when})")


def _connect(out):
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.path.join(out, "s"))
    return sock


def _step(model, torch, norms, tensors, arrays, header, p, data, device):
    """One training step at the trusted values: the loss's gradients, never a step."""
    items, times, offsets, _ = data
    sent = _assign(tensors, arrays[: len(tensors)], torch, device)
    u, c, neg_ids = (a for _, a in arrays[len(tensors) :])
    params = [t for _, kind, t in tensors if kind == "param"]
    for t in params:
        t.grad = None
    _set_mode(model, True)
    torch.manual_seed(int(header["seed"]))  # dropout draws: a function of the trusted step seed
    x, t = _batch(items, times, offsets, u, c, p["max_seq_len"], torch, device)
    target = torch.from_numpy(items[offsets[u] + c]).to(device)
    negatives = torch.from_numpy(neg_ids).to(device)
    F = torch.nn.functional
    rep = F.normalize(_check_rep(model(x, t), len(u), torch), dim=-1)
    emb = F.normalize(model.item_embeddings(), dim=-1)
    pos = (rep * emb[target]).sum(-1, keepdim=True)
    neg = torch.einsum("bd,bnd->bn", rep, emb[negatives])
    logits = torch.cat([pos, neg], dim=1) / p["temperature"]
    first = torch.zeros(len(u), dtype=torch.long, device=device)  # the positive is column 0
    F.cross_entropy(logits, first).backward()
    _same(model, torch, norms, tensors, sent, f"step {header['step']}")
    grads, missing = [], []
    for i, t in enumerate(params):
        g = t.grad
        if g is None:
            missing.append(i)
            g = torch.zeros_like(t)
        grads.append(_to_wire(g, torch))
    return {"type": "grads", "missing": missing}, grads


def train(here, out, p, torch, stdin):
    """Gradients of the fixed loss at the values the trusted trainer sends; it owns the steps.

    ``out`` holds the trainer's socket ``s``. After the module is built and the data frame read,
    the driver reports every parameter and buffer (names, dtypes, shapes, initial values) and the
    declared ``HYPERPARAMETERS``, then serves ``step`` (values and a batch in, gradients out) and
    ``represent`` (values in, validation representations and item embeddings out) until ``stop``.
    """
    shape = p["data_shape"]
    norms = _norm_types(torch)
    module, model, device, guarded = _build(here, p, torch, stdin, shape["num_items"], shape["num_users"])
    declared = getattr(module, "HYPERPARAMETERS", {}) or {}
    try:
        declared = json.loads(json.dumps(declared))
    except (TypeError, ValueError):
        _rule("'hyperparameters': HYPERPARAMETERS must be a dict of numbers")
    data = _arrays(stdin.frame("training data", p["data_bytes"]))
    tensors = _tensors(model, torch)
    sock = _connect(out)
    specs = [{"name": n, "kind": k} for n, k, _ in tensors]
    _send(sock, {"type": "ready", "tensors": specs, "hyperparameters": declared},
          [_to_wire(t, torch) for _, _, t in tensors])  # fmt: skip
    while True:
        header, arrays = _recv(sock)
        op = header.get("op")
        if op == "step":
            reply, out_arrays = _step(model, torch, norms, tensors, arrays, header, p, data, device)
        elif op == "represent":
            sent = _assign(tensors, arrays, torch, device)
            _set_mode(model, False)
            reps, emb = _represent(model, *data[:3], p["max_seq_len"], p["batch_size"], torch, device)
            _same(model, torch, norms, tensors, sent, f"validation pass of epoch {header['epoch']}")
            _check_guarded(torch, guarded, f"by epoch {header['epoch']}")
            reply, out_arrays = {"type": "reps"}, [("float32", reps), ("float32", emb)]
        else:
            break
        _send(sock, reply, out_arrays)
    sock.close()


def test(here, out, p, torch, stdin):
    """Load the validated checkpoint with the trusted loader; represent test, then validation histories."""
    shape = p["data_shape"]
    _, model, device, guarded = _build(here, p, torch, stdin, shape["num_items"], shape["num_users"])
    # The validated checkpoint, copied by the scorer into this read-only directory after training.
    state = torch.load(os.path.join(here, "checkpoint.pt"), map_location=device, weights_only=True)
    mine = {**_named(model, torch, "_buffers"), **_named(model, torch, "_parameters")}
    if not isinstance(state, dict) or set(state) != set(mine):
        _rule("'protocol': the module's parameters and buffers differ from the validated checkpoint's")
    with torch.no_grad():
        for name, t in mine.items():
            src = state[name]
            if not torch.is_tensor(src) or src.shape != t.shape or src.dtype != t.dtype:
                _rule(f"'protocol': {name} does not match the validated checkpoint's tensor")
            t.copy_(src)
    _set_mode(model, False)
    val = _arrays(stdin.frame("validation histories", p["data_bytes"]))
    test_data = _arrays(stdin.frame("test histories", p["data_bytes"]))
    with torch.no_grad():
        reps, emb = _represent(model, *test_data[:3], p["max_seq_len"], p["batch_size"], torch, device)
        val_reps, val_emb = _represent(model, *val[:3], p["max_seq_len"], p["batch_size"], torch, device)
    _check_guarded(torch, guarded, "during inference")
    for name, t in mine.items():
        if not torch.equal(t.detach(), state[name]):
            _rule(f"'protocol': {name} changed during inference (the tested model must be the validated one)")
    _save(os.path.join(out, "test_reps.npy"), reps)
    _save(os.path.join(out, "test_items.npy"), emb)
    _save(os.path.join(out, "val_reps.npy"), val_reps)
    _save(os.path.join(out, "val_items.npy"), val_emb)


def main():
    """``train OUT`` or ``test OUT`` (see the module docstring)."""
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    stdin = _Stdin()
    p = json.loads(stdin.frame("parameters", MAX_PARAMS_FRAME))
    import torch

    torch.set_num_threads(max(1, int(p.get("threads", 1))))
    out = sys.argv[2]
    if sys.argv[1] == "train":
        train(here, out, p, torch, stdin)
    else:
        test(here, out, p, torch, stdin)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
