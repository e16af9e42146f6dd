"""The inference-server sampler against loopback vLLM and SGLang servers that reproduce each
route's request, response and error shapes as read from the servers' code (see
fake_inference_servers.py for the files and commits): version sync (adapters loaded and
unloaded, weights reloaded), token ids and log-probs passed through exactly, servers that answer
without them refused, engines Steplab cannot update refused at launch with the reason, the
log-prob mode probe, and the servers' errors as clear messages."""

from __future__ import annotations

import json

import pytest

from tests.trainer_core.policies.fake_inference_servers import (
    FakeOtherServer,
    FakeSGLang,
    FakeVLLM,
    toy_logprobs,
)
from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies.factory import build_policy, check_parameters
from trainer_core.policies.inference_server import (
    InferenceServerSampler,
    adapter_name,
    check_server,
    sampler_from_parameters,
)

STOP = 7  # the toy vocabulary's <|im_end|>
PROMPT = [3, 1, 4, 1, 5]
BASE = "Qwen/Qwen2.5-0.5B-Instruct"


def _lora_checkpoint(root, step):
    """A Steplab LoRA checkpoint: the merged model at the top, the adapter under adapter/."""
    path = root / f"checkpoint-{step}"
    (path / "adapter").mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 8}))
    return path


def _full_checkpoint(root, step):
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def _sampler(server, engine, **kwargs):
    kwargs.setdefault("stop_token_ids", [STOP])
    kwargs.setdefault("temperature", 0.7)
    kwargs.setdefault("max_retries", 0)
    return InferenceServerSampler(server.url, engine=engine, **kwargs)


# --- vLLM: versions as adapters ---------------------------------------------------------------


def test_vllm_sync_loads_the_new_adapter_unloads_the_old_and_requests_name_it(tmp_path):
    first, second = _lora_checkpoint(tmp_path, 10), _lora_checkpoint(tmp_path, 20)
    with FakeVLLM() as server, _sampler(server, "vllm", model=BASE) as sampler:
        sampler.check(lora_run=True)
        sampler.generate_ids([PROMPT], max_new_tokens=2)
        assert server.calls("/v1/completions")[-1]["model"] == BASE  # before any version

        sampler.sync(1, str(first), "rl7")
        assert server.calls("/v1/load_lora_adapter") == [
            {"lora_name": "rl7-v1", "lora_path": str(first / "adapter")}
        ]
        assert server.adapters == {"rl7-v1": str(first / "adapter")}
        sampler.generate_ids([PROMPT], max_new_tokens=2)
        assert server.calls("/v1/completions")[-1]["model"] == "rl7-v1"

        sampler.sync(2, str(second), "rl7")
        assert server.calls("/v1/load_lora_adapter")[-1] == {
            "lora_name": "rl7-v2",
            "lora_path": str(second / "adapter"),
        }
        assert server.calls("/v1/unload_lora_adapter") == [{"lora_name": "rl7-v1"}]
        assert server.adapters == {"rl7-v2": str(second / "adapter")}
        generation = sampler.generate_ids([PROMPT], max_new_tokens=3)[0]
        assert server.calls("/v1/completions")[-1]["model"] == "rl7-v2"
        # the answer came from the new adapter's weights
        assert (
            generation.logprobs[0]
            == toy_logprobs(PROMPT, "rl7-v2", 48, 0.7, "processed_logprobs")[
                generation.token_ids[0]
            ]
        )
        assert sampler.version == 2 and sampler.adapter == adapter_name("rl7", 2)


def test_vllm_keeps_the_newest_adapters_asked_for_and_leaves_other_runs_alone(tmp_path):
    checkpoints = [_lora_checkpoint(tmp_path, step) for step in (1, 2, 3)]
    with FakeVLLM() as server, _sampler(server, "vllm", keep_adapters=2) as sampler:
        server.adapters["other-v1"] = "/elsewhere/adapter"
        for version, path in enumerate(checkpoints, start=1):
            sampler.sync(version, str(path), "rl7")
        assert sorted(server.adapters) == ["other-v1", "rl7-v2", "rl7-v3"]


def test_version_0_without_an_adapter_samples_the_base_model(tmp_path):
    start = _full_checkpoint(tmp_path, 0)
    with FakeVLLM() as server, _sampler(server, "vllm") as sampler:
        sampler.sync(0, str(start), "rl7")
        assert server.calls("/v1/load_lora_adapter") == []
        sampler.generate_ids([PROMPT], max_new_tokens=1)
        assert server.calls("/v1/completions")[-1]["model"] == BASE


