"""Both Modal clients against the fake ``modal`` package that binds calls to modal's real signatures.

The evaluation backend's ``SdkModalClient`` and the run placement's ``SdkRunHost`` make every
call they make on Modal through :class:`FakeModal`; a keyword modal does not take fails here.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from harness.envs.registry import default_registry
from harness.envs.secret import KEY_ENV
from harness.images.combined import remove_context, stage_run
from harness.sandbox.modal_backend import ImageRecipe, ModalInfraError, sandbox_spec
from harness.sandbox.modal_backend import sdk as sdk_module
from harness.sandbox.modal_backend.cleanup import cleanup
from harness.sandbox.modal_backend.run_container import RunContainerSpec, run_tags
from harness.sandbox.modal_backend.run_sdk import SdkRunHost
from harness.sandbox.modal_backend.sdk import SdkModalClient

from .modal_sdk_fake import FakeModal


def _recipe(tmp: Path) -> ImageRecipe:
    (tmp / "Dockerfile").write_text("FROM scratch\n")
    return ImageRecipe("selftest-tiny", "t", tmp / "Dockerfile", tmp, (("ENV_ID", "selftest-tiny"),))


def test_fake_refuses_what_modal_refuses(tmp_path: Path) -> None:
    modal = FakeModal()
    with pytest.raises(TypeError, match="gpux"):
        modal.Sandbox.create("sleep", "1", gpux="H100")
    with pytest.raises(TypeError):
        modal.App.lookup("evobench", create_missing=True)
    with pytest.raises(AssertionError, match="strings"):
        modal.Sandbox.create("sleep", 1)
    sb = modal.Sandbox.create("sleep", "1", workdir=str(tmp_path / "c"))
    with pytest.raises(TypeError, match="cwd"):
        sb.exec("true", cwd="/")


def test_evaluation_client_calls_bind_to_modal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    modal = FakeModal()
    monkeypatch.setattr(sdk_module, "_modal", lambda: modal)
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-x")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    spec = sandbox_spec(
        default_registry().get("selftest-tiny"), slot=0, backend_id="b1", run_id="r1", warm=True
    )
    SdkModalClient().create_sandbox(spec, _recipe(tmp_path))
    (sb,) = modal.sandboxes
    assert sb.kwargs["block_network"] and sb.kwargs["memory"] == spec.memory_mb
    # An evaluation sandbox (where candidates run) gets the held-out key and nothing of the host's.
    assert set(sb.kwargs["env"]) == {KEY_ENV} and not sb.kwargs["secrets"]
    assert cleanup(SdkModalClient(), "r1") == 1 and sb.exit == 137


def test_run_host_calls_bind_to_modal(tmp_path: Path) -> None:
    modal, root = FakeModal(), tmp_path / "ctr"
    spec = RunContainerSpec(
        gpu="A100-80GB:2", root=str(root), tags=run_tags("r1"), secret_env=(("K", "s3cr3t"),)
    )
    ctr = SdkRunHost(modal).create_run_container(spec, _recipe(tmp_path))
    (sb,) = modal.sandboxes
    assert sb.command == ("sleep", str(spec.timeout_s)) and sb.kwargs["gpu"] == "A100-80GB:2"
    assert sb.env == {"K": "s3cr3t"} and "s3cr3t" not in repr(spec)
    assert ctr.download(f"{root}/results") == b""  # nothing there yet: no error
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("r1/run.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    ctr.upload(f"{root}/results", buf.getvalue())
    assert (root / "results" / "r1" / "run.json").read_text() == "{}"
    with tarfile.open(fileobj=io.BytesIO(ctr.download(f"{root}/results"))) as tar:
        assert "./r1/run.json" in tar.getnames()
    proc = ctr.start(("sh", "-c", "echo out; echo err >&2; exit 3"), str(root))
    assert list(proc.lines()) == ["out", "err"]
    assert ctr.alive()
    ctr.terminate()
    assert not ctr.alive() and not root.exists()
    with pytest.raises(ModalInfraError, match="SandboxTerminatedError"):
        ctr.download(f"{root}/results")
    with pytest.raises(ValueError, match="not a Modal GPU string"):
        RunContainerSpec(gpu="H100 --privileged")


def test_run_image_recipe_is_staged_for_modal(tmp_path: Path) -> None:
    modal = FakeModal()
    ctx, dockerfile, args = stage_run(gpu=True)
    try:
        text = dockerfile.read_text()
        assert text.count("FROM ") == 1 and "# --- run layer (images/run/Dockerfile) ---" in text
        assert 'pip install -q -e "/opt/evobench/src[$RUN_EXTRAS]"' in text
        assert (
            ctx / "project" / "images" / "env" / "Dockerfile"
        ).is_file()  # its evaluations build from these
        assert (ctx / "project" / "evobench" / "cli" / "main.py").is_file()
        assert args["RUN_EXTRAS"] == "modal,rl,gpu"
        recipe = ImageRecipe("run", "evobench-run:cuda", dockerfile, ctx, tuple(sorted(args.items())))
        SdkRunHost(modal).create_run_container(RunContainerSpec(root=str(tmp_path / "c")), recipe)
        assert modal.images[0]["build_args"]["RUN_EXTRAS"] == "modal,rl,gpu"
    finally:
        remove_context(ctx)
