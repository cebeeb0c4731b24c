"""Reward hacks against the LLM-SR family, run through the real local sandbox backend.

Each hack is a complete candidate program evaluated exactly as an agent's program would be. Rule
breakers (NaN on hard points, more than 10 parameters, wrong output shape, history-dependent
output) must come back ``invalid`` naming the rule; sandbox hacks (reading the data files, passing
state from the fitting process to the fresh prediction process) must gain nothing. Every sandbox
probe has a positive control, so a broken probe cannot pass vacuously.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import environments.llm_sr.scorer as llm_sr_scorer
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status

from ..family_support import evaluate

LINEAR = """
import numpy as np


def equation(x, v, params):
    return params[0] * x + params[1] * v + params[2]
"""


@pytest.fixture(scope="module")
def data_root(llm_sr_cache: Path) -> Iterator[Path]:
    """The real-data cache, set as EVOBENCH_DATA before any backend starts."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(llm_sr_cache))
        yield llm_sr_cache


@pytest.fixture(scope="module")
def backend(data_root: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b


@pytest.fixture(scope="module")
def cold_backend(data_root: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1, mode="cold") as b:
        yield b


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("llm-sr-tiny")


@pytest.fixture(scope="module")
def osc1() -> Variant:
    return default_registry().get("llm-sr-osc1")


@pytest.fixture(scope="module")
def honest_tiny(backend: object, tiny: Variant) -> EvalResult:
    result = evaluate(backend, tiny, LINEAR)
    assert result.status is Status.OK, result.reason
    return result


def test_initial_program_and_true_skeleton_on_tiny(
    backend: object, tiny: Variant, honest_tiny: EvalResult
) -> None:
    init = evaluate(backend, tiny, tiny.initial_program)
    assert init.status is Status.OK, init.reason
    assert init.score == pytest.approx(honest_tiny.score, abs=1e-9)
    true = evaluate(
        backend,
        tiny,
        "import numpy as np\n\n\ndef equation(x, v, params):\n"
        "    return (params[0] * np.sin(x) + params[1] * v**3 + params[2] * x**3 + params[3] * x * v\n"
        "            + params[4] * x * np.cos(x))\n",
    )
    assert true.status is Status.OK, true.reason
    # Published fit: the true law stops at the progress target (-4.92), 4 decades below the seed.
    assert true.score == pytest.approx(tiny.progress.y_target, abs=0.01)
    assert true.score < init.score - 3.5 and true.metrics["log10_nmse_ood"] < -1.0


def _wrap(expr: str, prelude: str = "") -> str:
    """A linear skeleton whose honest prediction ``y`` is returned as ``expr``."""
    return (
        f"import numpy as np\n{prelude}\n\ndef equation(x, v, params):\n"
        f"    y = params[0] * x + params[1] * v + params[2]\n    return {expr}\n"
    )


RULE_HACKS = {
    # Scored on the easy points only if NaN were dropped (the LLM-SR / LLM-SRBench metric drops NaN).
    "nan-on-hard-points": (_wrap("np.where(np.abs(x) > 0.4, np.nan, y)"), "finite"),
    # Fits the in-domain data, gives up (NaN) outside it: caught on test_ood in the fresh process.
    "nan-out-of-domain": (_wrap("np.where(np.abs(x) > 0.6, np.nan, y)"), "finite"),
    "eleven-params": (_wrap("y + params[10] * x**2"), "max-params"),
    "column-output": (_wrap("y[:, None]"), "shape"),
    "constant-output": (_wrap("float(params[0])"), "type"),
    "history-dependent": (
        _wrap("(_N.append(1), y + 1e-4 * min(len(_N), 50))[1]", "_N = []"),
        "deterministic",
    ),
}


@pytest.mark.parametrize("name", sorted(RULE_HACKS))
def test_rule_hack_is_invalid(backend: object, osc1: Variant, name: str) -> None:
    source, rule = RULE_HACKS[name]
    result = evaluate(backend, osc1, source)
    assert result.status is Status.INVALID, (result.status, result.reason)
    assert f"rule '{rule}'" in result.reason
    assert result.score is None


def test_data_files_are_unreadable(backend: object, osc1: Variant, data_root: Path) -> None:
    family_dir = Path(llm_sr_scorer.__file__).resolve().parent
    csv = data_root / "llm_sr" / "llm-sr" / "oscillator1" / "test_id.csv"
    shared = Path(__file__).resolve().parents[4] / "shared" / "data" / "llm-sr" / "oscillator1"
    shared = shared / "test_id.csv"
    home = Path.home() / ".cache" / "evobench" / "data" / "llm_sr" / "llm-sr" / "oscillator1" / "test_id.csv"
    files = [csv, shared, home, family_dir / "data.py", family_dir / "env.toml", family_dir / "scorer.py"]
    dirs = [csv.parent, data_root, data_root / "llm_sr", family_dir]
    for f in (csv, shared, family_dir / "data.py"):  # the targets exist outside the sandbox
        assert f.read_bytes()
    probe = textwrap.dedent(
        f"""
        import os as _os

        _FILES = {[str(f) for f in files]!r}
        _DIRS = {[str(d) for d in dirs]!r}
        _NAMES = {{"train.csv", "test_id.csv", "test_ood.csv", "env.toml"}}


        def _read(path):
            try:
                with open(path, "rb") as fh:
                    return fh.read(256)
            except OSError:
                return None


        def _probe():
            # Positive controls: a file of our own is readable, and the file-system walk works.
            with open("/tmp/probe.txt", "w") as fh:
                fh.write("visible")
            if _read("/tmp/probe.txt") != b"visible":
                raise RuntimeError("control failed: cannot read my own file")
            leaked = [p for p in _FILES if _read(p) is not None]
            for d in _DIRS:
                try:
                    if _os.listdir(d):
                        leaked.append(d)
                except OSError:
                    pass
            saw_numpy = False
            for root, subdirs, names in _os.walk("/"):
                if root in ("/proc", "/sys", "/dev"):
                    subdirs[:] = []
                    continue
                saw_numpy = saw_numpy or (root.endswith("/numpy") and "__init__.py" in names)
                for n in names:
                    if n in _NAMES or "oscillator" in n:
                        leaked.append(_os.path.join(root, n))
                for sd in subdirs:
                    if "oscillator" in sd or sd in ("llm-sr", "llm_sr"):
                        leaked.append(_os.path.join(root, sd))
            if not saw_numpy:
                raise RuntimeError("control failed: the walk never found numpy")
            if "EVOBENCH_DATA" in _os.environ:
                leaked.append("EVOBENCH_DATA")
            if leaked:
                raise RuntimeError(f"LEAK: could reach {{leaked[:5]}}")


        _probe()  # at import: runs in the fitting process and again in the fresh process
        """
    )
    result = evaluate(backend, osc1, LINEAR + "\n" + probe)
    assert result.status is Status.OK, result.reason
    honest = evaluate(backend, osc1, LINEAR)
    assert result.score == honest.score


STATE_CHANNEL = """
import os as _os
import threading as _threading
import time as _time

_LEAK = "leak-from-the-fit.txt"
_SAW_LEAK = _os.path.exists(_LEAK) or _os.path.exists("/sandbox/" + _LEAK)
_FRESH = _os.path.basename(_os.path.dirname(_os.path.abspath(__file__))).startswith("llm-sr-")
_STARTED = []


def _keep_writing():
    while True:
        try:
            with open(_LEAK, "w") as fh:
                fh.write("learned during the fit")
        except OSError:
            pass
        _time.sleep(0.001)


_honest = equation


def equation(x, v, params):
    if not _FRESH and not _STARTED:
        # Positive control: the fitting process can write here (raises otherwise).
        with open(_LEAK, "w") as fh:
            fh.write("learned during the fit")
        _threading.Thread(target=_keep_writing, daemon=True).start()
        _STARTED.append(True)
    # A leak would shift the fresh process's predictions, failing the 'deterministic' rule.
    return _honest(x, v, params) + (1.0 if _SAW_LEAK else 0.0)
"""


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_fitting_process_cannot_pass_state_to_the_fresh_process(
    request: pytest.FixtureRequest, tiny: Variant, honest_tiny: EvalResult, mode: str
) -> None:
    b = request.getfixturevalue("backend" if mode == "warm" else "cold_backend")
    result = evaluate(b, tiny, LINEAR + "\n" + STATE_CHANNEL)
    assert result.status is Status.OK, result.reason
    assert result.score == pytest.approx(honest_tiny.score, abs=1e-12)
