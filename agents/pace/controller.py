"""The controller's model calls: root causes, reflective prompt revisions and control edits.

The controller is the same frozen model as the proposer (PACE uses one model in both parts) under
the ``controller`` role. Every answer is read leniently and validated against the templates, so
a malformed answer costs a rejected proposal, never a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict

from agents.pacevolve.state import derive_seed
from harness.llm import LLMCallFailed, LLMClient, Message
from harness.runner.context import TaskSpec

from .config import PACEConfig
from .control import EDITABLE, ControlEdit, parse_control_edit
from .front import FailureCategory
from .prompt_config import MAX_REQUIREMENT_CHARS, PromptConfig, revise

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
TASK_SUMMARY_CHARS = 1200


class Failure(BaseModel):
    """A failed attempt of the last prompt round, for the reflective channel."""

    model_config = ConfigDict(extra="forbid")

    category: FailureCategory
    """Taxonomy category."""
    outcome: str
    """Where the attempt stopped (``evaluated``, ``failed:<stage>``, ``repeat``, ...)."""
    status: str
    """Evaluation status ('' when nothing was evaluated)."""
    error: str
    """Error text (truncated)."""
    hypothesis: str
    """The hypothesis that was tried (truncated)."""


@cache
def _template(name: str) -> Template:
    return Template((PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **values: object) -> list[Message]:
    """System message plus the filled template ``prompts/<name>.md``.

    Raises:
        KeyError: If a placeholder has no value.
    """
    user = _template(name).substitute({k: str(v) for k, v in values.items()})
    return [{"role": "system", "content": _template("system").template}, {"role": "user", "content": user}]


def _first_tagged(text: str, tag: str, limit: int) -> list[str]:
    tagged = [m.group(1).strip() for m in re.finditer(rf"(?im)^\s*{tag}\s*:\s*(.+)$", text)]
    if not tagged:
        lines = [ln.strip(" -*#>\t`") for ln in text.splitlines() if ln.strip(" -*#>\t`")]
        lines = [ln for ln in lines if not ln.startswith("[offline")]
        tagged = lines[:1]
    return [
        " ".join(t.replace("```", "").split())[:MAX_REQUIREMENT_CHARS] for t in tagged[:limit] if t.strip()
    ]


class Controller:
    """Asks the controller role and validates what comes back."""

    def __init__(self, client: LLMClient, task: TaskSpec, cfg: PACEConfig, base_seed: int) -> None:
        """Bind the client, the task (for headers and summaries) and the settings."""
        self.client, self.task, self.cfg, self.base_seed = client, task, cfg, base_seed

    def _common(self) -> dict[str, object]:
        prompt = self.task.prompt.strip()
        summary = prompt if len(prompt) <= TASK_SUMMARY_CHARS else prompt[:TASK_SUMMARY_CHARS] + "\n[...]"
        return {"env_id": self.task.env_id, "language": self.task.language.value, "task_summary": summary}

    def _ask(self, stage: str, messages: list[Message], step: int, salt: object) -> str:
        resp = self.client.complete(
            "controller",
            messages,
            seed=derive_seed(self.base_seed, stage, step, salt),
            stage=stage,
            step=step,
            thread=-1,
            temperature=1.0,  # PACE's optimiser-side reflection temperature
        )
        return resp.text

    def reflective(
        self, parent: PromptConfig, failures: Sequence[Failure], step: int, island: int
    ) -> PromptConfig | None:
        """Root causes of the failures, then a targeted revision of ``parent``.

        None when the model's answers are unusable or break the template.
        """
        causes: list[str] = []
        try:
            for k, f in enumerate(failures):
                msgs = render(
                    "pace_reflection", **self._common(), category=f.category, outcome=f.outcome or "-",
                    status=f.status or "-", hypothesis=f.hypothesis or "-", error=f.error or "-",
                )  # fmt: skip
                causes += _first_tagged(
                    self._ask("pace_reflection", msgs, step, (island, k)), "ROOT CAUSE", 1
                )
            if not causes:
                return None
            msgs = render(
                "pace_revision", env_id=self.task.env_id, language=self.task.language.value,
                role=parent.role or "(default)",
                requirements="\n".join(f"- {r}" for r in parent.requirements) or "(none)",
                temperature=parent.temperature, response_format=parent.response_format,
                root_causes="\n".join(f"- {c}" for c in causes),
            )  # fmt: skip
            reqs = _first_tagged(self._ask("pace_revision", msgs, step, island), "REQUIREMENT", 2)
        except LLMCallFailed:
            return None
        if not reqs:
            return None
        try:
            return revise(parent, reqs)
        except ValueError:
            return None

    def control_edit(
        self, control: dict[str, Any], failure_counts: dict[str, int], step: int
    ) -> tuple[ControlEdit | None, str]:
        """A validated control edit, or None and why it was rejected before any evaluation."""
        editable = "\n".join(
            f"- {n}: {t.__name__}" + (f" in [{lo}, {hi}]" if lo is not None else "")
            for n, (t, lo, hi) in EDITABLE.items()
        )
        failures = "\n".join(f"- {k}: {v}" for k, v in sorted(failure_counts.items())) or "- none recorded"
        msgs = render(
            "pace_control_edit", **self._common(), control_json=json.dumps(control, sort_keys=True),
            failure_summary=failures, editable=editable,
        )  # fmt: skip
        try:
            text = self._ask("pace_control_edit", msgs, step, "edit")
        except LLMCallFailed as e:
            return None, f"controller call failed: {e}"
        try:
            return parse_control_edit(text), ""
        except ValueError as e:  # ImmutableFieldError included
            return None, f"{type(e).__name__}: {e}"
