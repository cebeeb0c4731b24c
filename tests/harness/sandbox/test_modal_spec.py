"""Offline checks of what the Modal backend asks of Modal, and of its protocol lines."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.envs.manifest import Hardware
from harness.envs.registry import default_registry
from harness.images.combined import combined_dockerfile, remove_context, stage_combined
from harness.inside import wire
from harness.sandbox import stdio_wire
from harness.sandbox.modal_backend import ModalBackend, ModalInfraError, gpu_string, sandbox_spec
from harness.sandbox.modal_backend.sdk import SdkModalClient, _SdkProcess, credentials_present

from .modal_fake import FakeModalClient

REPO = Path(__file__).resolve().parents[3]


def _with_hw(env_id: str, **hw: object):  # type: ignore[no-untyped-def]
    v = default_registry().get(env_id)
    return dataclasses.replace(v, hardware=Hardware(**{**v.hardware.model_dump(), **hw}))


@pytest.mark.parametrize(
    ("gpu", "count", "expected"),
    [
        ("", 0, None),
        ("H100 SXM", 1, "H100!"),
        ("H100 SXM", 2, "H100!:2"),
        ("H200 SXM", 1, "H200"),
        ("A100 SXM4 80GB", 2, "A100-80GB:2"),
        ("A100 SXM4 40GB", 1, "A100-40GB"),
    ],
)
def test_gpu_string(gpu: str, count: int, expected: str | None) -> None:
    assert gpu_string(_with_hw("selftest-tiny", gpu=gpu, gpu_count=count)) == expected


@pytest.mark.parametrize("gpu", ["H100 PCIe", "H100 NVL", "A100 PCIe 80GB"])
def test_models_modal_cannot_pin_are_refused(gpu: str) -> None:
    # Modal's plain types are SXM cards; a PCIe / NVL variant is never silently run on one.
    with pytest.raises(ValueError, match=f"needs an {gpu}; Modal offers none"):
        gpu_string(_with_hw("selftest-tiny", gpu=gpu, gpu_count=1))


def test_gpu_count_without_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="names no GPU type"):
        gpu_string(_with_hw("selftest-tiny", gpu="", gpu_count=1))


def test_spec_resources_timeouts_tags() -> None:
    v = _with_hw("eplb-tiny", cpus=2.0, memory_mb=4096, gpu="H100 SXM", gpu_count=1, disk_mb=300)
    warm = sandbox_spec(v, slot=3, backend_id="b1", run_id="r1", warm=True, idle_timeout_s=120)
    cold = sandbox_spec(v, slot=0, backend_id="b1", warm=False)
    assert warm.command[:5] == ("python", "-P", "-m", "harness.sandbox.container_main", "--stdio")
    assert ("--slot", "3") == warm.command[5:7] and warm.command[-2:] == ("--prewarm", "eplb-tiny")
    assert warm.gpu == "H100!" and warm.cpu == 2.0 and warm.memory_mb == 4096 + 1536
    assert warm.disk_mb == 300  # the candidate's disk quota (sized by the in-sandbox server)
    assert warm.block_network and cold.block_network
    assert dict(warm.tags) == {
        "evobench": "1",
        "evobench.backend": "b1",
        "evobench.run": "r1",
        "evobench.variant": "eplb-tiny",
    }
    assert "evobench.run" not in dict(cold.tags)
    # A cold sandbox lives for one evaluation; a warm one for many, capped at Modal's 24 h.
    assert v.timeout_s < cold.timeout_s < warm.timeout_s <= 24 * 3600
    assert cold.idle_timeout_s >= v.timeout_s and warm.idle_timeout_s >= 120


def test_combined_dockerfile_joins_base_and_env_layer() -> None:
    text = combined_dockerfile("base-cuda")
    assert text.count("FROM ") == 1 and "python:3.11-slim-bookworm" in text
    assert "python -m harness.images.fetch_data" in text and "EVOBENCH_ISOLATION=container" in text
    ctx, dockerfile, args = stage_combined(default_registry().get("eplb-tiny"))
    try:
        assert dockerfile.parent == ctx and (ctx / "project" / "harness").is_dir()
        assert args["ENV_ID"] == "eplb-tiny" and args["BASE_IMAGE"] == "python:3.11-slim"
    finally:
        remove_context(ctx)


def test_real_modal_objects_build_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented constructors accept what the backend passes (no network needed to define them)."""
    modal = pytest.importorskip("modal")
    ctx, dockerfile, args = stage_combined(default_registry().get("eplb-tiny"))
    try:
        image = modal.Image.from_dockerfile(str(dockerfile), context_dir=str(ctx), build_args=args)
        assert image is not None
    finally:
        remove_context(ctx)


def test_no_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("modal")
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    if credentials_present():
        pytest.skip("Modal credentials are configured on this machine")
    with pytest.raises(ModalInfraError, match="modal token new"):
        ModalBackend(workers=1, client=SdkModalClient())
    with pytest.raises(ModalInfraError, match="modal token new"):
        ModalBackend(workers=1, client=FakeModalClient(credentials=False))


