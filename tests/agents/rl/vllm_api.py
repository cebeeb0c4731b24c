"""Read vLLM's public signatures out of a wheel's source with ``ast`` (no vLLM import, no GPU)."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

WHEEL = Path("/tmp/gpu_vllm/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl")
"""Where the development machines keep the pinned wheel (the fixture is extracted from it)."""
FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33_0_api.json"
"""The extracted names, committed so the check runs without the wheel."""


def _class_fields(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign)
                and isinstance(s.target, ast.Name)
                and not s.target.id.startswith("_")
            ]
    raise KeyError(name)


def _init_params(tree: ast.Module, cls: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    return [a.arg for a in f.args.args + f.args.kwonlyargs if a.arg != "self"]
    raise KeyError(cls)


def extract(wheel: Path = WHEEL) -> dict[str, list[str]]:
    """Field and parameter names of the classes the vLLM backend constructs."""
    with zipfile.ZipFile(wheel) as z:
        sp = ast.parse(z.read("vllm/sampling_params.py"))
        llm = ast.parse(z.read("vllm/entrypoints/llm.py"))
        engine = ast.parse(z.read("vllm/engine/arg_utils.py"))
    return {
        "SamplingParams": _class_fields(sp, "SamplingParams"),
        "StructuredOutputsParams": _class_fields(sp, "StructuredOutputsParams"),
        "LLM.__init__": _init_params(llm, "LLM"),  # the rest of its **kwargs go to EngineArgs
        "EngineArgs": _class_fields(engine, "EngineArgs"),
    }