def test_a_version_already_loaded_by_another_sampler_of_the_run_is_taken(tmp_path):
    path = _lora_checkpoint(tmp_path, 5)
    with FakeVLLM() as server:
        with _sampler(server, "vllm") as first, _sampler(server, "vllm") as second:
            first.sync(1, str(path), "rl7")
            second.sync(1, str(path), "rl7")  # vLLM answers 400 "already been loaded"
            second.generate_ids([PROMPT], max_new_tokens=1)
        assert server.calls("/v1/completions")[-1]["model"] == "rl7-v1"
        server.adapters["rl7-v2"] = "/another/run/adapter"
        with _sampler(server, "vllm") as third, pytest.raises(PolicyError) as err:
            third.sync(2, str(_lora_checkpoint(tmp_path, 6)), "rl7")
        assert "loaded from /another/run/adapter" in str(err.value)


# --- sampling: ids and log-probs exactly as sampled -------------------------------------------


def test_token_ids_and_logprobs_are_passed_through_exactly():
    script = {tuple(PROMPT): [11, 22, 33, STOP], (2, 7, 1, 8): [5, 6, 8, 9]}
    with FakeVLLM(script=script) as server:
        with _sampler(server, "vllm", max_new_tokens=4) as sampler:
            stopped, cut = sampler.generate_ids([PROMPT, [2, 7, 1, 8]])
        sent = [answer["choices"][0] for answer in server.answers]
        requests = server.calls("/v1/completions")
    by_prompt = {tuple(r["prompt"]): a for r, a in zip(requests, sent, strict=True)}
    assert stopped.prompt_token_ids == PROMPT
    assert stopped.token_ids == [11, 22, 33, STOP]  # the stop token closes the ids
    assert stopped.finish_reason == "stop"
    assert stopped.logprobs == by_prompt[tuple(PROMPT)]["logprobs"]["token_logprobs"]
    assert stopped.text == "<11><22><33>"  # the server's text, without the stop token
    assert cut.finish_reason == "length" and cut.token_ids == [5, 6, 8, 9]
    assert cut.logprobs == by_prompt[(2, 7, 1, 8)]["logprobs"]["token_logprobs"]
    # the log-probs are those of the distribution sampled from: softmax(logits / 0.7)
    context, expected = list(PROMPT), []
    for token in stopped.token_ids:
        expected.append(toy_logprobs(context, BASE, 48, 0.7, "processed_logprobs")[token])
        context.append(token)
    assert stopped.logprobs == expected
    request = requests[0]
    assert request["prompt"] in (PROMPT, [2, 7, 1, 8])  # token ids, never text
    assert request["temperature"] == 0.7 and request["top_p"] == 1.0 and request["top_k"] == -1
    assert request["stop_token_ids"] == [STOP] and request["logprobs"] == 0
    assert request["return_token_ids"] is True and request["return_tokens_as_token_ids"] is True


def test_an_older_vllm_gives_its_ids_as_token_id_strings():
    with FakeVLLM(token_ids=False, script=[[4, 2, STOP]]) as server:
        with _sampler(server, "vllm") as sampler:
            generation = sampler.generate_ids([PROMPT])[0]
        sent = server.answers[0]["choices"][0]
    assert "token_ids" not in sent and sent["logprobs"]["tokens"] == [
        "token_id:4",
        "token_id:2",
        f"token_id:{STOP}",
    ]
    assert generation.token_ids == [4, 2, STOP]
    assert generation.logprobs == sent["logprobs"]["token_logprobs"]


def test_sglang_generation_passes_ids_and_logprobs_through():
    with FakeSGLang(script=[[12, 13, STOP]]) as server, _sampler(server, "sglang") as sampler:
        generation = sampler.generate_ids([PROMPT])[0]
        body = server.calls("/generate")[0]
        meta = server.answers[0]["meta_info"]
    assert body["input_ids"] == PROMPT and body["return_logprob"] is True
    assert body["sampling_params"]["temperature"] == 0.7
    assert body["sampling_params"]["stop_token_ids"] == [STOP]
    assert body["sampling_params"]["top_k"] == -1 and body["sampling_params"]["top_p"] == 1.0
    assert server.answers[0]["output_ids"] == [12, 13]  # SGLang trims the matched stop token
    assert generation.token_ids == [12, 13, STOP]  # read from output_token_logprobs
    assert generation.logprobs == [entry[0] for entry in meta["output_token_logprobs"]]
    assert generation.finish_reason == "stop" and generation.text == "<12><13>"


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda: FakeVLLM(answer_logprobs=False), "no log-probs"),
        (
            lambda: FakeVLLM(token_ids=False, answer_token_ids_in_tokens=False),
            "no sampled token ids",
        ),
        (lambda: FakeSGLang(answer_logprobs=False), "no output_token_logprobs"),
    ],
)
def test_a_server_that_returns_no_ids_or_logprobs_is_refused(make, problem):
    with make() as server:
        engine = "sglang" if isinstance(server, FakeSGLang) else "vllm"
        with _sampler(server, engine) as sampler, pytest.raises(PolicyError) as err:
            sampler.generate_ids([PROMPT], max_new_tokens=3)
        assert problem in str(err.value)
        with pytest.raises(PolicyError, match=problem):
            check_server(server.url, engine=engine, stop_token_ids=[STOP], probe_prompt=PROMPT)


