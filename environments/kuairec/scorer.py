"""Trusted scorer of the KuaiRec family: fixed training protocol, epoch picked on validation, test.

The trusted optimiser is :mod:`.trainer`; the protocol, its limits and what it can and cannot
enforce are in ``environments/kuairec/README.md``.
"""

from __future__ import annotations

import io
import json
import math
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.envs.data import expected_sha256
from harness.envs.secret import heldout_seed
from harness.evaluation.errors import CandidateInvalid, CandidateTimeout
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer
from harness.scoring.device import choose_device
from harness.scoring.exchange import ExchangeDir

from .data import Sequences, Split, load_kuairec, split, synthetic_sequences
from .metrics import ranking_metrics, ranks
from .trainer import NO_CUDA_EXIT, RULE_EXIT, Limits, TrustedTrainer, checkpoint_file, verdict

DRIVER_FILE = Path(__file__).resolve().parent / "inside" / "driver.py"
__all__ = ["NO_CUDA_EXIT", "RULE_EXIT", "KuaiRecScorer"]
PROTOCOL_KEYS = (
    "embedding_dim",
    "max_seq_len",
    "epochs",
    "samples_per_user",
    "negatives",
    "temperature",
    "batch_size",
    "lr",
    "weight_decay",
    "seed",
    "threads",
    "allowed_hyperparameters",
)


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest elementwise difference relative to the arrays' scale (inf if shapes differ)."""
    if a.shape != b.shape:
        return math.inf
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-12)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


def _frame(data: bytes) -> bytes:
    """One stdin frame of the driver: 8-byte little-endian length, then the bytes."""
    return struct.pack("<Q", len(data)) + data


def _npz(seqs: Sequences) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, items=seqs.items, times=seqs.times, offsets=seqs.offsets, num_items=seqs.num_items)
    return buf.getvalue()


