"""``bench new-env``'s skeleton: names checked, nothing overwritten, every manifest key written and
commented, and the y_init it writes is what its scorer gives its initial program."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.envs.manifest import FamilyManifest, Hardware, Progress, VariantOverride, load_manifest
from harness.envs.registry import Registry
from harness.envs.skeleton import Y_INIT, Y_INIT_TINY, SkeletonError, check_name, write_skeleton


@pytest.mark.parametrize("bad", ["Knap", "1knap", "knap-sack", "class", "k" * 41, "", "knap sack"])
def test_an_invalid_name_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SkeletonError, match="invalid environment name"):
        write_skeleton(bad, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_or_a_taken_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "knap").mkdir()
    with pytest.raises(SkeletonError, match="already exists"):
        write_skeleton("knap", tmp_path)
    with pytest.raises(SkeletonError, match="clash"):
        write_skeleton("my_task", tmp_path, taken={"my-task-tiny"})
    assert [p.name for p in tmp_path.iterdir()] == ["knap"]
    assert check_name("my_task") == "my-task"


def test_every_manifest_key_is_written_with_a_comment(tmp_path: Path) -> None:
    sk = write_skeleton("my_task", tmp_path)
    text = (sk.family_dir / "env.toml").read_text()
    manifest = load_manifest(sk.family_dir / "env.toml")
    assert manifest.family.id_prefix == "my-task" and manifest.family.mutations == "mutations:operators"
    lines = text.splitlines()
    fields = {*FamilyManifest.model_fields, *Hardware.model_fields, *Progress.model_fields}
    fields |= {"url", "filename", "sha256", "license"}  # the commented [data.<key>] example
    for key in sorted(fields - {"hardware", "scorer_params"}):
        hits = [i for i, line in enumerate(lines) if re.match(rf"^(# )?{key} *= ", line)]
        assert hits, f"env.toml does not set {key!r}"
        i = hits[0]
        # explained: a comment on the line itself or on the line just before it
        assert " # " in lines[i] or lines[i - 1].startswith("#"), f"{key!r} has no comment: {lines[i]!r}"
    variant_doc = text[text.index("# Variants:") : text.index("[variants.my-task]")]
    for key in VariantOverride.model_fields:
        assert key in variant_doc, f"the variants' comment does not name {key!r}"
    assert "[family.hardware]" in text and "[family.scorer_params]" in text
    assert sorted(p.name for p in sk.files) == sorted(
        [
            "__init__.py",
            "env.toml",
            "scorer.py",
            "initial_program.py",
            "prompt.md",
            "mutations.py",
            "test_my_task.py",
        ]
    )


def test_y_init_is_the_initial_programs_score_on_each_variant(tmp_path: Path) -> None:
    """The scorer's own functions on the initial program (our code, run here: no sandbox needed)."""
    write_skeleton("fit_check", tmp_path)
    reg = Registry(tmp_path, strict=True)
    tiny, full = reg.get("fit-check-tiny"), reg.get("fit-check")
    assert (tiny.progress.y_init, full.progress.y_init) == (Y_INIT_TINY, Y_INIT)
    scorer = tiny.load_attr("scorer:grid").__module__
    mod = __import__(scorer, fromlist=["grid"])
    namespace: dict[str, object] = {}
    exec(compile(tiny.initial_program, "initial_program.py", "exec"), namespace)  # noqa: S102
    predict = namespace["predict"]
    for v in (tiny, full):
        xs = mod.grid(int(v.scorer_params["n_points"]), float(v.scorer_params["x_max"]))
        err = mod.errors(xs, predict(xs))  # type: ignore[operator]
        assert sum(e * e for e in err) / len(err) == v.progress.y_init
