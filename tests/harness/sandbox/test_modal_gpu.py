"""Modal GPU first contact, checked against the installed ``modal`` package's own code (issue 21).

Upload list: modal uploads only the context files a ``COPY`` names (``_image._create_context_mount``
with ``extract_copy_command_patterns`` and ``FilePatternMatcher``), never empty folders. GPU
string: ``parse_gpu_config``. Stdin: ``io_streams._StreamWriterThroughServer`` refuses more than
``MAX_BUFFER_SIZE`` (2 MiB) between drains.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.envs.registry import default_registry
from harness.images.combined import base_kind, remove_context, stage_combined
from harness.sandbox.modal_backend import gpu_string
from harness.sandbox.modal_backend.sdk import _SdkProcess

modal = pytest.importorskip("modal")
GPU_VARIANTS = sorted(v.id for v in default_registry().variants() if v.hardware.gpu_count > 0)


def _uploaded(ctx: Path, dockerfile: Path) -> list[Path]:
    """The context files Modal would upload for this Dockerfile (its own selection code)."""
    from modal._utils.docker_utils import extract_copy_command_patterns
    from modal.file_pattern_matcher import FilePatternMatcher

    patterns = extract_copy_command_patterns(dockerfile.read_text().splitlines())
    match = FilePatternMatcher(*patterns)
    return [p.relative_to(ctx) for p in ctx.rglob("*") if p.is_file() and match(p.relative_to(ctx))]


def test_every_copy_source_of_gpu_images_is_uploaded() -> None:
    from modal._utils.docker_utils import extract_copy_command_patterns

    # Every GPU variant's image is the same recipe (base-cuda + env layer); ENV_ID is a build arg.
    assert {base_kind(default_registry().get(e)) for e in GPU_VARIANTS} == {"base-cuda"}
    ctx, dockerfile, args = stage_combined(default_registry().get(GPU_VARIANTS[0]))
    try:
        files = _uploaded(ctx, dockerfile)
        sources = extract_copy_command_patterns(dockerfile.read_text().splitlines())
        assert {s.rstrip("/") for s in sources} >= {"ca", "wheels", "project"}
        for source in sources:
            top = Path(source.rstrip("/"))
            assert any(top in f.parents for f in files), f"COPY {source} uploads nothing"
        assert Path("project/pyproject.toml") in files and args["ENV_ID"] == GPU_VARIANTS[0]
    finally:
        remove_context(ctx)


@pytest.mark.parametrize("env_id", GPU_VARIANTS)
def test_gpu_string_parses_and_never_upgrades(env_id: str) -> None:
    from modal._utils.function_utils import parse_gpu_config

    v = default_registry().get(env_id)
    cfg = parse_gpu_config(gpu_string(v))
    assert cfg.count == v.hardware.gpu_count
    # "H100" may be served by an H200 (Modal's GPU guide); "H100!" may not. "A100" is 40 GB.
    want = {"H100 SXM": "H100!", "H200 SXM": "H200", "A100 SXM4 80GB": "A100-80GB"}[v.hardware.gpu]
    assert cfg.gpu_type == want


def test_stdin_over_2mib_is_written_in_drained_chunks() -> None:
    from modal.io_streams import MAX_BUFFER_SIZE, _StreamWriterThroughServer, _StreamWriterThroughServerParams

    writer = _StreamWriterThroughServer(_StreamWriterThroughServerParams(object_id="sb-test", client=None))  # type: ignore[arg-type]
    sent = bytearray()

    def drain() -> None:  # the real drain ships the buffer to the server, then clears it
        sent.extend(writer._buffer)
        writer._buffer.clear()

    proc = _SdkProcess(SimpleNamespace(stdin=SimpleNamespace(write=writer.write, drain=drain)))
    job = bytes(range(256)) * (5 * MAX_BUFFER_SIZE // 256) + b"\n"  # a 10 MiB protocol line
    with pytest.raises(BufferError):
        writer.write(job)  # what the backend did before: one write, one drain
    proc.write(job)
    assert bytes(sent) == job
