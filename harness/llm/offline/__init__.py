"""The offline proposer: a deterministic, seeded stand-in for an LLM (NOT an LLM), model ``offline/<name>``.

See :mod:`harness.llm.offline.provider` for the provider, :mod:`harness.llm.offline.prompt` for
the prompt convention it reads, :mod:`harness.llm.offline.tools` for the operator side channel,
and :mod:`harness.llm.offline.hypothesis` for operators that implement a hypothesis text.
"""

from .hypothesis import (
    AssignHypothesis,
    HypothesisMutation,
    Operator,
    edit_operators,
    hypothesis_operators,
    set_python_assignment,
    string_literal,
)
from .prompt import OfflinePrompt, code_blocks, code_fence, fenced, parse_offline_prompt
from .provider import (
    FINGERPRINT,
    Responder,
    answer,
    offline_proposers,
    register_offline_proposer,
    request_rng,
)
from .tools import OfflineEdit, operators_for, propose_edit, register_operators

__all__ = [
    "FINGERPRINT",
    "AssignHypothesis",
    "HypothesisMutation",
    "OfflineEdit",
    "OfflinePrompt",
    "Operator",
    "Responder",
    "answer",
    "code_blocks",
    "code_fence",
    "edit_operators",
    "fenced",
    "hypothesis_operators",
    "offline_proposers",
    "operators_for",
    "parse_offline_prompt",
    "propose_edit",
    "register_offline_proposer",
    "register_operators",
    "request_rng",
    "set_python_assignment",
    "string_literal",
]
