"""Discovery of environment families and resolution of variant ids into typed specs."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from harness.envs.subset import (
    PARAM_KEY,
    QUICK_KEY,
    QUICK_MARK,
    QUICK_SUPPORT_KEY,
    SubsetRequest,
    split_quick,
    subset_of,
)

from .external import external_roots, family_manifests
from .manifest import (
    DataSource,
    Direction,
    EnvManifest,
    Hardware,
    Language,
    ManifestError,
    MetricSpec,
    Progress,
    load_manifest,
)
from .refcheck import EnvironmentImportError, check_references, module_file


class UnknownIdError(KeyError):
    """An environment or agent id does not exist; the message lists close matches."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown id"


class SubsetIdError(UnknownIdError, ValueError):
    """A derived id (``<id>~subset-<seed>-<size>``, ``<id>~quick``) is malformed or not offered.

    Both an :class:`UnknownIdError` (so the CLI reports it like any bad id) and a ``ValueError``.
    """


def unknown_id_message(kind: str, given: str, known: list[str]) -> str:
    """Build the 'unknown id' message with close matches.

    Args:
        kind: What was looked up (``environment``, ``agent``).
        given: The id the user typed.
        known: All valid ids.

    Returns:
        A one-line message naming the closest ids, or all ids when none is close.
    """
    close = difflib.get_close_matches(given, known, n=4, cutoff=0.5)
    if not close:
        close = [k for k in known if given in k or k in given][:4]
    hint = f"did you mean: {', '.join(close)}?" if close else f"known: {', '.join(sorted(known))}"
    return f"unknown {kind} {given!r}; {hint}"


@dataclass(frozen=True)
class Variant:
    """A fully resolved environment variant: everything an evaluation needs to know."""

    id: str
    """Variant id, e.g. ``eplb-tiny``."""
    family: str
    """Family name, e.g. ``eplb``."""
    version: str
    """Family semantic version."""
    description: str
    """Family description plus the variant's own line."""
    prompt: str
    """Task prompt text shown to agents."""
    default_program: str
    """Text of the family's ``initial_program`` file (see :attr:`initial_program`)."""
    initial_program_name: str
    """File name of the starting program (its suffix tells the language)."""
    language: Language
    """Language of candidate programs."""
    entry_point: str
    """Function or executable contract called by the scorer."""
    signature: str
    """Human-readable signature of the entry point."""
    scorer_ref: str
    """``module:Class`` of the trusted scorer, relative to the family package."""
    direction: Direction
    """Direction of the combined score."""
    combined: str
    """Name of the combined metric."""
    metrics: tuple[MetricSpec, ...]
    """Reported metrics."""
    timeout_s: float
    """Wall-clock limit of one evaluation."""
    hardware: Hardware
    """Resources of one evaluation."""
    scorer_params: dict[str, Any]
    """Merged scorer parameters."""
    data: tuple[tuple[str, DataSource], ...]
    """Data sources this variant needs, by key."""
    image: str
    """Docker image recipe name."""
    progress: Progress
    """Progress bounds."""
    tiny: bool
    """Whether this is the family's CPU smoke-test variant."""
    mutations_ref: str
    """``module:function`` giving mutation operators, or empty."""
    preload: tuple[str, ...]
    """Modules imported in the sandbox before a Python candidate is loaded."""
    sandbox_driver: str
    """Source text of the family's sandbox driver (loaded next to the candidate), or empty."""
    family_dir: Path
    """Directory of the family."""
    hash: str
    """Content hash (16 hex chars) of everything that can change this variant's scores."""
    initial_program_from: str = ""
    """``module:function`` deriving the starting program from the variant's data, or empty."""
    subset_unit: str = ""
    """What the scorer can score a random subset of (manifest ``family.subset_unit``); empty: none."""
    derived_from: tuple[str, str] | None = None
    """``(id, hash)`` of the manifest variant a subset variant derives from; None for the others."""

    @property
    def initial_program(self) -> str:
        """Text of the starting program: the family hook's (from fetched data), else the family file.

        Raises:
            DataMissingError: The hook needs data that has not been fetched (the message names
                ``bench data fetch <family>``).
        """
        if self.initial_program_from:
            derived = self.load_attr(self.initial_program_from)(self)
            if derived is not None:
                return str(derived)
        return self.default_program

    @property
    def base_id(self) -> str:
        """Id of the manifest variant this one derives from (``id`` itself unless it is a subset)."""
        return self.derived_from[0] if self.derived_from else self.id

    @property
    def base_hash(self) -> str:
        """Content hash of the base variant (``hash`` unless it is a subset); names its image."""
        return self.derived_from[1] if self.derived_from else self.hash

    @property
    def subset(self) -> SubsetRequest | None:
        """The subset this variant scores on, or None for a full evaluation."""
        return subset_of(self.scorer_params)

    def base(self) -> Variant:
        """The manifest variant this one derives from (``self`` unless it is a subset variant)."""
        if self.derived_from is None:
            return self
        params = {k: v for k, v in self.scorer_params.items() if k not in (PARAM_KEY, QUICK_KEY)}
        return replace(self, id=self.base_id, hash=self.base_hash, scorer_params=params, derived_from=None)

    @property
    def maximize(self) -> bool:
        """Whether a larger combined score is better."""
        return self.direction is Direction.MAXIMIZE

    def load_attr(self, ref: str) -> Any:
        """Import ``module:attr`` from this family's package (trusted side only).

        Raises:
            EnvironmentImportError: If the module does not import (missing, a syntax error, an
                exception at import) or lacks the attribute; the message names the family file.
        """
        module_name, _, attr = ref.partition(":")
        where = module_file(self.family_dir, module_name) or self.family_dir / f"{module_name}.py"
        try:
            module = importlib.import_module(f"{_package_for(self.family_dir)}.{module_name}")
        except Exception as e:  # noqa: BLE001 - any failure importing family code is the family's
            raise EnvironmentImportError(
                f"environment error: family {self.family}: {ref!r} does not import ({where}): "
                f"{type(e).__name__}: {e}"
            ) from e
        try:
            return getattr(module, attr)
        except AttributeError as e:
            raise EnvironmentImportError(
                f"environment error: family {self.family}: {ref!r}: {where} defines no {attr!r}"
            ) from e


