"""Trusted scorer of the EPLB family: placement balancedness on the next window plus a speed credit.

Protocol, score formula and constants: ``environments/eplb/README.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from harness.envs.secret import heldout_seed
from harness.envs.subset import subset_of, unit_indices
from harness.evaluation.errors import CandidateInvalid
from harness.evaluation.result import CaseRecord
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer, require_finite

from .data import load_windows, synthetic_windows
from .simulate import simulate

_INT_DTYPES = tuple(
    getattr(torch, name)
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    if hasattr(torch, name)
)
_NAMES = ("phy2log", "log2phy", "logcnt")


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    """Turn one returned item into a CPU int64 tensor or raise ``CandidateInvalid``."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise CandidateInvalid(f"rule 'types': {name} is an object array, expected an integer array")
        try:
            value = torch.from_numpy(np.ascontiguousarray(value))
        except TypeError as e:
            raise CandidateInvalid(f"rule 'dtype': {name} has unsupported dtype {value.dtype}") from e
    if not isinstance(value, torch.Tensor):
        raise CandidateInvalid(
            f"rule 'types': {name} is a {type(value).__name__}, expected a torch.Tensor or numpy array"
        )
    value = value.detach().cpu()
    if value.is_floating_point() or value.is_complex():
        if not bool(torch.isfinite(value).all()):
            raise CandidateInvalid(f"rule 'finite': {name} contains NaN or infinite values")
        raise CandidateInvalid(f"rule 'dtype': {name} has dtype {value.dtype}, expected an integer dtype")
    if value.dtype not in _INT_DTYPES:
        raise CandidateInvalid(f"rule 'dtype': {name} has dtype {value.dtype}, expected an integer dtype")
    return value.to(torch.int64).contiguous()