def test_several_prompts_are_sampled_concurrently_in_their_order():
    prompts = [[i, i + 1, i + 2] for i in range(10, 30)]
    with FakeVLLM() as server, _sampler(server, "vllm", max_concurrency=4) as sampler:
        generations = sampler.generate_ids(prompts, max_new_tokens=2)
    assert [g.prompt_token_ids for g in generations] == prompts


# --- refused at launch --------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["openai", "ollama", "tgi", ""])
def test_an_engine_steplab_cannot_update_is_refused_with_the_reason(engine):
    with pytest.raises(ConfigError, match="OpenAI-compatible server that Steplab cannot update"):
        InferenceServerSampler("http://127.0.0.1:1", engine=engine, stop_token_ids=[STOP])


def test_a_server_that_is_neither_vllm_nor_sglang_is_refused_at_launch():
    with FakeOtherServer(owned_by="library") as server, pytest.raises(PolicyError) as err:
        check_server(server.url, engine="vllm")
    assert "an OpenAI-compatible server that Steplab cannot update" in str(err.value)
    assert "'library'" in str(err.value)


def test_the_engine_must_be_what_the_server_says_it_is():
    with FakeVLLM() as server, pytest.raises(PolicyError, match="names itself 'vllm'"):
        check_server(server.url, engine="sglang")


def test_vllm_without_runtime_lora_updating_is_refused_at_launch_and_at_sync(tmp_path):
    with FakeVLLM(runtime_lora_updating=False) as server:
        with pytest.raises(PolicyError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):
            check_server(server.url, engine="vllm")
        with _sampler(server, "vllm") as sampler, pytest.raises(PolicyError) as err:
            sampler.sync(1, str(_lora_checkpoint(tmp_path, 1)), "rl7")
        assert "no /v1/load_lora_adapter" in str(err.value)
        assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in str(err.value)


def test_vllm_is_refused_for_a_full_weights_run():
    with FakeVLLM() as server, pytest.raises(PolicyError, match="a full-weights run needs SGLang"):
        check_server(server.url, engine="vllm", lora_run=False)


def test_a_base_model_the_server_does_not_serve_is_refused():
    with FakeVLLM() as server, pytest.raises(PolicyError, match="does not serve 'other/model'"):
        check_server(server.url, engine="vllm", model="other/model")


@pytest.mark.parametrize(
    "make, engine, fix",
    [
        (
            lambda: FakeVLLM(logprobs_mode="raw_logprobs"),
            "vllm",
            "--logprobs-mode processed_logprobs",
        ),
        (lambda: FakeSGLang(original_logprob=True), "sglang", "SGLANG_RETURN_ORIGINAL_LOGPROB"),
    ],
)
def test_logprobs_taken_before_the_temperature_are_refused_at_launch(make, engine, fix):
    with make() as server, pytest.raises(PolicyError) as err:
        check_server(
            server.url, engine=engine, stop_token_ids=[STOP], temperature=0.7, probe_prompt=PROMPT
        )
    assert "taken before the temperature" in str(err.value) and fix in str(err.value)


@pytest.mark.parametrize("make, engine", [(FakeVLLM, "vllm"), (FakeSGLang, "sglang")])
def test_temperature_applied_logprobs_pass_the_launch_probe(make, engine):
    with make() as server:
        info = check_server(
            server.url, engine=engine, stop_token_ids=[STOP], temperature=0.7, probe_prompt=PROMPT
        )
        assert info.engine == engine and info.logprobs_checked
        probes = [r for m, p, r in server.requests if m == "POST" and p != "/v1/load_lora_adapter"]
    temperatures = sorted(
        (r.get("temperature") or r.get("sampling_params", {}).get("temperature")) for r in probes
    )
    assert temperatures == [0.7, 0.7, 1.0]  # one sampled token, then the probe at T and at 1