class KuaiRecScorer(Scorer):
    """Train under the fixed protocol in the sandbox, select on validation, score on test."""

    def prepare(self) -> None:
        """Check the variant's GPU, then load (full) or generate (tiny) and split the sequences.

        Raises:
            InfraError: If the variant needs a GPU this machine does not have (no override).
            DataMissingError: If the archive has not been fetched.
            ChecksumError: If it does not match its recorded checksum.
        """
        self.device = choose_device(self.variant.hardware.gpu, gpu_count=self.variant.hardware.gpu_count)
        p = self.params
        self.key_id: float | None = None
        if p.get("synthetic"):
            # heldout = "secret": the whole draw (train and targets) comes from the installation's
            # key, so no candidate can regenerate the targets from public code and data_seed.
            self.data_seed, self.key_id = heldout_seed(p, "kuairec", int(p["data_seed"]))
            seqs = synthetic_sequences(
                users=int(p["users"]),
                items=int(p["items"]),
                factors=int(p["factors"]),
                min_len=int(p["min_len"]),
                max_len=int(p["max_len"]),
                drift=float(p["drift"]),
                temperature=float(p["data_temperature"]),
                seed=self.data_seed,
            )
        else:
            (_, source), *_ = self.variant.data
            seqs = load_kuairec(self.data_dir, source.filename, expected_sha256(self.variant.family, source))
        self.split: Split = split(seqs)
        self.train_npz = _npz(self.split.train)
        self.test_npz = _npz(self.split.test_history)
        shape = {"num_items": self.split.train.num_items, "num_users": self.split.train.num_users}
        self.checkpoint_bytes = int(p.get("max_checkpoint_mb", 256)) << 20
        self.protocol = {
            **{k: p[k] for k in PROTOCOL_KEYS},
            "device": self.device.device,
            "data_shape": shape,
            "data_bytes": max(len(self.train_npz), len(self.test_npz)),
        }
        self.val_match_tol = float(p.get("val_match_tol", 1e-4))
        self.rep_match_rtol = float(p.get("rep_match_rtol", 1e-3))
        self.test_timeout_s = float(p.get("test_timeout_s", 600.0))
        self.driver_source = DRIVER_FILE.read_bytes()
        d = int(p["embedding_dim"])
        users, items = self.split.train.num_users, self.split.train.num_items + 1
        # A representation may be wider than embedding_dim, up to 4x: this also bounds what a
        # hostile reply can make the trusted side allocate to a small multiple of an honest one.
        self.max_rep_bytes = 4 * users * 4 * d
        self.max_item_bytes = 4 * items * 4 * d
        self.limits = Limits(
            users=users,
            items=items,
            max_rep_bytes=self.max_rep_bytes,
            max_item_bytes=self.max_item_bytes,
            max_state_bytes=self.checkpoint_bytes,
            lr=float(p["lr"]),
            weight_decay=float(p["weight_decay"]),
            allowed=dict(p["allowed_hyperparameters"]),
        )

    def _run(
        self,
        candidate: CandidateRuntime,
        ex: ExchangeDir,
        argv: list[str],
        stdin: bytes,
        what: str,
        limit: float = math.inf,
    ) -> float:
        timeout = min(max(candidate.remaining(), 0.0), limit)
        if timeout <= 0:
            raise CandidateTimeout(f"no time left to {what}")
        argv = ["{python}", "-I", "-B", f"{ex.name}/sandbox_driver.py", *argv]
        res = candidate.run(argv, _frame(json.dumps(self.protocol).encode()) + stdin, timeout=timeout)
        # Not infra_error whatever the exit: it comes from the sandbox, which the candidate controls.
        return verdict(res, what, timeout)

    def _arrays(
        self, out: ExchangeDir, reps_name: str, items_name: str, users: int
    ) -> tuple[np.ndarray, np.ndarray]:
        items = self.split.train.num_items + 1
        reps = out.read_array(reps_name, "float32", (users, None), self.max_rep_bytes)
        emb = out.read_array(items_name, "float32", (items, reps.shape[1]), self.max_item_bytes)
        for name, arr in ((reps_name, reps), (items_name, emb)):
            bad = int(np.count_nonzero(~np.isfinite(arr)))
            if bad:
                raise CandidateInvalid(f"rule 'finite': {bad} NaN or infinite values in {name}")
        return reps, emb

    def _code_dir(self, candidate: CandidateRuntime, workdir: Path, dirs: list[ExchangeDir]) -> ExchangeDir:
        code = ExchangeDir(workdir, "kuairec", writable=False)
        dirs.append(code)
        code.write_new("candidate.py", candidate.source.encode("utf-8"))
        code.write_new("sandbox_driver.py", self.driver_source)
        return code

    def _train(
        self, candidate: CandidateRuntime, code: ExchangeDir
    ) -> tuple[int, dict[str, float], tuple[np.ndarray, np.ndarray], dict[str, Any], float]:
        """Trusted training (:class:`.trainer.TrustedTrainer`) and epoch selection on validation.

        Returns:
            The best epoch, its validation metrics, its validation outputs, its trusted state
            (the checkpoint) and the training's wall seconds (trusted clock).
        """
        s, p = self.split, self.params
        argv = ["{python}", "-I", "-B", f"{code.name}/sandbox_driver.py", "train"]
        stdin = _frame(json.dumps(self.protocol).encode()) + _frame(self.train_npz)
        t0 = time.perf_counter()
        best_epoch, best_val = 0, -math.inf
        best_metrics: dict[str, float] = {}
        best_outputs: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))
        best_state: dict[str, Any] = {}
        with TrustedTrainer(candidate, argv, stdin, self.limits) as trainer:
            rng = np.random.default_rng(int(p["seed"]))
            lengths = np.diff(s.train.offsets)
            trainable = np.flatnonzero(lengths >= 2)
            step, bs = 0, int(p["batch_size"])
            for epoch in range(1, int(p["epochs"]) + 1):
                users = np.repeat(trainable, int(p["samples_per_user"]))
                # A cut c in [1, L-1]: history s[:c] predicts s[c].
                cuts = (rng.random(users.shape[0]) * (lengths[users] - 1)).astype(np.int64) + 1
                order = rng.permutation(users.shape[0])
                users, cuts = users[order], cuts[order]
                for a in range(0, users.shape[0], bs):
                    u, c = users[a : a + bs], cuts[a : a + bs]
                    neg = rng.integers(1, s.train.num_items + 1, size=(len(u), int(p["negatives"])))
                    step += 1
                    trainer.step(step, int(p["seed"]) * 1_000_003 + step, u, c, neg)
                reps, emb = trainer.represent(epoch)
                m = ranking_metrics(ranks(reps, emb, s.train.offsets, s.train.items, s.val_target))
                if m["combined"] > best_val:
                    best_epoch, best_val = epoch, m["combined"]
                    best_metrics, best_outputs, best_state = m, (reps, emb), trainer.state()
            trainer.finish()
        return best_epoch, best_metrics, best_outputs, best_state, time.perf_counter() - t0

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Train (trusted optimiser), select the epoch on validation, test (see module docstring).

        Raises:
            CandidateInvalid: A rule is broken, or the tested model's validation metric differs
                from the validated one's (rule ``protocol``).
            CandidateError: A phase failed, or its outputs cannot be decoded within the limits.
            CandidateTimeout: The budget ran out.
        """
        s = self.split
        users = s.train.num_users
        workdir = Path(candidate.workdir)
        dirs: list[ExchangeDir] = []
        try:
            code = self._code_dir(candidate, workdir, dirs)
            best_epoch, val_metrics, best_outputs, state, train_seconds = self._train(candidate, code)
            best_val = val_metrics["combined"]
            # Made now, after every training process is gone: nothing can be planted in it. The
            # checkpoint is the trusted state, never bytes a sandbox wrote.
            code = self._code_dir(candidate, workdir, dirs)
            code.write_new("checkpoint.pt", checkpoint_file(state))
            test_out = ExchangeDir(workdir, "kuairec-test")
            dirs.append(test_out)
            stdin = _frame(self.train_npz) + _frame(self.test_npz)
            test_seconds = self._run(
                candidate, code, ["test", test_out.name], stdin, "test inference", self.test_timeout_s
            )
            reps, emb = self._arrays(test_out, "test_reps.npy", "test_items.npy", users)
            test = ranking_metrics(
                ranks(reps, emb, s.test_history.offsets, s.test_history.items, s.test_target)
            )
            vreps, vemb = self._arrays(test_out, "val_reps.npy", "val_items.npy", users)
            again = ranking_metrics(ranks(vreps, vemb, s.train.offsets, s.train.items, s.val_target))
            drift = max(_rel_diff(vreps, best_outputs[0]), _rel_diff(vemb, best_outputs[1]))
            if not (abs(again["combined"] - best_val) <= self.val_match_tol and drift <= self.rep_match_rtol):
                raise CandidateInvalid(
                    f"rule 'protocol': the tested model's validation score {again['combined']:.6f} and "
                    f"outputs (relative difference {drift:.3g}) differ from the validated checkpoint's "
                    f"{best_val:.6f} (tolerances {self.val_match_tol}, {self.rep_match_rtol}): "
                    "the model tested must be exactly the one trained and validated"
                )
        finally:
            for d in dirs:
                d.close()
        metrics: dict[str, Any] = dict(test)
        metrics.update({f"val_{k}": v for k, v in val_metrics.items()})
        metrics.update(
            {"epoch": float(best_epoch), "train_seconds": train_seconds, "test_seconds": test_seconds}
        )
        metrics.update(self.device.metrics())
        if self.key_id is not None:
            metrics["heldout_key"] = self.key_id
        return ScoreOutcome(
            score=test["combined"], metrics=metrics, candidate_seconds=train_seconds + test_seconds
        )
