"""Typed schema of ``environments/<family>/env.toml`` and its resolution into variants."""

from __future__ import annotations

import math
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.hardware.gpu_models import model as gpu_model


class ManifestError(ValueError):
    """A manifest could not be read or does not match the schema.

    The message names the file, the key path and the reason.
    """


class Direction(StrEnum):
    """Whether larger or smaller values of a metric are better."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


class Language(StrEnum):
    """Language of candidate programs (sets the EVOLVE-BLOCK comment syntax)."""

    PYTHON = "python"
    CPP = "cpp"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricSpec(_Strict):
    """One reported metric."""

    name: str
    """Key in ``EvalResult.metrics``."""
    direction: Direction
    """Which way is better."""
    meaning: str
    """One sentence for humans: what the number measures and its unit."""


class Hardware(_Strict):
    """Resources one evaluation gets."""

    cpus: float = 1.0
    """CPU cores (Docker ``nano_cpus``; thread count hint for the local backend)."""
    memory_mb: int = 2048
    """Address-space / container memory limit of the candidate, in MiB."""
    gpu: str = ""
    """GPU model and form factor, a key of ``harness.hardware.gpu_models.MODELS`` (e.g. ``H100
    SXM``: timings of an H100 PCIe, NVL or MIG slice are not pooled with it); empty for CPU-only
    variants."""
    gpu_count: int = 0
    """Number of GPUs requested."""
    gpu_memory_gib: float | None = Field(default=None, gt=0)
    """GPU memory one evaluation needs (its trusted scorer, candidate and echo processes together),
    in GiB of the device's total as torch reports it (None: not declared; any GPU of the model
    ``gpu`` is taken to have enough). ``bench doctor --gpu`` evaluates a variant only where the
    model and this memory fit; a learning run that shares a GPU with its evaluations plans with it
    (``agents/learning/gpu_plan.py``). Never part of the content hash: it picks machines, it does
    not change scores."""
    pids: int = 64
    """Maximum number of processes the candidate may have at once."""
    output_kb: int = 64
    """Cap on kept stdout/stderr per stream, in KiB (the rest is discarded)."""
    file_mb: int = 64
    """Largest file the candidate may write, in MiB."""
    disk_mb: int = 256
    """Disk quota of the candidate, in MiB: each location it can write (its work directory,
    ``/tmp``, ``/dev/shm``) is a tmpfs of this size, so a write past it fails with "No space left
    on device" and the evaluation is the candidate's ``error``. tmpfs is memory: what it writes
    also counts towards ``memory_mb`` (keep the quota well below it)."""

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v:
            gpu_model(v)  # raises ValueError naming the known models
        return v


DEFAULT_HEADROOM = 0.25
"""Floor of u below the initial program, in units of the initial-to-target span (:class:`Progress`)."""


class Progress(_Strict):
    """Bounds of the normalised progress u = clamp((y - y_floor) / (y_target - y_floor), 0, 1).

    ``y_floor = y_init - headroom * (y_target - y_init)``: the initial program sits strictly inside
    (0, 1) (u = headroom / (1 + headroom), 0.2 by default), so a run that gets worse than where it
    started shows as a drop, and noise around the initial score never pins every run at 0. The RL
    reward of the learning agents keeps the paper's bounds (0 at ``y_init``, see
    :func:`harness.scoring.progress.progress_reward`).
    """

    y_init: float
    """Combined score of the initial program (on the public draw where the scorer draws)."""
    y_target: float
    """Combined score regarded as solved (u = 1)."""
    headroom: float | None = Field(default=None, ge=0.0, le=10.0)
    """Floor below ``y_init`` in units of the span ``y_target - y_init`` (None: ``DEFAULT_HEADROOM``).
    Larger for scores whose noise is wide against the span (kernel timings)."""

    @model_validator(mode="after")
    def _distinct(self) -> Progress:
        if self.y_init == self.y_target:
            raise ValueError("y_init and y_target must differ")
        return self

    @property
    def y_floor(self) -> float:
        """Score at which u = 0 (below ``y_init`` in the variant's direction)."""
        h = DEFAULT_HEADROOM if self.headroom is None else self.headroom
        return self.y_init - h * (self.y_target - self.y_init)

    def u(self, y: float | None) -> float:
        """Normalised progress of score ``y`` (None or non-finite: 0)."""
        if y is None or not math.isfinite(y):
            return 0.0
        return min(1.0, max(0.0, (y - self.y_floor) / (self.y_target - self.y_floor)))


class DataSource(_Strict):
    """Public data the family downloads into its cache, checked by sha256.

    Either one file (``url`` is the file, ``filename`` its name in the cache) or a set of files
    (``files`` maps paths relative to ``url`` to their sha256; they land under the cache
    directory ``filename``/).
    """

    url: str
    """Where to download it from (the file, or the base URL of ``files``)."""
    filename: str
    """Name inside the cache directory (a file, or a directory for ``files``)."""
    sha256: str = ""
    """Expected sha256 of a single file; empty means unpinned (recorded on first fetch, then enforced)."""
    files: dict[str, str] = Field(default_factory=dict)
    """For a file set: relative path -> sha256 (all pinned)."""
    license: str = ""
    """Licence of the data, as published by its source."""
    size_hint_mb: float = 0.0
    """Approximate size, for the user's information."""
    auth: Literal["", "huggingface"] = ""
    """Credentials the download needs: ``huggingface`` sends the user's token from ``HF_TOKEN`` or
    ``HUGGING_FACE_HUB_TOKEN`` (and ``url`` may be redirected with ``HF_ENDPOINT``); empty: public."""
    access: str = ""
    """How to get access to gated data (shown when the token is missing or refused)."""
    archive: Literal["", "tar.gz"] = ""
    """``tar.gz``: ``url`` is one archive (e.g. a GitHub tarball at a pinned commit) and ``files``
    are paths inside it below its single top directory; only those members are extracted, each
    sha256-checked. Empty: ``url`` is the file, or the base URL of ``files``."""

    @model_validator(mode="after")
    def _archive_has_files(self) -> DataSource:
        if self.archive and not self.files:
            raise ValueError("an archive source must list the files to extract (files = {path = sha256})")
        return self


class VariantOverride(_Strict):
    """What a variant changes relative to the family defaults."""

    description: str = ""
    """One line about this variant."""
    timeout_s: float | None = None
    """Wall-clock limit for one evaluation."""
    hardware: Hardware | None = None
    """Resources; replaces the family default entirely when given."""
    scorer: dict[str, Any] = Field(default_factory=dict)
    """Scorer parameters merged over the family's ``scorer_params``."""
    data: list[str] = Field(default_factory=list)
    """Keys of ``[data.*]`` sources this variant needs (empty: synthetic, nothing to fetch)."""
    image: str | None = None
    """Docker base recipe for this variant: ``cpu`` or ``cuda`` (``images/base-<name>``; a
    variant that requests GPUs always builds on ``base-cuda``)."""
    progress: Progress | None = None
    """Progress bounds for this variant, when they differ from the family's."""
    tiny: bool = False
    """Marks the CPU smoke-test variant of the family."""


class FamilyManifest(_Strict):
    """The ``[family]`` table plus defaults shared by all variants."""

    name: str
    """Family id, also the directory name (a Python package name, e.g. ``llm_sr``)."""
    id_prefix: str = ""
    """Prefix every variant id must start with (default: ``name``; e.g. ``llm-sr``)."""
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    """Semantic version; bump it when scores are no longer comparable."""
    description: str
    """What the task is, in one or two sentences."""
    prompt: str
    """File (relative to the family directory) with the task prompt shown to agents."""
    initial_program: str
    """File with the starting program."""
    initial_program_from: str = ""
    """``module:function`` deriving a variant's starting program from its data (e.g. KernelBench:
    the problem's ``Model`` as ``ModelNew``); it gets the :class:`Variant` and returns the program
    text, or None to keep ``initial_program``. Called lazily, so listing variants never needs data;
    it raises ``DataMissingError`` when the data are not fetched. Its module is hashed."""
    language: Language
    """Language of candidate programs."""
    entry_point: str
    """Function (Python) or executable contract (C++) the scorer calls."""
    signature: str
    """Human-readable signature of the entry point."""
    scorer: str
    """``module:Class`` of the trusted scorer inside the family package."""
    direction: Direction
    """Direction of the combined score."""
    combined: str
    """Name of the metric used as the combined score."""
    timeout_s: float = 60.0
    """Default wall-clock limit for one evaluation."""
    hardware: Hardware = Hardware()
    """Default resources."""
    scorer_params: dict[str, Any] = Field(default_factory=dict)
    """Default scorer parameters."""
    mutations: str = ""
    """``module:function`` returning the family's mutation operators (for offline baselines)."""
    image: str = "cpu"
    """Default Docker base recipe: ``cpu`` or ``cuda`` (see ``VariantOverride.image``)."""
    preload: list[str] = Field(default_factory=lambda: ["numpy", "torch"])
    """Modules the sandbox imports before loading a Python candidate (warm zygotes and cold starts)."""
    hashed_files: list[str] = Field(default_factory=list)
    """Extra files in the family directory that affect scores (data recipe, helpers)."""
    sandbox_driver: str = ""
    """Python file (relative to the family directory) of trusted, non-secret code that the sandbox
    loads next to a Python candidate; the scorer calls its functions with
    ``CandidateRuntime.call_driver`` and they receive the candidate module first. It owns any
    adapter between the wire and the declared entry point, so candidates need define only that.
    Empty: the scorer calls candidate functions directly. Hashed automatically."""
    subset_unit: str = ""
    """What the family's scorer can score a random subset of, in words (e.g. ``workload windows``,
    ``test cases``). Non-empty: ``<variant id>~subset-<seed>-<size>`` resolves to a derived variant
    whose scorer honours ``harness.envs.subset.subset_of(params)``. Empty: no subsets."""


class EnvManifest(_Strict):
    """A whole ``env.toml``."""

    family: FamilyManifest
    """The family table."""
    metrics: list[MetricSpec]
    """Metrics the scorer reports; must include the combined one."""
    progress: Progress
    """Default progress bounds."""
    variants: dict[str, VariantOverride]
    """Variant id -> overrides. Ids are global, e.g. ``eplb-tiny``."""
    data: dict[str, DataSource] = Field(default_factory=dict)
    """Downloadable data sources by key."""

    @model_validator(mode="after")
    def _consistent(self) -> EnvManifest:
        names = [m.name for m in self.metrics]
        if self.family.combined not in names:
            raise ValueError(f"family.combined {self.family.combined!r} is not among metrics {names}")
        if not self.variants:
            raise ValueError("at least one variant is required")
        prefix = self.family.id_prefix or self.family.name
        for vid, v in self.variants.items():
            if not vid.startswith(prefix):
                raise ValueError(f"variant id {vid!r} must start with the family name {prefix!r}")
            for key in v.data:
                if key not in self.data:
                    raise ValueError(f"variant {vid!r} needs data {key!r}, which has no [data.{key}] table")
        if not any(v.tiny for v in self.variants.values()):
            raise ValueError("one variant must be marked tiny = true (the CPU smoke test)")
        if self.family.sandbox_driver and self.family.language is not Language.PYTHON:
            raise ValueError("family.sandbox_driver is only supported for Python candidates")
        return self


def _format_loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def load_manifest(path: Path) -> EnvManifest:
    """Read and validate one ``env.toml``.

    Args:
        path: Path of the manifest file.

    Returns:
        The validated manifest.

    Raises:
        ManifestError: If the file is missing, is not TOML, or breaks the schema; the message
            names the file, the key path and the reason.
    """
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ManifestError(f"{path}: file not found") from e
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from e
    try:
        manifest = EnvManifest.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"key '{_format_loc(err['loc'])}': {err['msg']}" for err in e.errors())
        raise ManifestError(f"{path}: {problems}") from e
    if manifest.family.name != path.parent.name:
        raise ManifestError(
            f"{path}: key 'family.name': {manifest.family.name!r} must equal the directory name "
            f"{path.parent.name!r}"
        )
    for key in ("prompt", "initial_program", "sandbox_driver"):
        rel = getattr(manifest.family, key)
        if rel and not (path.parent / rel).is_file():
            raise ManifestError(f"{path}: key 'family.{key}': file {rel!r} does not exist")
    return manifest
