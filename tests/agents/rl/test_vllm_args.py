"""CPU tier: the vLLM engine arguments and limits, checked against vLLM 0.33.0's source (no vLLM needed)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.learning.config import LearningConfig
from agents.rl.backends.vllm import (
    MIN_VLLM,
    VLLMUnavailableError,
    _version_tuple,
    check_vllm_version,
    engine_args,
)


@pytest.mark.parametrize("bf16", [True, False])
def test_engine_never_fp32_with_lora(bf16):
    # vLLM's lora_shrink_op asserts inputs.dtype in [float16, bfloat16]: fp32 crashes every LoRA call.
    args = engine_args("m", lora_rank=8, keep_versions=2, max_model_len=256, gpu_memory_utilization=0.3,
                       bf16_supported=bf16)  # fmt: skip
    assert args["dtype"] == ("bfloat16" if bf16 else "float16")
    assert args["enable_lora"] and args["logprobs_mode"] == "processed_logprobs"
    assert args["max_lora_rank"] == 8 and args["max_loras"] == 2


@pytest.mark.parametrize("version", ["0.6.0", "0.10.0", "0.10.1.1", "0.9.2rc1"])
def test_old_vllm_refused(version):
    with pytest.raises(VLLMUnavailableError, match="0.10.2"):
        check_vllm_version(version)


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0rc2", "0.33.0", "1.0.0+cu130"])
def test_recent_vllm_accepted(version):
    check_vllm_version(version)


@given(
    st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
    st.sampled_from(["", "rc1", ".post1", "+cu130"]),
)
def test_version_tuple_orders_like_releases(release, suffix):
    text = ".".join(map(str, release)) + suffix
    assert _version_tuple(text) == release
    assert (_version_tuple(text) >= MIN_VLLM) == (release >= MIN_VLLM)


def test_policy_temperature_capped_at_vllm_limit():
    # vLLM 0.33.0 SamplingParams._verify_args: "temperature > 2.0" is an error.
    assert LearningConfig(policy_temperature=2.0).policy_temperature == 2.0
    with pytest.raises(ValueError, match="less than or equal to 2"):
        LearningConfig(policy_temperature=2.5)


def test_gpu_extra_floor_matches_backend():
    import tomllib
    from pathlib import Path

    extra = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["gpu"]
    floor = ".".join(map(str, MIN_VLLM))
    assert f"vllm>={floor}" in extra


# ---- structured outputs (constrained decoding), checked against vLLM 0.33.0's source ----------------
def _api() -> dict[str, list[str]]:
    import json

    from tests.agents.rl.vllm_api import FIXTURE

    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("regex", [None, "Repeat: (yes|no)"])
def test_sampling_params_kwargs_exist_in_vllm(regex):
    from agents.rl.backends.vllm import request_params

    api = _api()
    kwargs = request_params(1, 0.9, 64, 7, regex)
    assert set(kwargs) <= set(api["SamplingParams"])
    assert kwargs["top_p"] == 1.0 and kwargs["top_k"] == -1 and kwargs["seed"] == 7
    if regex is None:
        assert "structured_outputs" not in kwargs
    else:
        assert kwargs["structured_outputs"] == {"regex": regex}
        assert set(kwargs["structured_outputs"]) <= set(api["StructuredOutputsParams"])


def test_engine_pins_xgrammar_and_processed_logprobs():
    api = _api()
    args = engine_args("m", 8, 2, 256, 0.3, bf16_supported=True)
    assert args["structured_outputs_config"] == {"backend": "xgrammar"}
    assert set(args) <= set(api["LLM.__init__"]) | set(api["EngineArgs"])
    assert "structured_outputs_config" not in engine_args("m", 8, 2, 256, 0.3, True, structured_outputs=False)


def test_fixture_matches_the_wheel_when_present():
    from tests.agents.rl.vllm_api import WHEEL, extract

    if not WHEEL.is_file():
        pytest.skip(f"the pinned vLLM wheel is not at {WHEEL}")
    assert extract(WHEEL) == _api()