def _package_for(family_dir: Path) -> str:
    """Import name of a family's package (``environments.<family>`` when installed).

    A family under another environments root is imported under a private parent package, so a
    backend built with ``env_root`` runs that root's own scorer code.
    """
    family_dir = family_dir.resolve()
    root = family_dir.parent
    if root == environments_root():
        return f"environments.{family_dir.name}"
    parent = "_evobench_envs_" + hashlib.sha256(str(root).encode()).hexdigest()[:12]
    if parent not in sys.modules:
        spec = importlib.util.spec_from_loader(parent, loader=None, is_package=True)
        assert spec is not None
        pkg = importlib.util.module_from_spec(spec)
        pkg.__path__ = [str(root)]
        sys.modules[parent] = pkg
    return f"{parent}.{family_dir.name}"


def environments_root() -> Path:
    """Directory holding the environment families (the ``environments`` package).

    Found by path, not imported: the harness sits below the environments and only loads them
    as data (:meth:`Variant.load`).

    Raises:
        ModuleNotFoundError: If no ``environments`` package is installed beside the harness.
    """
    spec = importlib.util.find_spec("environments")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("no 'environments' package is installed beside the harness")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _content_hash(manifest_bytes: bytes, resolved: dict[str, Any], family_dir: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    h.update(manifest_bytes)
    h.update(json.dumps(resolved, sort_keys=True, default=str).encode())
    for rel in sorted(set(files)):
        p = family_dir / rel
        h.update(rel.encode())
        h.update(p.read_bytes() if p.is_file() else b"<missing>")
    return h.hexdigest()[:16]


def _resolve(manifest: EnvManifest, manifest_path: Path) -> list[Variant]:
    fam = manifest.family
    family_dir = manifest_path.parent
    refs = (fam.scorer, fam.mutations, fam.initial_program_from)
    module_files = [f"{ref.partition(':')[0]}.py" for ref in refs if ref]
    driver = [fam.sandbox_driver] if fam.sandbox_driver else []
    hashed = [fam.prompt, fam.initial_program, *module_files, *driver, *fam.hashed_files]
    raw = manifest_path.read_bytes()
    out = []
    for vid, ov in manifest.variants.items():
        params = {**fam.scorer_params, **ov.scorer}
        data = tuple((k, manifest.data[k]) for k in ov.data)
        timeout_s = float(ov.timeout_s if ov.timeout_s is not None else fam.timeout_s)
        resolved = {
            "id": vid,
            "timeout_s": timeout_s,
            # gpu_memory_gib picks machines, never how a variant scores; exclude_none: fields added
            # later with a None default leave older variants' hashes alone
            "hardware": (ov.hardware or fam.hardware).model_dump(
                exclude_none=True, exclude={"gpu_memory_gib"}
            ),
            "params": params,
            "data": [d.model_dump() for _, d in data],
            "progress": (ov.progress or manifest.progress).model_dump(exclude_none=True),
        }
        out.append(
            Variant(
                id=vid,
                family=fam.name,
                version=fam.version,
                description=f"{fam.description} {ov.description}".strip(),
                prompt=(family_dir / fam.prompt).read_text(encoding="utf-8"),
                default_program=(family_dir / fam.initial_program).read_text(encoding="utf-8"),
                initial_program_name=fam.initial_program,
                language=fam.language,
                entry_point=fam.entry_point,
                signature=fam.signature,
                scorer_ref=fam.scorer,
                direction=fam.direction,
                combined=fam.combined,
                metrics=tuple(manifest.metrics),
                timeout_s=timeout_s,
                hardware=ov.hardware or fam.hardware,
                scorer_params=params,
                data=data,
                image=ov.image or fam.image,
                progress=ov.progress or manifest.progress,
                tiny=ov.tiny,
                mutations_ref=fam.mutations,
                preload=tuple(fam.preload),
                sandbox_driver=(
                    (family_dir / fam.sandbox_driver).read_text(encoding="utf-8")
                    if fam.sandbox_driver
                    else ""
                ),
                family_dir=family_dir,
                hash=_content_hash(raw, resolved, family_dir, hashed),
                initial_program_from=fam.initial_program_from,
                subset_unit=fam.subset_unit,
            )
        )
    return out


def derive_subset(base: Variant, request: SubsetRequest) -> Variant:
    """The variant that scores ``base`` on the random subset ``request`` of its units.

    Its id is ``base.id`` plus the request's suffix, its scorer parameters gain ``subset``, and its
    hash is derived from the base hash and the suffix (results on a subset never mix with full
    ones); everything else, the image included (``base_id`` / ``base_hash``), is the base's.

    Raises:
        SubsetIdError: If the family declares no ``subset_unit``, or ``base`` is itself derived.
    """
    if base.derived_from is not None:
        raise SubsetIdError(f"{base.id!r} is already a subset variant; derive from {base.base_id!r}")
    if not base.subset_unit:
        raise SubsetIdError(
            f"environment {base.id!r}: family {base.family!r} cannot score subsets "
            "(its env.toml sets no family.subset_unit)"
        )
    suffix = request.to_id_suffix()
    return replace(
        base,
        id=base.id + suffix,
        scorer_params={**base.scorer_params, PARAM_KEY: request.to_params()},
        hash=hashlib.sha256(f"{base.hash}{suffix}".encode()).hexdigest()[:16],
        derived_from=(base.id, base.hash),
    )


def derive_quick(base: Variant) -> Variant:
    """The reduced mode of ``base`` (``<id>~quick``): its tests plus a few timed calls per benchmark.

    Offered by families whose scorer parameters set ``quick_timed_calls`` (the GPU kernel
    families). The derived variant's scorer parameters gain ``quick = true``, its id the suffix and
    its hash is derived from the base's, so its rows are never pooled or ranked with full ones.

    Raises:
        SubsetIdError: If the family has no reduced mode, or ``base`` is itself derived.
    """
    if base.derived_from is not None:
        raise SubsetIdError(f"{base.id!r} is already derived; use {base.base_id + QUICK_MARK!r}")
    if QUICK_SUPPORT_KEY not in base.scorer_params:
        raise SubsetIdError(
            f"environment {base.id!r}: family {base.family!r} has no reduced mode "
            f"(its scorer parameters set no {QUICK_SUPPORT_KEY})"
        )
    return replace(
        base,
        id=base.id + QUICK_MARK,
        scorer_params={**base.scorer_params, QUICK_KEY: True},
        hash=hashlib.sha256(f"{base.hash}{QUICK_MARK}".encode()).hexdigest()[:16],
        derived_from=(base.id, base.hash),
    )


class Registry:
    """All environment variants found under one environments directory."""

    def __init__(
        self, root: Path | None = None, *, strict: bool = True, extra_roots: Sequence[Path] = ()
    ) -> None:
        """Load every ``<family>/env.toml`` under ``root``, then under each of ``extra_roots``.

        Args:
            root: Directory of families; defaults to the installed ``environments`` package.
            strict: Raise on the first malformed manifest. When False, a broken family is kept in
                :attr:`errors` and only its own ids fail, so one bad manifest does not take every
                other environment down.
            extra_roots: More roots (directories of family folders, or family folders), loaded
                after ``root``; a family name, id prefix or variant id already defined is refused.

        Raises:
            ManifestError: If (strict) any manifest is malformed, references code that is not
                there, or defines a family or variant id that an earlier manifest defines.
        """
        self.root = root or environments_root()
        self.roots: tuple[Path, ...] = (self.root, *(r for r in extra_roots if r != self.root))
        """Every root searched, the built-in (or given) one first."""
        self._variants: dict[str, Variant] = {}
        self._prefixes: dict[str, str] = {}
        self._origin: dict[str, Path] = {}  # family name, id prefix or variant id -> its manifest
        self.missing_roots = tuple(r for r in self.roots if not r.is_dir())
        """Roots that are not directories (a typo in ``EVOBENCH_ENV_PATH``): named by unknown ids."""
        self.errors: dict[str, ManifestError] = {}
        """Family directory name -> why its manifest could not be loaded (non-strict mode)."""
        manifests = [m for r in self.roots for m in family_manifests(r)]
        for manifest_path in dict.fromkeys(manifests):  # a family reached by two roots loads once
            try:
                manifest = load_manifest(manifest_path)
                check_references(manifest, manifest_path)
                variants = _resolve(manifest, manifest_path)
                self._check_new(manifest, variants, manifest_path)
            except (ManifestError, OSError) as e:
                err = e if isinstance(e, ManifestError) else ManifestError(f"{manifest_path}: {e}")
                if strict:
                    raise err from e
                self.errors.setdefault(manifest_path.parent.name, err)
                continue
            fam = manifest.family
            if fam.id_prefix:
                self._prefixes[fam.id_prefix] = fam.name
            for key in (fam.name, fam.id_prefix, *(v.id for v in variants)):
                self._origin.setdefault(key, manifest_path)
            for v in variants:
                self._variants[v.id] = v

    def _check_new(self, manifest: EnvManifest, variants: list[Variant], path: Path) -> None:
        """Refuse a family whose name, id prefix or variant ids another manifest already defines.

        Raises:
            ManifestError: Naming both manifests.
        """
        fam = manifest.family
        taken = [("family", fam.name)] + ([("id prefix", fam.id_prefix)] if fam.id_prefix else [])
        taken += [("variant id", v.id) for v in variants]
        for what, key in taken:
            other = self._origin.get(key)
            if other is not None and other != path:
                raise ManifestError(f"{path}: {what} {key!r} is already defined by {other}")

    def ids(self) -> list[str]:
        """All variant ids, sorted."""
        return sorted(self._variants)

    def families(self) -> list[str]:
        """All family names, sorted."""
        return sorted({v.family for v in self._variants.values()})

    def variants(self, family: str | None = None) -> list[Variant]:
        """Variants, optionally of one family, sorted by id."""
        return [self._variants[i] for i in self.ids() if family is None or self._variants[i].family == family]

    def get(self, env_id: str) -> Variant:
        """Resolve a variant id or a derived one (``<id>~subset-<seed>-<size>``, ``<id>~quick``).

        ``~quick`` is a kernel family's reduced mode (:func:`derive_quick`).

        Raises:
            UnknownIdError: If no variant has that (base) id; the message suggests close matches.
            SubsetIdError: If the subset suffix is malformed or the family cannot score subsets.
        """
        try:
            quick_base, quick = split_quick(env_id)
            if quick:
                return derive_quick(self.get(quick_base))
            base_id, request = SubsetRequest.parse_env_id(env_id)
        except ValueError as e:
            raise SubsetIdError(str(e)) from None
        if request is not None:
            return derive_subset(self.get(base_id), request)
        try:
            return self._variants[env_id]
        except KeyError:
            msg = unknown_id_message("environment", env_id, self.ids())
            broken = [str(e) for fam, e in self.errors.items() if env_id.replace("-", "_").startswith(fam)]
            if broken:
                msg += f" (its family's manifest is broken: {broken[0]})"
            elif self.missing_roots:
                msg += f" (no such environments directory: {', '.join(map(str, self.missing_roots))})"
            raise UnknownIdError(msg) from None

    def family_of(self, name: str) -> list[Variant]:
        """Variants of a family given by name (or by one of its variant ids).

        Raises:
            UnknownIdError: If neither a family nor a variant has that name.
        """
        if name in self._variants:
            name = self._variants[name].family
        name = self._prefixes.get(name, name)
        found = self.variants(name)
        if not found:
            raise UnknownIdError(unknown_id_message("environment family", name, self.families()))
        return found


@cache
def default_registry() -> Registry:
    """The registry of the installed environments, loaded once per process.

    Broken families are reported in ``errors`` instead of hiding every other environment. Families
    outside the repository (``EVOBENCH_ENV_PATH``, entry points: :mod:`harness.envs.external`) are
    loaded after the built-in ones.
    """
    return Registry(strict=False, extra_roots=external_roots(environments_root()))
