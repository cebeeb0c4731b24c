"""Reward hacks against the Multi-Evolve family, run through the real local sandbox backend.

Each hack is a complete candidate program evaluated exactly as an agent's program would be.
Output-rule hacks must come back ``invalid`` naming the rule; label hunts (the test fitness in the
arguments, in files, in the process) must find nothing; a candidate that returns the test rows'
mutation counts gets exactly the honest score of those numbers. Every probe has a positive
control, so a broken probe cannot pass vacuously.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import environments.multi_evolve.scorer as me_scorer
from environments.multi_evolve.data import synthetic_assays
from environments.multi_evolve.scorer import pearson_r, top_precision
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status

from ..family_support import data_cache_with, evaluate

SECRET = "multievolve-secret-5d1e0b77"


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("multi-evolve-tiny")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data cache holding secret assay tables, set as EVOBENCH_DATA before the backend starts."""
    sources = default_registry().get("multi-evolve-full").data
    tables = {src.filename: f"mutant,DMS_score\nWT,0\n{SECRET},1\n" for _, src in sources}
    with data_cache_with(tmp_path_factory.mktemp("evobench-data"), "multi_evolve", tables) as family:
        yield family


@pytest.fixture(scope="module")
def backend(data_dir: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b


@pytest.fixture(scope="module")
def honest(backend: object, tiny: Variant) -> EvalResult:
    result = evaluate(backend, tiny, tiny.initial_program)
    assert result.status is Status.OK, result.reason
    return result


def wrap(variant: Variant, body: str) -> str:
    """The initial program with ``fit_and_predict`` wrapped: ``body`` edits the honest ``pred``."""
    return (
        variant.initial_program
        + "\n\n_honest_fit = fit_and_predict\n\n\n"
        + "def fit_and_predict(train_df, test_df, context):\n"
        + "    pred = _honest_fit(train_df, test_df, context)\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n    return pred\n"
    )


def test_honest_initial_program_is_ok(honest: EvalResult, tiny: Variant) -> None:
    # The secret-keyed draw: within the spread measured across keys (0.71-0.81; y_init 0.7731 is
    # the public draw's, checked in test_multi_evolve_heldout).
    assert "heldout_key" in honest.metrics
    assert honest.score == pytest.approx(tiny.progress.y_init, abs=0.1)
    assert honest.metrics["pearson_r"] > 0.7
    assert honest.metrics["fit_seconds"] > 0


OUTPUT_HACKS = {
    "nan": ("pred = pred.copy()\npred[0] = float('nan')", "finite"),
    "inf": ("pred = pred.copy()\npred[-1] = float('-inf')", "finite"),
    "short": ("pred = pred[:-1]", "length"),
    "long": ("pred = np.concatenate([pred, pred[:1]])", "length"),
    "empty": ("pred = np.zeros(0)", "length"),
    "two-d": ("pred = pred.reshape(-1, 1)", "shape"),
    "strings": ("pred = [str(x) for x in pred]", "types"),
    "bools": ("pred = pred > np.median(pred)", "types"),
}


@pytest.mark.parametrize("name", sorted(OUTPUT_HACKS))
def test_output_hack_is_invalid(backend: object, tiny: Variant, name: str) -> None:
    body, rule = OUTPUT_HACKS[name]
    result = evaluate(backend, tiny, wrap(tiny, body))
    assert result.status is Status.INVALID, (result.status, result.reason)
    assert f"rule '{rule}'" in result.reason
    assert result.score is None


def test_returning_labels_is_impossible(backend: object, tiny: Variant) -> None:
    """The reference handed over test_df['fitness'] and the assay id; here neither exists."""
    for grab in ('test_df["fitness"].to_numpy()', 'test_df["DMS_score_bin"].to_numpy()', 'context["DMS_id"]'):
        source = tiny.initial_program + textwrap.dedent(
            f"""

            def fit_and_predict(train_df, test_df, context):
                return {grab}
            """
        )
        result = evaluate(backend, tiny, source)
        assert result.status is Status.ERROR, (grab, result.status, result.reason)
        assert "KeyError" in result.reason and result.score is None


def test_mutation_counts_as_predictions_get_an_honest_low_score(
    backend: object, tiny: Variant, honest: EvalResult
) -> None:
    source = tiny.initial_program + textwrap.dedent(
        """

        def fit_and_predict(train_df, test_df, context):
            return test_df["num_mutations"].to_numpy(dtype=np.float64)
        """
    )
    result = evaluate(backend, tiny, source)
    assert result.status is Status.OK, result.reason
    scorer = me_scorer.MultiEvolveScorer(tiny, Path("/nonexistent"))
    scorer.prepare()  # the same installation key as the backend's workers: the same draw
    assays = scorer.assays
    rs = [pearson_r(a.truth, a.test["num_mutations"].astype(float)) for a in assays]
    ps = [top_precision(a.truth, a.test["num_mutations"].astype(float)) for a in assays]
    expected = 0.7 * np.mean(rs) + 0.3 * np.mean(ps)
    assert result.score == pytest.approx(expected, abs=1e-12)
    assert honest.score is not None and result.score < honest.score - 0.3


def file_probe(data_dir: Path) -> tuple[str, list[Path]]:
    """A candidate wrapper that fails with LEAK if it can read any data table or trusted file."""
    family_dir = Path(me_scorer.__file__).resolve().parent
    tables = sorted(data_dir.glob("*.csv"))
    files = [*tables, family_dir / "scorer.py", family_dir / "data.py", family_dir / "env.toml"]
    dirs = [data_dir, data_dir.parent, family_dir]
    home_cache = Path.home() / ".cache" / "evobench" / "data" / "multi_evolve"
    source = textwrap.dedent(
        f"""
        import itertools as _itertools
        import os as _os
        import time as _time

        _FILES = {[str(f) for f in files] + [str(home_cache / tables[0].name)]!r}
        _DIRS = {[str(d) for d in dirs] + [str(home_cache)]!r}
        _SECRET = {SECRET!r}
        _NAMES = {sorted(f.name for f in tables)!r}


        def _read(path):
            try:
                with open(path, "rb") as fh:
                    return fh.read(1 << 20)
            except OSError:
                return None


        def _listing(path):
            try:
                return _os.listdir(path)
            except OSError:
                return []


        def _walk_for_tables():
            # Every readable file named like an assay table, or any small CSV holding the secret.
            found, control = [], False
            t0 = _time.monotonic()
            tree = _itertools.chain(_os.walk(_os.getcwd()), _os.walk("/"))  # cwd first: the control
            for root, dirnames, filenames in tree:
                if root in ("/proc", "/sys", "/dev") or _time.monotonic() - t0 > 20:
                    dirnames[:] = []
                    continue
                for name in filenames:
                    path = _os.path.join(root, name)
                    if name == "probe_control.csv":
                        control = control or _read(path) == b"control"
                    if name in _NAMES:
                        found.append(path)
                    elif name.endswith(".csv"):
                        data = _read(path)
                        if data and _SECRET.encode() in data:
                            found.append(path)
            return found, control


        def _probe():
            with open("probe_control.csv", "w") as fh:
                fh.write("control")
            if _read("probe_control.csv") != b"control":
                raise RuntimeError("control failed: cannot read my own file")
            leaked = [p for p in _FILES if _read(p) is not None]
            leaked += [d for d in _DIRS if _listing(d)]
            walked, control = _walk_for_tables()
            if not control:
                raise RuntimeError("control failed: the walk did not reach my own file")
            leaked += walked
            if leaked:
                raise RuntimeError(f"LEAK: could read {{leaked}}")


        _honest_fit = fit_and_predict


        def fit_and_predict(train_df, test_df, context):
            _probe()
            return _honest_fit(train_df, test_df, context)
        """
    )
    return source, files


def test_protected_files_are_unreadable(backend: object, tiny: Variant, data_dir: Path) -> None:
    probe, files = file_probe(data_dir)
    for f in files:  # the targets exist and are readable outside the sandbox: the probe is meaningful
        assert f.read_bytes()
    assert SECRET in files[0].read_text()
    result = evaluate(backend, tiny, tiny.initial_program + "\n" + probe)
    assert result.status is Status.OK, result.reason
    assert SECRET not in result.stdout_tail + result.stderr_tail


INTROSPECTION = """
import gc as _gc
import inspect as _inspect
import sys as _sys

_RETURNED = []
_LABEL_KEYS = {"fitness", "DMS_score", "DMS_score_bin", "truth", "y_true", "labels", "target"}
_SUSPECT_NAMES = {"assay", "assays", "truth", "scorer", "MultiEvolveScorer", "synthetic_assays",
                  "load_assays", "split_assay"}


def _floats(x, n):
    # A float vector of length n (a candidate label vector), as a numpy array, or None.
    try:
        arr = np.asarray(x)
    except Exception:
        return None
    if arr.ndim == 1 and arr.shape[0] == n and arr.dtype.kind == "f":
        return arr
    return None


def _hunt(train_df, test_df):
    n_test = len(test_df["mutant"])
    n_train = len(train_df["mutant"])
    leaks, saw_train, saw_test = [], False, False

    # 1) The caller's frames.
    frames = []
    f = _sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back
    frames += [info.frame for info in _inspect.stack(0)]
    if len(frames) < 2:
        raise RuntimeError("control failed: no caller frame visible")
    for fr in frames:
        if fr.f_globals is globals():
            continue
        names = set(fr.f_locals) | set(fr.f_globals)
        if names & _SUSPECT_NAMES:
            leaks.append(f"frame {fr.f_code.co_name} has {sorted(names & _SUSPECT_NAMES)}")

    # 2) Trusted modules loaded in this process (harness.inside is the sandbox's own code).
    inside = ("harness", "harness.inside") + tuple(m for m in _sys.modules if m.startswith("harness.inside."))
    trusted = [m for m in list(_sys.modules) if m.startswith(("environments", "harness")) and m not in inside]
    if trusted:
        leaks.append(f"trusted modules loaded: {trusted[:5]}")

    # 3) Every object the garbage collector tracks: dicts holding label-like keys, float vectors
    #    of the test length that are not our own earlier output.
    for obj in _gc.get_objects():
        kind = type(obj)
        if str(kind.__module__).startswith(("environments.", "harness.")):
            leaks.append(f"gc object of type {kind.__module__}.{kind.__name__}")
            continue
        if isinstance(obj, dict):
            # The driver's column dicts these DataFrames were built from (the control).
            if set(obj) == set(train_df.columns) and len(obj["mutant"]) == n_train:
                saw_train = True
            if set(obj) == set(test_df.columns) and len(obj["mutant"]) == n_test:
                saw_test = True
            label_keys = [k for k in obj if isinstance(k, str) and k in _LABEL_KEYS]
            for k in label_keys:
                try:
                    size = len(obj[k])
                except TypeError:
                    continue
                if size == n_test and size != n_train:
                    leaks.append(f"dict with label key {k!r} of the test length")
            values = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            values = list(obj)
        else:
            values = [obj]
        for v in values[:64]:
            arr = _floats(v, n_test) if isinstance(v, np.ndarray) else None
            if arr is not None and not any(np.array_equal(arr, r) for r in _RETURNED):
                leaks.append("gc reaches a float vector of the test length")
    if not (saw_train and saw_test):
        raise RuntimeError("control failed: the search never saw the argument dicts")
    if "fitness" not in train_df.columns or len(train_df["fitness"]) != n_train:
        raise RuntimeError("control failed: the training labels are not where they should be")
    if leaks:
        raise RuntimeError("LEAK: " + "; ".join(leaks[:5]))


_honest_fit = fit_and_predict


def fit_and_predict(train_df, test_df, context):
    _hunt(train_df, test_df)
    out = _honest_fit(train_df, test_df, context)
    _RETURNED.append(np.array(out, copy=True))
    return out
"""


def test_introspection_finds_no_labels(backend: object, tiny: Variant, honest: EvalResult) -> None:
    result = evaluate(backend, tiny, tiny.initial_program + "\n" + INTROSPECTION)
    assert result.status is Status.OK, result.reason
    assert result.score == honest.score


# -- positive controls: the same probes do find leaks when run unsandboxed ------------------------

_RUN_UNSANDBOXED = """
import json, sys, types
import numpy as np
mod = types.ModuleType("candidate")
exec(compile(open(sys.argv[1]).read(), "candidate", "exec"), mod.__dict__)
driver = types.ModuleType("evobench_driver")
exec(compile(open(sys.argv[3]).read(), "evobench_driver", "exec"), driver.__dict__)
train, test, context = json.loads(open(sys.argv[2]).read())
test = {k: (np.asarray(v) if k != "mutant" else v) for k, v in test.items()}
train = {k: (np.asarray(v) if k != "mutant" else v) for k, v in train.items()}
try:
    driver.predict(mod, train, test, context)
except RuntimeError as e:
    print(str(e))
    sys.exit(3)
print("no leak")
"""


def _run_unsandboxed(tmp_path: Path, source: str, leak_labels: bool) -> tuple[int, str]:
    import json
    import subprocess
    import sys

    assay = synthetic_assays(default_registry().get("multi-evolve-tiny").scorer_params)[0]
    train = {k: (v if isinstance(v, list) else v.tolist()) for k, v in assay.train.items()}
    test = {k: (v if isinstance(v, list) else v.tolist()) for k, v in assay.test.items()}
    if leak_labels:  # what the reference evaluator handed over
        test["fitness"] = assay.truth.tolist()
    (tmp_path / "prog.py").write_text(source)
    (tmp_path / "args.json").write_text(json.dumps([train, test, assay.context]))
    (tmp_path / "run.py").write_text(_RUN_UNSANDBOXED)
    r = subprocess.run(
        [
            sys.executable,
            "run.py",
            "prog.py",
            "args.json",
            str(Path(me_scorer.__file__).parent / "inside" / "driver.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r.returncode, r.stdout + r.stderr


def test_introspection_probe_detects_a_label_leak(tmp_path: Path, tiny: Variant) -> None:
    code, out = _run_unsandboxed(tmp_path, tiny.initial_program + "\n" + INTROSPECTION, leak_labels=True)
    assert code == 3 and "LEAK" in out and "label key 'fitness'" in out, out
    code, out = _run_unsandboxed(tmp_path, tiny.initial_program + "\n" + INTROSPECTION, leak_labels=False)
    assert code == 0 and "no leak" in out, out


def test_file_probe_detects_readable_tables(tmp_path: Path, tiny: Variant, data_dir: Path) -> None:
    probe, _ = file_probe(data_dir)
    code, out = _run_unsandboxed(tmp_path, tiny.initial_program + "\n" + probe, leak_labels=False)
    assert code == 3 and "LEAK" in out and SECRET not in out and data_dir.name in out, out
