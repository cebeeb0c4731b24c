"""Trusted scorer of the KuaiRec family: fixed training protocol, epoch picked on validation, test.

Protocol for one candidate (``build_recommender(num_items, embedding_dim, max_seq_len, context)``
returning a torch module: ``forward(items, timestamps) -> [batch, d]`` user representations and
``item_embeddings() -> [num_items + 1, d]``):

1. **Train** in a sandboxed process (``sandbox_driver.py train``) that receives only ``s[:-2]`` of
   every user: ``epochs`` epochs of sampled softmax (``samples_per_user`` random cut points per
   user and epoch, ``negatives`` uniform negatives, cosine logits over ``temperature``, AdamW).
   After each epoch it writes the validation-input representations, item embeddings and a
   checkpoint.
2. **Select** the epoch with the best validation combined score (target ``s[-2]``), computed
   here; the earliest wins ties. The test target was never used for anything.
3. **Test** in a fresh sandboxed process (``sandbox_driver.py test EPOCH``) that loads that
   checkpoint and represents the test histories ``s[:-1]``; metrics on ``s[-1]`` (``metrics.py``).

Every array read back is checked (file type, size, dtype, shape, finiteness). The whole evaluation
shares the variant's wall-clock budget; running out is a timeout.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from harness.envs.data import expected_sha256
from harness.envs.secret import heldout_seed
from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer
from harness.scoring.device import choose_device
from harness.scoring.exchange import ExchangeDir

from .data import Sequences, Split, load_kuairec, split, synthetic_sequences
from .metrics import ranking_metrics, ranks

DRIVER_FILE = Path(__file__).resolve().with_name("sandbox_driver.py")
RULE_EXIT = 3  # sandbox_driver's exit code for a broken rule
NO_CUDA_EXIT = 4  # sandbox_driver: the scorer asked for CUDA, the sandbox has none
_REASON_CAP = 1500
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
        self.protocol = {**{k: p[k] for k in PROTOCOL_KEYS}, "device": self.device.device}
        self.train_npz = _npz(self.split.train)
        self.test_npz = _npz(self.split.test_history)
        self.driver_source = DRIVER_FILE.read_bytes()
        d = int(p["embedding_dim"])
        users, items = self.split.train.num_users, self.split.train.num_items + 1
        # Generous caps: a representation may be wider than embedding_dim, but not unboundedly.
        self.max_rep_bytes = 128 + 4 * users * max(8 * d, 1024)
        self.max_item_bytes = 128 + 4 * items * max(8 * d, 1024)

    def _run(self, candidate: CandidateRuntime, ex: ExchangeDir, argv: list[str], what: str) -> float:
        timeout = max(candidate.remaining(), 0.0)
        if timeout <= 0:
            raise CandidateTimeout(f"no time left to {what}")
        res = candidate.run(["{python}", "-I", "-B", f"{ex.name}/sandbox_driver.py", *argv], timeout=timeout)
        stderr = res.stderr.decode("utf-8", errors="replace").strip()
        if res.timed_out:
            raise CandidateTimeout(f"{what} hit the {res.limit or 'wall'} limit ({timeout:.0f} s left)")
        if res.returncode == NO_CUDA_EXIT:
            # Not infra_error: the exit code comes from the sandbox, which the candidate controls.
            raise CandidateError(
                f"{what}: {stderr[-_REASON_CAP:]} (the sandbox has no GPU access: run `bench doctor --gpu`)"
            )
        if res.returncode == RULE_EXIT:
            last = stderr.splitlines()[-1] if stderr else "rule 'output'"
            raise CandidateInvalid(last[:_REASON_CAP])
        if res.returncode != 0:
            raise CandidateError(f"{what} failed (exit code {res.returncode}): {stderr[-_REASON_CAP:]}")
        return float(res.seconds)

    def _arrays(self, ex: ExchangeDir, reps_name: str, items_name: str) -> tuple[np.ndarray, np.ndarray]:
        users, items = self.split.train.num_users, self.split.train.num_items + 1
        reps = ex.read_array(reps_name, "float32", (users, None), self.max_rep_bytes)
        emb = ex.read_array(items_name, "float32", (items, reps.shape[1]), self.max_item_bytes)
        for name, arr in ((reps_name, reps), (items_name, emb)):
            bad = int(np.count_nonzero(~np.isfinite(arr)))
            if bad:
                raise CandidateInvalid(f"rule 'finite': {bad} NaN or infinite values in {name}")
        return reps, emb

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Train, select the epoch on validation, test (see module docstring)."""
        s = self.split
        ex = ExchangeDir(Path(candidate.workdir), "kuairec")
        try:
            ex.write_new("candidate.py", candidate.source.encode("utf-8"))
            ex.write_new("sandbox_driver.py", self.driver_source)
            ex.write_new("params.json", json.dumps(self.protocol).encode())
            ex.write_new("inputs.npz", self.train_npz)
            train_seconds = self._run(candidate, ex, ["train"], "training")
            best_epoch, best_val = 0, -math.inf
            val_metrics: dict[str, float] = {}
            for epoch in range(1, int(self.params["epochs"]) + 1):
                reps, emb = self._arrays(ex, f"val_reps_{epoch}.npy", f"items_{epoch}.npy")
                m = ranking_metrics(ranks(reps, emb, s.train.offsets, s.train.items, s.val_target))
                if m["combined"] > best_val:
                    best_epoch, best_val, val_metrics = epoch, m["combined"], m
            ex.write_new("test_inputs.npz", self.test_npz)
            test_seconds = self._run(candidate, ex, ["test", str(best_epoch)], "test inference")
            reps, emb = self._arrays(ex, "test_reps.npy", "test_items.npy")
            test = ranking_metrics(
                ranks(reps, emb, s.test_history.offsets, s.test_history.items, s.test_target)
            )
        finally:
            ex.close()
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