def test_vllm_logits_instead_of_logprobs_are_refused():
    with FakeVLLM(logprobs_mode="raw_logits") as server, pytest.raises(PolicyError, match="logits"):
        check_server(server.url, engine="vllm", stop_token_ids=[STOP], probe_prompt=PROMPT)


@pytest.mark.parametrize("setting, value", [("top_p", 0.9), ("top_k", 20), ("temperature", -1.0)])
def test_truncated_or_invalid_sampling_is_refused(setting, value):
    with pytest.raises(ConfigError, match=setting):
        InferenceServerSampler(
            "http://127.0.0.1:1", engine="vllm", stop_token_ids=[STOP], **{setting: value}
        )


# --- the servers' errors, clearly -----------------------------------------------------------------


def test_vllm_errors_become_clear_messages(tmp_path):
    with FakeVLLM(enable_lora=False) as server, _sampler(server, "vllm") as sampler:
        with pytest.raises(PolicyError) as err:
            sampler.sync(1, str(_lora_checkpoint(tmp_path, 1)), "rl7")
        assert "500" in str(err.value) and "start vLLM with --enable-lora" in str(err.value)
    with FakeVLLM() as server, _sampler(server, "vllm") as sampler:
        unseen = tmp_path / "not-mounted-here" / "checkpoint-4"
        with pytest.raises(PolicyError) as err:
            sampler.sync(2, str(unseen), "rl7")  # the server looks for <path>/adapter itself
        assert "No adapter found for" in str(err.value) and "same path" in str(err.value)
        with pytest.raises(PolicyError, match="holds no LoRA adapter"):
            sampler.sync(3, str(_full_checkpoint(tmp_path, 3)), "rl7")
        server.fail_next(
            "/v1/completions",
            500,
            {
                "error": {
                    "message": "CUDA out of memory",
                    "type": "InternalServerError",
                    "param": None,
                    "code": 500,
                }
            },
        )
        with pytest.raises(PolicyError, match="vLLM answered 500: CUDA out of memory"):
            sampler.generate_ids([PROMPT])


def test_an_adapter_unloaded_under_a_sampler_is_explained(tmp_path):
    with FakeVLLM() as server, _sampler(server, "vllm") as sampler:
        sampler.sync(1, str(_lora_checkpoint(tmp_path, 1)), "rl7")
        del server.adapters["rl7-v1"]  # another sampler of the same server moved on
        with pytest.raises(PolicyError) as err:
            sampler.generate_ids([PROMPT])
        assert "The model `rl7-v1` does not exist." in str(err.value)
        assert "keep_adapters" in str(err.value)


def test_sglang_reloads_the_versions_weights_from_its_path(tmp_path):
    version_path = _full_checkpoint(tmp_path, 30)
    with FakeSGLang() as server, _sampler(server, "sglang") as sampler:
        sampler.check()
        sampler.sync(3, str(version_path), "rl7")
        assert server.calls("/update_weights_from_disk") == [
            {"model_path": str(version_path), "weight_version": "3"}
        ]
        generation = sampler.generate_ids([PROMPT], max_new_tokens=1)[0]
        assert server.answers[-1]["meta_info"]["weight_version"] == "3"
        expected = toy_logprobs(PROMPT, str(version_path), 48, 0.7, "processed_logprobs")
        assert generation.logprobs == [expected[generation.token_ids[0]]]

        with pytest.raises(PolicyError) as err:
            sampler.sync(4, str(tmp_path / "missing"), "rl7")
        assert "SGLang answered 400" in str(err.value)
        assert "is not a model directory" in str(err.value)

        server.weight_version = "9"  # someone else updated the server
        with pytest.raises(PolicyError, match="weights version 9, not 3"):
            sampler.generate_ids([PROMPT], max_new_tokens=1)


def test_sglang_errors_and_missing_routes_are_clear():
    with FakeSGLang() as server, _sampler(server, "sglang") as sampler:
        server.fail_next(
            "/generate", 400, {"error": {"message": "Input length 9000 exceeds the limit"}}
        )
        with pytest.raises(PolicyError, match="SGLang answered 400: Input length 9000"):
            sampler.generate_ids([PROMPT])
        server.fail_next("/update_weights_from_disk", 404, {"detail": "Not Found"})
        with pytest.raises(PolicyError, match="no /update_weights_from_disk"):
            sampler.sync(1, "/shared/checkpoint-1", "rl7")
    with FakeSGLang(is_generation=False) as server, pytest.raises(PolicyError, match="embedding"):
        check_server(server.url, engine="sglang")