def validate_placement(
    value: Any, layers: int, experts: int, num_replicas: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check a returned placement against every task rule.

    Rules (each failure message starts with ``rule '<name>'``): ``tuple`` (3 items),
    ``types``/``dtype``/``finite`` (integer tensors or arrays), ``shape`` (phy2log [L, R],
    log2phy [L, E, M] with max(logcnt) <= M <= R, logcnt [L, E]), ``logcnt-nonnegative``,
    ``replica-count`` (every layer uses exactly R replicas: no over- or under-claiming),
    ``dropped-expert`` (every expert keeps at least one replica), ``phy2log-range`` (ids in [0, E)),
    ``log2phy-range`` (used entries in [0, R)), ``log2phy-padding`` (unused entries are -1),
    ``log2phy-consistency`` (every slot is listed exactly once, by the expert phy2log puts there).

    Args:
        value: What ``rebalance_experts`` returned.
        layers: L.
        experts: E.
        num_replicas: R.

    Returns:
        (phy2log, log2phy, logcnt) as int64 CPU tensors.

    Raises:
        CandidateInvalid: On the first broken rule.
    """
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        kind = type(value).__name__
        if isinstance(value, (tuple, list)):
            kind = f"{len(value)}-item {kind}"
        raise CandidateInvalid(f"rule 'tuple': expected (phy2log, log2phy, logcnt), got a {kind}")
    phy2log, log2phy, logcnt = (_as_tensor(n, v) for n, v in zip(_NAMES, value, strict=True))

    if tuple(phy2log.shape) != (layers, num_replicas):
        raise CandidateInvalid(
            f"rule 'shape': phy2log has shape {tuple(phy2log.shape)}, expected {(layers, num_replicas)}"
        )
    if tuple(logcnt.shape) != (layers, experts):
        raise CandidateInvalid(
            f"rule 'shape': logcnt has shape {tuple(logcnt.shape)}, expected {(layers, experts)}"
        )
    if log2phy.dim() != 3 or tuple(log2phy.shape[:2]) != (layers, experts):
        raise CandidateInvalid(
            f"rule 'shape': log2phy has shape {tuple(log2phy.shape)}, "
            f"expected {(layers, experts)} + (max_replicas,)"
        )
    if bool((logcnt < 0).any()):
        raise CandidateInvalid("rule 'logcnt-nonnegative': logcnt has negative entries")
    if bool((logcnt > num_replicas).any()):  # also keeps the per-layer sums below from overflowing
        raise CandidateInvalid(f"rule 'replica-count': an expert claims more than {num_replicas} replicas")
    per_layer = logcnt.sum(dim=1)
    bad = (per_layer != num_replicas).nonzero().flatten()
    if bad.numel():
        layer = int(bad[0])
        raise CandidateInvalid(
            f"rule 'replica-count': layer {layer} claims {int(per_layer[layer])} replicas, "
            f"exactly {num_replicas} physical slots exist"
        )
    dropped = (logcnt == 0).nonzero()
    if dropped.numel():
        layer, expert = (int(x) for x in dropped[0])
        raise CandidateInvalid(
            f"rule 'dropped-expert': expert {expert} of layer {layer} has no replica "
            f"({dropped.shape[0]} dropped in total); every expert needs logcnt >= 1"
        )
    width = log2phy.shape[2]
    most = int(logcnt.max())
    if width < most or width > num_replicas:
        raise CandidateInvalid(
            f"rule 'shape': log2phy has {width} replica columns; need max(logcnt) = {most} <= "
            f"columns <= {num_replicas}"
        )
    if bool(((phy2log < 0) | (phy2log >= experts)).any()):
        raise CandidateInvalid(f"rule 'phy2log-range': phy2log has ids outside [0, {experts})")

    used = torch.arange(width).view(1, 1, width) < logcnt.unsqueeze(-1)
    if bool((log2phy[~used] != -1).any()):
        raise CandidateInvalid("rule 'log2phy-padding': log2phy entries beyond logcnt must be -1")
    slots = log2phy[used]
    if bool(((slots < 0) | (slots >= num_replicas)).any()):
        raise CandidateInvalid(
            f"rule 'log2phy-range': log2phy lists slot ids outside [0, {num_replicas}) within logcnt"
        )
    layer_of, expert_of, _ = used.nonzero(as_tuple=True)
    listed = torch.zeros(layers * num_replicas, dtype=torch.int64)
    listed.index_add_(0, layer_of * num_replicas + slots, torch.ones_like(slots))
    if bool((listed != 1).any()):
        flat = int((listed != 1).nonzero()[0])
        raise CandidateInvalid(
            f"rule 'log2phy-consistency': slot {flat % num_replicas} of layer {flat // num_replicas} "
            f"is listed {int(listed[flat])} times in log2phy; each slot must be listed exactly once"
        )
    if bool((phy2log[layer_of, slots] != expert_of).any()):
        raise CandidateInvalid(
            "rule 'log2phy-consistency': log2phy lists a slot under an expert other than phy2log[slot]"
        )
    return phy2log, log2phy, logcnt


class EplbScorer(Scorer):
    """Predict-the-next-window expert placement, scored by balancedness and speed.

    Parameters (``variant.scorer_params``): ``num_replicas``, ``num_groups``, ``num_nodes``,
    ``num_gpus``; ``synthetic`` (bool) with the keys of :func:`data.synthetic_windows`, or
    ``window`` / ``data_file`` for the real trace; ``speed_coef`` [0.02]; ``time_floor_s`` [0.02];
    ``speed_credit`` [``measured``; ``saturated`` gives every plan the floor's credit, so the score
    depends on the plan only: the deterministic instrument ``eplb-tiny`` uses];
    ``subset`` (a validation subset of the steps i -> i+1; adds the metric ``subset_size``).
    """

    windows: list[torch.Tensor]

    def prepare(self) -> None:
        """Build the workload windows (synthetic, or the fetched trace) and check the config.

        Raises:
            DataMissingError: The real trace is needed and has not been fetched.
            ValueError: The parameters or the data are inconsistent.
        """
        p = self.params
        self.num_replicas = int(p["num_replicas"])
        self.num_groups = int(p["num_groups"])
        self.num_nodes = int(p["num_nodes"])
        self.num_gpus = int(p["num_gpus"])
        self.speed_coef = float(p.get("speed_coef", 0.02))
        self.time_floor_s = float(p.get("time_floor_s", 0.02))
        self.speed_credit = str(p.get("speed_credit", "measured"))
        if self.speed_credit not in ("measured", "saturated"):
            raise ValueError(f"{self.variant.id}: speed_credit must be 'measured' or 'saturated'")
        self.key_id: float | None = None
        if p.get("synthetic", False):
            # heldout = "secret": the windows come from the installation's key, so no candidate
            # can regenerate the next (scored) window from public code and the manifest's seed.
            seed, self.key_id = heldout_seed(p, "eplb", int(p.get("seed", 0)))
            windows = synthetic_windows({**p, "seed": seed})
        else:
            windows = load_windows(self.data_dir, p)
        if len(windows) < 2:
            raise ValueError(f"{self.variant.id}: need at least 2 windows, got {len(windows)}")
        layers, experts = windows[0].shape
        if any(tuple(w.shape) != (layers, experts) for w in windows):
            raise ValueError(f"{self.variant.id}: windows have inconsistent shapes")
        if experts % self.num_groups or self.num_gpus % self.num_nodes or self.num_replicas % self.num_gpus:
            raise ValueError(
                f"{self.variant.id}: need E % groups == 0, G % nodes == 0 and R % G == 0 "
                f"(E={experts}, g={self.num_groups}, n={self.num_nodes}, G={self.num_gpus}, "
                f"R={self.num_replicas})"
            )
        if self.num_replicas < experts:
            raise ValueError(f"{self.variant.id}: R={self.num_replicas} < E={experts}")
        self.layers, self.experts = int(layers), int(experts)
        self.windows = [w.to(torch.int64) for w in windows]

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Run the candidate on every window but the last and simulate on the following window.

        With a subset request only the drawn steps i -> i+1 are run (a step keeps its own pair).
        """
        steps = unit_indices(len(self.windows) - 1, self.params)
        b_exp, b_gpu, seconds = [], [], []
        cases: list[CaseRecord] = []
        args0 = (
            self.windows[0].to(torch.float32),
            self.num_replicas,
            self.num_groups,
            self.num_nodes,
            self.num_gpus,
        )
        transport = candidate.transport_seconds(*args0)
        for i in steps:
            weight = self.windows[i].to(torch.float32)  # a fresh copy per call
            result = candidate.call(
                "rebalance_experts", weight, self.num_replicas, self.num_groups, self.num_nodes, self.num_gpus
            )
            seconds.append(max(0.0, float(result.seconds) - transport))
            _, log2phy, logcnt = validate_placement(
                result.value, self.layers, self.experts, self.num_replicas
            )
            balance = simulate(log2phy, logcnt, self.windows[i + 1], self.num_replicas, self.num_gpus)
            b_exp.append(balance.expert)
            b_gpu.append(balance.gpu)
            cases.append(
                CaseRecord(
                    name=f"window{i}->{i + 1}",
                    status="ok",
                    score=balance.expert,
                    wall_seconds=seconds[-1],
                    reason="expert balancedness on the next window; wall-clock s of the call less transport",
                )
            )
        mean_seconds = sum(seconds) / len(seconds)
        expert_balance = require_finite("balancedness_expert", sum(b_exp) / len(b_exp))
        gpu_balance = require_finite("balancedness_gpu", sum(b_gpu) / len(b_gpu))
        # ``saturated`` (eplb-tiny): the credit an at-floor call gets, whatever the clock said, so
        # the score is a function of the plan alone (a loaded machine moved it from 0.70 to 0.24).
        timed = max(mean_seconds, self.time_floor_s)
        if self.speed_credit == "saturated":
            timed = self.time_floor_s
        speed = self.speed_coef / timed
        combined = require_finite("combined", (expert_balance + speed) / 2.0)
        metrics = {
            "combined": combined,
            "balancedness_expert": expert_balance,
            "balancedness_gpu": gpu_balance,
            "rebalance_seconds": mean_seconds,
            "transport_seconds": transport,
        }
        if subset_of(self.params) is not None:
            metrics["subset_size"] = float(len(steps))
        if self.key_id is not None:
            metrics["heldout_key"] = self.key_id
        return ScoreOutcome(
            score=combined,
            metrics=metrics,
            candidate_seconds=sum(seconds) + transport * len(seconds),
            cases=cases,
        )