def test_cli_run_without_credentials_exits_clearly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env["MODAL_CONFIG_PATH"] = str(tmp_path / "none.toml")
    p = subprocess.run(
        [sys.executable, "-m", "evobench.cli.main", "run", "--agent", "random-search", "--env", "eplb-tiny",
         "--backend", "modal", "--max-evaluations", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert "modal token new" in p.stderr or "evobench[modal]" in p.stderr
    assert "Traceback" not in p.stderr
    assert not list(tmp_path.glob("results/*/run.json")), "a refused run must leave no run directory"


def test_cleanup_ends_only_tagged_sandboxes(tmp_path: Path) -> None:
    from harness.sandbox.modal_backend.cleanup import cleanup

    class _Sb:
        def __init__(self, tags: dict[str, str]) -> None:
            self.tags, self.ended = tags, False

        def terminate(self) -> None:
            self.ended = True

    class _Client:
        def __init__(self) -> None:
            self.all = [_Sb({"evobench": "1", "evobench.run": r}) for r in ("a", "b")]

        def check_credentials(self) -> None:
            pass

        def list_sandboxes(self, tags: dict[str, str]) -> list[_Sb]:
            return [s for s in self.all if all(s.tags.get(k) == v for k, v in tags.items())]

    c = _Client()
    assert cleanup(c, "a") == 1 and [s.ended for s in c.all] == [True, False]  # type: ignore[arg-type]
    assert cleanup(c) == 2  # type: ignore[arg-type]


def test_cli_modal_cleanup_without_credentials(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env["MODAL_CONFIG_PATH"] = str(tmp_path / "none.toml")
    p = subprocess.run(
        [sys.executable, "-m", "evobench.cli.main", "modal", "cleanup"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2 and "modal token new" in p.stderr, p.stderr


class _ChunkedSandbox:
    """Just enough of ``modal.Sandbox`` to feed ``_SdkProcess`` a stream in given chunks."""

    object_id = "sb-test"

    def __init__(self, chunks: list[str]) -> None:
        self.stdout = chunks


_MSG = st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=20), max_size=4)


@given(
    st.lists(_MSG, max_size=5),
    st.lists(st.integers(1, 50), min_size=1, max_size=10),
    st.booleans(),
)
def test_protocol_lines_survive_any_chunking(msgs: list[dict], cuts: list[int], noise: bool) -> None:
    stream = "".join(
        ("library chatter\n" if noise else "") + stdio_wire.encode_line(m).decode() for m in msgs
    )
    chunks, i, k = [], 0, 0
    while i < len(stream):
        step = cuts[k % len(cuts)]
        chunks.append(stream[i : i + step])
        i, k = i + step, k + 1
    lines = _SdkProcess(_ChunkedSandbox(chunks)).lines()
    got = [stdio_wire.decode_line(ln) for ln in lines if stdio_wire.is_protocol_line(ln)]
    assert got == msgs


@pytest.mark.parametrize("line", ["EVB1:!!!notbase64", "EVB1:" + "A" * 7, "hello", ""])
def test_malformed_protocol_lines_raise(line: str) -> None:
    with pytest.raises(wire.WireError):
        stdio_wire.decode_line(line)


def test_stdio_server_answers_and_ignores_noise() -> None:
    """The in-sandbox server's --stdio mode, run here as a plain process."""
    src = default_registry().get("selftest-tiny").initial_program
    req = {"op": "evaluate", "env_id": "selftest-tiny", "source": src, "mode": "cold"}
    stdin = b"noise line\n" + stdio_wire.encode_line({"op": "bogus"}) + stdio_wire.encode_line(req)
    p = subprocess.run(
        [sys.executable, "-m", "harness.sandbox.container_main", "--stdio", "--slot", "0"],
        input=stdin, capture_output=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    msgs = [stdio_wire.decode_line(ln) for ln in p.stdout.splitlines() if stdio_wire.is_protocol_line(ln)]
    assert [m["type"] for m in msgs] == ["ready", "error", "result"], p.stderr.decode()[-2000:]
    assert '"status":"ok"' in msgs[2]["result"].replace(" ", "")


def test_the_trusted_server_gets_the_heldout_key_and_no_repr_shows_it(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.envs.registry import default_registry
    from harness.envs.secret import KEY_ENV, installation_key
    from harness.sandbox.modal_backend.spec import sandbox_spec

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path))
    monkeypatch.delenv(KEY_ENV, raising=False)
    spec = sandbox_spec(default_registry().get("eplb-tiny"), slot=0, backend_id="b", warm=True)
    key = installation_key().hex()
    assert dict(spec.env) == {KEY_ENV: key}  # local, Docker and Modal draw the same held-out data
    assert key not in repr(spec)
