"""Trusted scorer of the LLM-SR family: fit the candidate skeleton's parameters, then test it.

The fit is in ``fit.py``, the canonical form and plausibility rules in ``canonical.py`` and
``plausibility.py``; the protocol, the validity rules and the figures are in
``environments/llm_sr/README.md``.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np

from harness.envs.data import ChecksumError, DataMissingError, expected_sha256, sha256_file
from harness.envs.manifest import DataSource
from harness.envs.subset import subset_of, unit_indices
from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.evaluation.result import CaseRecord
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer, require_finite
from harness.scoring.exchange import ExchangeDir

from .canonical import canonicalise, check_size
from .data import SPLITS, Problem, load_csv_problem, oscillator_problem
from .fit import FitResult, FitSettings, PublishedFitSettings, fit_parameters, fit_published, nmse
from .lsrbench import load_lsrbench_problem
from .plausibility import PlausibilityLimits, check_generalisation, check_source

DRIVER_FILE = Path(__file__).resolve().parent / "inside" / "driver.py"
MAGIC = b"\x00EVOBENCH-LLM-SR-PREDICTIONS\x00"  # must match sandbox_driver.MAGIC
RULE_EXIT = 3  # sandbox_driver's exit code for a broken rule
ENTRY = "equation"
FITS = ("published", "strong")
_REASON_CAP = 1500


def check_prediction(value: Any, rows: int, split: str) -> np.ndarray:
    """Turn one ``equation`` result into a float64 vector or raise ``CandidateInvalid``.

    Finiteness is not checked here (the fit treats non-finite trial points as infinitely bad).
    """
    if not isinstance(value, np.ndarray):
        raise CandidateInvalid(
            f"rule 'type': on {split}, equation returned a {type(value).__name__}; expected a numpy "
            f"array of shape ({rows},)"
        )
    if value.dtype.kind not in "fiu":
        raise CandidateInvalid(
            f"rule 'dtype': on {split}, equation returned dtype {value.dtype}; expected real numbers"
        )
    if value.shape != (rows,):
        raise CandidateInvalid(
            f"rule 'shape': on {split}, equation returned shape {value.shape}; expected ({rows},), one "
            "prediction per row (broadcast constants, e.g. with np.full_like)"
        )
    return np.array(value, dtype=np.float64)


def _is_index_error(err: CandidateError) -> bool:
    head = err.reason.split(":", 1)[0]
    return head.startswith(f"{ENTRY} raised IndexError")


def _seal_workdir(workdir: Path) -> None:
    """Make the work directory unwritable for the sandbox user and remove everything in it.

    Entries are removed without following symbolic links (``shutil.rmtree`` works on file
    descriptors). Failures are ignored: they can only leave the candidate's own files behind.
    """
    try:
        os.chmod(workdir, 0o755)
    except OSError:
        pass
    try:
        entries = list(os.scandir(workdir))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def parse_frame(stdout: bytes, rows: list[int]) -> list[np.ndarray]:
    """Split the prediction frame at the end of the driver's stdout into one vector per split.

    Raises:
        CandidateError: If the frame is missing or has the wrong length.
    """
    payload_len = 8 * sum(rows)
    frame_len = len(MAGIC) + 8 + payload_len
    frame = stdout[-frame_len:]
    if len(frame) != frame_len or not frame.startswith(MAGIC):
        raise CandidateError(
            "the fresh prediction process did not end its output with the prediction frame "
            f"(expected {frame_len} bytes at the end of stdout, got {len(stdout)} bytes in total)"
        )
    (declared,) = struct.unpack("<Q", frame[len(MAGIC) : len(MAGIC) + 8])
    if declared != payload_len:
        raise CandidateError(f"the prediction frame declares {declared} bytes, expected {payload_len}")
    flat = np.frombuffer(frame[len(MAGIC) + 8 :], dtype="<f8").astype(np.float64)
    bounds = np.cumsum([0, *rows])
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(rows))]


class LlmSrScorer(Scorer):
    """Fit-then-test scorer of an LLM-SR equation skeleton.

    Parameters (``variant.scorer_params``): ``fit`` ["published"] (or "strong"), the fit that
    is scored; ``report_strong_fit`` [false], also run the strong fit and report
    ``log10_nmse_strong_fit`` / ``log10_nmse_ood_strong_fit`` / ``fit_calls_strong``; published
    fit settings (``max_params`` [10], ``param_init`` [1.0], ``published_max_calls`` [20000]);
    strong fit settings (``gtol`` [1e-10], ``max_iter`` [150], ``max_calls`` [3000],
    ``fd_scheme`` ["3-point"]); ``nmse_floor`` [1e-30]; ``deterministic_rtol`` [1e-9];
    ``fresh_timeout_s`` [60]; the data: ``synthetic = true`` with the keys of
    :func:`data.oscillator_problem`, or ``problem``, ``columns``, ``target`` (and optionally
    ``data_key``) for a released LLM-SR problem, or ``format = "lsrbench-hdf5"`` with ``group``,
    ``problem_index``, ``columns``, ``target``, ``truth`` and ``data_key`` for LLM-SRBench.
    """

    problem: Problem

    def prepare(self) -> None:
        """Load (or regenerate) the problem and read the settings.

        Raises:
            DataMissingError: The released data has not been fetched.
            ChecksumError: A cached file does not match its pinned (or first-fetch) sha256.
            ValueError: The parameters or the data are inconsistent.
        """
        p = self.params
        self.fit = str(p.get("fit", "published"))
        if self.fit not in FITS:
            raise ValueError(f"fit must be one of {FITS}, got {self.fit!r}")
        self.report_strong = bool(p.get("report_strong_fit", False)) and self.fit != "strong"
        self.settings = FitSettings.from_params(p)
        self.published_settings = PublishedFitSettings.from_params(p)
        self.nmse_floor = float(p.get("nmse_floor", 1e-30))
        self.deterministic_rtol = float(p.get("deterministic_rtol", 1e-9))
        self.fresh_timeout_s = float(p.get("fresh_timeout_s", 60.0))
        self.plausibility = PlausibilityLimits.from_params(p)
        if p.get("synthetic", False):
            self.problem = oscillator_problem(p)
        elif p.get("format") == "lsrbench-hdf5":
            self.problem = self._load_lsrbench()
        else:
            source = self._source()
            self.problem = load_csv_problem(
                self.data_dir,
                source_dir=source.filename,
                problem=str(p["problem"]),
                columns=tuple(str(c) for c in p["columns"]),
                target_name=str(p["target"]),
                checksums=source.files,
            )
        self.driver_source = DRIVER_FILE.read_bytes()
        train = self.problem.splits["train"]
        self.train_columns = train.columns()
        self.target_scale = float(np.max(np.abs(train.target)))

    def _load_lsrbench(self) -> Problem:
        p = self.params
        source = self._source()
        path = Path(self.data_dir) / source.filename
        if not path.is_file():
            raise DataMissingError(
                f"{self.variant.id} needs {path}; run `bench data fetch {self.variant.family}` with a "
                "Hugging Face token in HF_TOKEN first (see the variant's data source for access)"
            )
        want = expected_sha256(self.variant.family, source)
        if not want:
            raise ChecksumError(
                f"{path}: no sha256 is pinned or recorded; fetch it again with `bench data fetch`"
            )
        got = sha256_file(path)
        if got != want:
            raise ChecksumError(
                f"{path}: sha256 {got} does not match the recorded {want}; delete it and fetch again"
            )
        truth = p.get("truth")
        return load_lsrbench_problem(
            path,
            group=str(p["group"]),
            problem_index=int(p.get("problem_index", 0)),
            columns=tuple(str(c) for c in p["columns"]),
            target_name=str(p["target"]),
            truth=None if truth is None else str(truth),
        )

    def _source(self) -> DataSource:
        key = self.params.get("data_key")
        for k, source in self.variant.data:
            if key is None or k == key:
                return source
        raise ValueError(
            f"{self.variant.id}: no data source {key!r} among {[k for k, _ in self.variant.data]}"
        )

    # -- scoring ------------------------------------------------------------------------------

    def sandbox_source(self, source: str) -> str:
        """The canonical form of ``source``: no process of the candidate ever sees the submitted text.

        Raises:
            CandidateError: The program does not parse.
            CandidateInvalid: Rule ``size`` (see ``canonical.py``).
        """
        lim = self.plausibility
        canonical = canonicalise(source, lim.max_source_chars)
        check_source(canonical, lim)
        check_size(canonical, lim.max_canonical_chars, lim.max_compressed_bytes)
        return canonical

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Fit on train through the candidate process, predict all splits in a fresh process, score.

        Raises:
            ValueError: A validation subset of test_id is unusable (checked before the candidate runs).
        """
        id_rows = self._subset_rows()
        lim = self.plausibility
        # The harness loads ``sandbox_source`` (already canonical; idempotent) in every process of the
        # candidate; canonicalised again here for runtimes built without it (tests, tools).
        canonical = canonicalise(candidate.source, lim.max_source_chars)
        check_source(canonical, lim)
        check_size(canonical, lim.max_canonical_chars, lim.max_compressed_bytes)
        train = self.problem.splits["train"]
        columns = self.train_columns
        call_seconds = 0.0

        def predict(params: np.ndarray) -> np.ndarray:
            nonlocal call_seconds
            try:
                result = candidate.call_driver(ENTRY, *columns, params)
            except CandidateError as e:
                if _is_index_error(e):
                    raise CandidateInvalid(
                        f"rule 'max-params': equation indexes past the {self.settings.max_params} "
                        f"parameters it is given ({e.reason.splitlines()[0][:300]})"
                    ) from e
                raise
            call_seconds += float(result.seconds)
            return check_prediction(result.value, train.rows, "train")

        fits: list[FitResult] = []
        if self.fit == "published":
            fits.append(fit_published(predict, train.target, self.published_settings))
        if self.fit == "strong" or self.report_strong:
            fits.append(fit_parameters(predict, train.target, self.settings))
        sets, run_seconds = self._fresh_predictions(candidate, canonical, np.stack([f.params for f in fits]))
        for fit, predictions in zip(fits, sets, strict=True):
            self._check_deterministic(fit, predictions["train"])
        metrics = self._metrics(sets[0], strict=True, id_rows=id_rows)
        full_id = nmse(sets[0]["test_id"], self.problem.splits["test_id"].target)  # not a subset's
        check_generalisation(metrics["train_nmse"], full_id, self.plausibility)
        metrics["fit_calls"] = float(fits[0].calls)
        if id_rows is not None:
            metrics["subset_size"] = float(id_rows.size)
        if self.report_strong:
            extra = self._metrics(sets[1], strict=False, id_rows=id_rows)
            if extra:
                metrics["log10_nmse_strong_fit"] = extra["log10_nmse_id"]
                metrics["log10_nmse_ood_strong_fit"] = extra["log10_nmse_ood"]
            metrics["fit_calls_strong"] = float(fits[1].calls)
        named = (("train", "train_nmse"), ("test_id", "nmse_id"), ("test_ood", "nmse_ood"))
        cases = [
            CaseRecord(name=split, status="ok", score=metrics[key], reason="NMSE of the fresh predictions")
            for split, key in named
            if key in metrics
        ]
        return ScoreOutcome(
            score=metrics["log10_nmse_id"],
            metrics=metrics,
            candidate_seconds=call_seconds + run_seconds,
            cases=cases,
        )

    def _subset_rows(self) -> np.ndarray | None:
        """Rows of test_id a validation subset scores, or None for all of them.

        Raises:
            ValueError: If the subset has fewer than 2 points or their targets are all equal (the
                NMSE divides by the variance of the scored targets).
        """
        if subset_of(self.params) is None:
            return None
        target = self.problem.splits["test_id"].target
        rows = np.asarray(unit_indices(target.size, self.params), dtype=np.intp)
        if rows.size < 2 or not float(np.var(target[rows])) > 0.0:
            raise ValueError(
                f"{self.variant.id}: a test_id subset needs at least 2 points with distinct targets "
                f"(NMSE divides by their variance); this one has {rows.size}"
            )
        return rows

    def _check_deterministic(self, fit: FitResult, fresh_train: np.ndarray) -> None:
        scale = max(self.target_scale, float(np.max(np.abs(fit.prediction))), 1e-300)
        with np.errstate(all="ignore"):
            worst = float(np.max(np.abs(fresh_train - fit.prediction)))
        if not worst <= self.deterministic_rtol * scale:
            raise CandidateInvalid(
                "rule 'deterministic': in a fresh process, equation's train predictions at the fitted "
                f"parameters differ from those it returned during the fit (max difference {worst:.3g}); "
                "equation must be a pure function of its arguments"
            )

    def _metrics(
        self, predictions: dict[str, np.ndarray], *, strict: bool, id_rows: np.ndarray | None = None
    ) -> dict[str, float]:
        """Train MSE / NMSE and test NMSE / log10 NMSE of one fit's fresh predictions.

        With ``strict``, non-finite predictions or errors make the candidate invalid; without it
        (the reported-only strong fit), they give an empty dict. ``id_rows`` restricts test_id to
        a validation subset.

        Raises:
            CandidateInvalid: With ``strict``, a prediction or an error is not finite.
        """
        metrics: dict[str, float] = {}
        for split in SPLITS:
            pred = predictions[split]
            target = self.problem.splits[split].target
            if split == "test_id" and id_rows is not None:
                pred, target = pred[id_rows], target[id_rows]
            bad = int(np.count_nonzero(~np.isfinite(pred)))
            err = nmse(pred, target) if not bad else float("nan")
            if not math.isfinite(err):
                if not strict:
                    return {}
                if bad:
                    raise CandidateInvalid(
                        f"rule 'finite': {bad} of {pred.size} predictions on {split} are NaN or infinite"
                    )
                raise CandidateInvalid(f"rule 'finite': the squared error on {split} overflows")
            if split == "train":
                with np.errstate(all="ignore"):
                    mse = float(np.mean((pred - target) ** 2))
                metrics["train_mse"] = require_finite("train_mse", mse)
                metrics["train_nmse"] = err
                continue
            key = "id" if split == "test_id" else "ood"
            metrics[f"nmse_{key}"] = err
            metrics[f"log10_nmse_{key}"] = math.log10(max(err, self.nmse_floor))
        return metrics

    def _fresh_predictions(
        self, candidate: CandidateRuntime, canonical: str, param_sets: np.ndarray
    ) -> tuple[list[dict[str, np.ndarray]], float]:
        """Predict every split for every row of ``param_sets`` in a new sandboxed interpreter.

        The interpreter loads ``canonical`` (the program's canonical form), never the submitted
        text. See the module docstring. Finiteness is checked by the caller.

        Raises:
            CandidateInvalid: A broken rule (shape).
            CandidateError: The process failed or its output is malformed.
            CandidateTimeout: The process ran out of time.
        """
        # The fitting process and all it started must be gone first: alive, it could pass what it
        # learnt during the fit to the fresh process (a lock, a socket, a file left open).
        candidate.end_calls()
        workdir = Path(candidate.workdir)
        _seal_workdir(workdir)
        sub = ExchangeDir(workdir, "llm-sr", writable=False)
        try:
            return self._run_fresh(candidate, sub, canonical, param_sets)
        finally:
            sub.close()

    def _run_fresh(
        self, candidate: CandidateRuntime, sub: ExchangeDir, canonical: str, param_sets: np.ndarray
    ) -> tuple[list[dict[str, np.ndarray]], float]:
        buf = io.BytesIO()
        arrays: dict[str, Any] = {
            "splits": np.array(SPLITS),
            "params": np.asarray(param_sets, dtype=np.float64),
        }
        for split in SPLITS:
            arrays[f"x_{split}"] = self.problem.splits[split].inputs
        np.savez(buf, **arrays)
        sub.write_new("inputs.npz", buf.getvalue())
        sub.write_new("candidate.py", canonical.encode("utf-8"))
        sub.write_new("sandbox_driver.py", self.driver_source)
        timeout = min(self.fresh_timeout_s, max(candidate.remaining(), 0.0))
        if timeout <= 0:
            raise CandidateTimeout("no time left to predict the test splits")
        res = candidate.run(["{python}", "-I", "-B", f"{sub.name}/sandbox_driver.py"], timeout=timeout)
        stderr = res.stderr.decode("utf-8", errors="replace").strip()
        if res.timed_out:
            raise CandidateTimeout(
                f"predicting the splits in a fresh process hit the {res.limit or 'wall'} limit "
                f"({timeout:.1f} s)"
            )
        if res.returncode == RULE_EXIT:
            last = stderr.splitlines()[-1] if stderr else ""
            msg = last if last.startswith("rule '") else f"rule 'shape': {last}"
            raise CandidateInvalid(msg[:_REASON_CAP])
        if res.returncode != 0:
            raise CandidateError(
                f"predicting the splits in a fresh process failed (exit code {res.returncode}): "
                f"{stderr[-_REASON_CAP:]}"
            )
        rows = [self.problem.splits[s].rows for s in SPLITS]
        parts = parse_frame(res.stdout, rows * len(param_sets))
        sets = [
            dict(zip(SPLITS, parts[i * len(SPLITS) : (i + 1) * len(SPLITS)], strict=True))
            for i in range(len(param_sets))
        ]
        return sets, float(res.seconds)