def test_an_unreachable_server_and_an_oversized_answer_are_clear():
    with FakeVLLM() as server:
        url = server.url
        with _sampler(server, "vllm", max_response_bytes=1024) as sampler:
            server.fail_next("/v1/completions", 200, {"padding": "x" * 5000})
            with pytest.raises(PolicyError, match="larger than 1024 bytes"):
                sampler.generate_ids([PROMPT])
    with pytest.raises(PolicyError, match="cannot reach the inference server"):
        check_server(url, engine="vllm", max_retries=0)


def test_the_api_key_is_read_from_the_variable_it_is_named_by(monkeypatch):
    monkeypatch.setenv("STEPLAB_TEST_VLLM_KEY", "key-for-the-test-server")
    with FakeVLLM(api_key="key-for-the-test-server") as server:
        info = check_server(server.url, engine="vllm", api_key_env="STEPLAB_TEST_VLLM_KEY")
        assert info.lora_routes
        with pytest.raises(PolicyError) as err:
            check_server(server.url, engine="vllm")  # no key sent
        assert "401" in str(err.value) and "api_key_env" in str(err.value)
        monkeypatch.delenv("STEPLAB_TEST_VLLM_KEY")
        with pytest.raises(PolicyError, match="STEPLAB_TEST_VLLM_KEY is not set"):
            check_server(server.url, engine="vllm", api_key_env="STEPLAB_TEST_VLLM_KEY")


# --- the policy kind ---------------------------------------------------------------------------


def test_the_inference_server_kind_is_described_and_built_like_the_others():
    params = {"base_url": "http://gpu1:8000", "engine": "vllm", "stop_token_ids": [STOP]}
    check_parameters("inference_server", BASE, "native", params)
    sampler = build_policy("inference_server", model=BASE, parameters=params, name="served")
    assert isinstance(sampler, InferenceServerSampler) and sampler.model == BASE
    assert sampler.name == "served"
    with pytest.raises(ConfigError, match="cannot update"):
        check_parameters("inference_server", BASE, "native", {**params, "engine": "ollama"})
    with pytest.raises(ConfigError, match="base_url"):
        check_parameters("inference_server", BASE, "native", {"engine": "sglang"})
    with pytest.raises(ConfigError, match="looks like a secret"):
        check_parameters(
            "inference_server", BASE, "native", {**params, "api_key": "sk-abc123def456ghi789"}
        )
    with pytest.raises(ConfigError, match="top_p=0.5 is refused"):
        build_policy("inference_server", parameters={**params, "top_p": 0.5})


def test_the_kind_acts_in_the_chat_format_with_the_served_models_tokenizer(tmp_path):
    from tests.trainer_core.policies.tiny_model import TOOLS, build_tiny_tokenizer
    from trainer_core.policies import chat_format
    from trainer_core.tasks.model import Task

    tokenizer = build_tiny_tokenizer()
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    im_end = tokenizer.convert_tokens_to_ids(chat_format.IM_END)
    call = chat_format.render_tool_call("calculator", {"expression": "2+3"})
    answer = [*tokenizer.encode(call, add_special_tokens=False), im_end]
    with FakeVLLM(vocab=len(tokenizer), script=[answer]) as server:
        policy = sampler_from_parameters(
            BASE,
            {
                "base_url": server.url,
                "engine": "vllm",
                "tokenizer_dir": str(tmp_path / "tokenizer"),
            },
        )
        task = Task(id="t1", prompt="What is 2+3?")
        policy.reset(task)
        decision = policy.act(task.prompt, [], list(TOOLS))
        policy.close()
        sent = server.calls("/v1/completions")[0]
    expected_prompt = chat_format.tokenize(
        chat_format.to_messages(
            prompt=task.prompt, history=[], system=chat_format.system_prompt(list(TOOLS))
        ),
        policy.tokenizer,
        add_generation_prompt=True,
    ).input_ids
    assert sent["prompt"] == expected_prompt == decision.prompt_token_ids
    assert sent["stop_token_ids"][0] == im_end
    assert decision.action == {"tool": "calculator", "params": {"expression": "2+3"}, "thought": ""}
    assert decision.token_ids == answer and len(decision.logprobs) == len(answer)
    assert decision.raw == call and decision.metadata["finish_reason"] == "stop"
