"""The local Hugging Face model policy, on tiny models built here (random weights, a tokenizer
trained on the spot); one of them is taught an arithmetic episode in the chat format and then
plays it in the real environment."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.trainer_core.policies.tiny_model import (  # noqa: E402
    TOOLS,
    build_tiny_model,
    default_corpus,
    train_tiny_model,
)
from trainer_core.envs.registry import make  # noqa: E402
from trainer_core.errors import ConfigError, EnvironmentUnavailable, PolicyError  # noqa: E402
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.policies.base import Turn, decide, play_step  # noqa: E402
from trainer_core.policies.local_hf import LocalHFPolicy  # noqa: E402
from trainer_core.policies.scripted import ScriptedPolicy  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_task  # noqa: E402

torch.set_num_threads(1)

PROMPT = "What is 2+3? Use the calculator tool, then submit the answer."


def play(env, policy, task):
    """One episode with the policy protocol: (decision, timestep) per step."""
    ts = env.reset(task=task)
    policy.reset(env.task)
    history, steps = [], []
    while not ts.done:
        decision = decide(policy, ts.observation, history, env.available_tools)
        ts = play_step(env, decision)
        history.append(Turn(action=decision.action, observation=ts.observation, raw=decision.raw))
        steps.append((decision, ts))
    return steps


@pytest.fixture(scope="module")
def scripted_episode():
    """The reference episode of an arithmetic task, as the scripted policy plays it."""
    task = arithmetic_task(0)
    with make("steplab/arithmetic") as env:
        first = env.reset(task=task).observation
        tools = list(env.available_tools)
        steps = play(env, ScriptedPolicy(), task)
    history = [Turn(action=d.action, observation=ts.observation) for d, ts in steps]
    messages = cf.to_messages(prompt=first, history=history, system=cf.system_prompt(tools))
    return task, steps, messages, tools


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory, scripted_episode):
    """A tiny model taught the scripted episode (loss on the assistant tokens only)."""
    messages = scripted_episode[2]
    path = build_tiny_model(
        tmp_path_factory.mktemp("trained"), seed=0, corpus=[*default_corpus(), cf.render(messages)]
    )
    loss = train_tiny_model(path, [messages], steps=100, lr=1e-2)
    assert loss < 0.05
    return path


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("random"), seed=1)


def first_messages(policy: LocalHFPolicy) -> list[dict]:
    return policy.messages(PROMPT, [], TOOLS)


# ----------------------------------------------------------------------------- acting


def test_a_taught_model_plays_the_episode_in_the_environment(trained_dir, scripted_episode):
    task, scripted, _, _ = scripted_episode
    policy = LocalHFPolicy(trained_dir, temperature=0.0, max_new_tokens=64, device="auto")
    with make("steplab/arithmetic") as env:
        steps = play(env, policy, task)
    assert [d.action for d, _ in steps] == [d.action for d, _ in scripted]
    assert steps[0][0].action == {
        "tool": "calculator",
        "params": {"expression": "43 + 7"},
        "thought": "Compute it with the calculator.",
    }
    last = steps[-1][1]
    assert last.terminated and last.reward == 1.0
    for decision, _ in steps:
        assert decision.error is None
        assert decision.metadata == {"prompt_format": "native", "finish_reason": "stop"}
        assert decision.usage.cost == 0.0 and decision.usage.latency > 0
        assert decision.usage.tokens_out == len(policy.tokenizer.encode(decision.raw)) + 1
        assert decision.prompt_token_ids is None and decision.logprobs is None
    assert steps[0][0].raw == (
        "Compute it with the calculator.\n"
        '<tool_call>{"name": "calculator", "arguments": {"expression": "43 + 7"}}</tool_call>'
    )


def test_the_policy_prompts_with_exactly_the_training_tokens(trained_dir, scripted_episode):
    _, scripted, messages, tools = scripted_episode
    policy = LocalHFPolicy(trained_dir, temperature=0.0, return_logprobs=True)
    prompt = messages[1]["content"]
    policy.reset(None)
    first = policy.act(prompt, [], tools)
    expected = cf.tokenize(
        cf.to_messages(prompt=prompt, history=[], system=cf.system_prompt(tools)),
        policy.tokenizer,
        add_generation_prompt=True,
    )
    assert first.prompt_token_ids == expected.input_ids
    assert first.usage.tokens_in == len(expected.input_ids)
    # the second step's prompt is the whole episode so far, the first observation as the prompt
    turn = Turn(action=scripted[0][0].action, observation=scripted[0][1].observation)
    second = policy.act(turn.observation, [turn], tools)
    expected = cf.tokenize(
        cf.to_messages(prompt=prompt, history=[turn], system=cf.system_prompt(tools)),
        policy.tokenizer,
        add_generation_prompt=True,
    )
    assert second.prompt_token_ids == expected.input_ids
    # what the policy produced is what training masks as its own
    whole = cf.tokenize(messages, policy.tokenizer)
    own = [t for t, m in zip(whole.input_ids, whole.assistant_mask, strict=True) if m]
    produced = first.token_ids + second.token_ids
    assert produced == own[: len(produced)]


def test_a_random_model_writes_garbage_and_gets_an_error_not_an_exception(random_dir):
    policy = LocalHFPolicy(random_dir, temperature=1.0, max_new_tokens=12, seed=0)
    policy.reset(None)
    decision = policy.act(PROMPT, [], TOOLS)
    assert decision.action is None
    assert isinstance(decision.error, str) and decision.error
    assert decision.error == cf.parse_assistant(decision.raw)
    assert decision.raw
    assert decision.usage.tokens_out >= 1
    with make("steplab/arithmetic") as env:
        env.reset(task=arithmetic_task(1))
        ts = play_step(env, decision)
    assert ts.observation.startswith("Your last output was not a valid action: ")
    assert ts.info["error"] == "malformed_output"
    # and the episode goes on: the malformed turn is replayed to the model as it was written
    turn = Turn(action=None, observation=ts.observation, raw=decision.raw, error=decision.error)
    messages = policy.messages(ts.observation, [turn], TOOLS)
    assert messages[-2:] == [
        {"role": "assistant", "content": decision.raw},
        {"role": "user", "content": ts.observation},
    ]
    assert policy.act(ts.observation, [turn], TOOLS).usage.tokens_in > decision.usage.tokens_in


# ----------------------------------------------------------------------------- log-probabilities


def forward_logprobs(model, prompt: list[int], completion: list[int], temperature: float):
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    positions = logits[len(prompt) - 1 : len(prompt) + len(completion) - 1]
    chosen = torch.tensor(completion).unsqueeze(-1)
    return torch.log_softmax(positions / temperature, dim=-1).gather(-1, chosen).squeeze(-1)


@pytest.mark.parametrize("temperature, top_p", [(0.7, 1.0), (1.3, 0.9)])
def test_logprobs_match_a_separate_forward_pass(random_dir, temperature, top_p):
    policy = LocalHFPolicy(
        random_dir,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=24,
        seed=5,
        return_logprobs=True,
    )
    decision = policy.act(PROMPT, [], TOOLS)
    assert decision.token_ids and len(decision.logprobs) == len(decision.token_ids)
    assert all(lp <= 0.0 for lp in decision.logprobs)
    assert (
        decision.prompt_token_ids
        == cf.tokenize(
            first_messages(policy), policy.tokenizer, add_generation_prompt=True
        ).input_ids
    )
    expected = forward_logprobs(
        policy.model, decision.prompt_token_ids, decision.token_ids, temperature
    )
    assert torch.allclose(torch.tensor(decision.logprobs), expected, atol=1e-4)
    # raw is the decoded completion, without the closing <|im_end|>
    im_end = policy.tokenizer.convert_tokens_to_ids(cf.IM_END)
    text_ids = decision.token_ids[:-1] if decision.token_ids[-1] == im_end else decision.token_ids
    assert decision.raw == policy.tokenizer.decode(text_ids)


def test_greedy_logprobs_are_the_models_own_and_pick_the_argmax(random_dir):
    policy = LocalHFPolicy(random_dir, temperature=0.0, max_new_tokens=16, return_logprobs=True)
    decision = policy.act(PROMPT, [], TOOLS)
    expected = forward_logprobs(policy.model, decision.prompt_token_ids, decision.token_ids, 1.0)
    assert torch.allclose(torch.tensor(decision.logprobs), expected, atol=1e-4)
    ids = torch.tensor([decision.prompt_token_ids + decision.token_ids])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0]
    start = len(decision.prompt_token_ids) - 1
    argmax = logits[start : start + len(decision.token_ids)].argmax(-1).tolist()
    assert argmax == decision.token_ids


def test_a_seed_makes_sampling_reproducible_without_touching_the_global_stream(random_dir):
    def sample(seed):
        policy = LocalHFPolicy(random_dir, temperature=1.0, max_new_tokens=16, seed=seed)
        return [policy.generate([first_messages(policy)])[0].token_ids for _ in range(2)]

    state = torch.get_rng_state()
    first = sample(7)
    assert torch.equal(torch.get_rng_state(), state)
    assert sample(7) == first
    assert first[0] != first[1]  # each call has its own stream


# ----------------------------------------------------------------------------- batches


def test_a_batch_of_conversations_samples_like_each_alone(trained_dir, scripted_episode):
    _, scripted, messages, _ = scripted_episode
    policy = LocalHFPolicy(trained_dir, temperature=0.0, max_new_tokens=64, return_logprobs=True)
    short = messages[:2]  # system + prompt
    long = messages[:4]  # ... + the calculator call and its result
    alone = [policy.generate([short])[0], policy.generate([long])[0]]
    together = policy.generate([short, long])
    for a, b in zip(alone, together, strict=True):
        assert b.token_ids == a.token_ids and b.text == a.text
        assert b.finish_reason == "stop"
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4)
    assert cf.parse_assistant(together[1].text) == scripted[1][0].action
    # prompts given as token ids, and a budget that cuts the completion short
    ids = cf.tokenize(short, policy.tokenizer, add_generation_prompt=True).input_ids
    (cut,) = policy.generate_ids([ids], max_new_tokens=3)
    assert cut.finish_reason == "length" and cut.token_ids == alone[0].token_ids[:3]


def test_a_row_seed_draws_what_the_seeded_policy_draws_alone(random_dir):
    """Per-row streams: a row with its own seed samples exactly the tokens a policy with that
    call seed samples alone, whether the row is decoded alone or in a padded batch."""
    settings = {"temperature": 1.3, "top_p": 0.9, "max_new_tokens": 24}
    seeds = [3, 11, 42]
    prompts = []
    for n, seed in enumerate(seeds):
        policy = LocalHFPolicy(random_dir, seed=seed, **settings)
        messages = first_messages(policy)
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + " x" * n * 3}
        prompts.append(
            cf.tokenize(messages, policy.tokenizer, add_generation_prompt=True).input_ids
        )
    alone = [
        LocalHFPolicy(random_dir, seed=seed, **settings).generate_ids([ids])[0].token_ids
        for seed, ids in zip(seeds, prompts, strict=True)
    ]
    call_seeds = [seed * 1_000_003 + 1 for seed in seeds]  # each policy's first call
    unseeded = LocalHFPolicy(random_dir, **settings)
    single = [
        unseeded.generate_ids([ids], row_seeds=[s])[0].token_ids
        for s, ids in zip(call_seeds, prompts, strict=True)
    ]
    batch = [g.token_ids for g in unseeded.generate_ids(prompts, row_seeds=call_seeds)]
    assert single == alone
    assert batch == alone
    assert len({tuple(t) for t in alone}) == 3  # the rows really differ
    with pytest.raises(ConfigError, match="one seed per prompt"):
        unseeded.generate_ids(prompts, row_seeds=call_seeds[:2])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_policies_acting_together_decide_what_each_decides_alone(random_dir, temperature):
    """act_together (one batch through the shared model) gives every episode the decision, the
    tokens and the log-probs it gets from act; later calls go on from the same streams."""
    tools = list(TOOLS)
    prompts = [f"What is {a}+{b}? Use the calculator tool." for a, b in [(2, 3), (10, 41), (7, 9)]]

    def policies():
        return [
            LocalHFPolicy(
                random_dir,
                temperature=temperature,
                max_new_tokens=20,
                seed=seed,
                return_logprobs=True,
            )
            for seed in (1, 2, 3)
        ]

    alone, together = policies(), policies()
    for _ in range(2):  # two calls: the second continues each policy's stream
        expected = [p.act(q, [], tools) for p, q in zip(alone, prompts, strict=True)]
        got = LocalHFPolicy.act_together(together, [(q, [], tools) for q in prompts])
        for a, b in zip(expected, got, strict=True):
            assert (b.raw, b.action, b.error, b.token_ids) == (
                a.raw,
                a.action,
                a.error,
                a.token_ids,
            )
            assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4)
    # policies that cannot share a batch (different settings) still answer, one by one
    mixed = policies()
    mixed[1].temperature = 0.5
    assert len(LocalHFPolicy.act_together(mixed, [(q, [], tools) for q in prompts])) == 3


def test_system_gives_the_instructions_before_the_tools(random_dir):
    policy = LocalHFPolicy(random_dir, system="Solve arithmetic.")
    messages = policy.messages(PROMPT, [], TOOLS)
    assert messages[0] == {
        "role": "system",
        "content": cf.system_prompt(TOOLS, instructions="Solve arithmetic."),
    }
    assert messages[0]["content"].startswith("Solve arithmetic.\n\n# Tools")
    assert messages[1] == {"role": "user", "content": PROMPT}


def test_a_model_that_lacks_the_format_tokens_gets_them_and_still_runs(tmp_path):
    """Any local model: the policy adds the format's tokens and resizes the embeddings."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet, show_progress=False)
    backend.train_from_iterator([PROMPT] * 3, trainer=trainer)
    plain = PreTrainedTokenizerFast(tokenizer_object=backend)
    vocab = len(plain)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    plain.save_pretrained(tmp_path)

    policy = LocalHFPolicy(tmp_path, temperature=1.0, max_new_tokens=8, seed=0)
    decision = policy.act(PROMPT, [], TOOLS)
    assert decision.action is None and decision.error
    assert len(policy.tokenizer) == vocab + 5
    assert policy.model.get_input_embeddings().num_embeddings == vocab + 5


def test_from_model_wraps_a_model_in_memory(trained_dir):
    loaded = LocalHFPolicy(trained_dir, temperature=0.0, max_new_tokens=64)
    wrapped = LocalHFPolicy.from_model(loaded.model, loaded.tokenizer, temperature=0.0)
    assert wrapped.act(PROMPT, [], TOOLS).raw == loaded.act(PROMPT, [], TOOLS).raw


# ----------------------------------------------------------------------------- failures


def test_an_unusable_directory_is_a_clear_policy_error(tmp_path, random_dir):
    missing = LocalHFPolicy(tmp_path / "nope")  # nothing is loaded before the first use
    with pytest.raises(PolicyError, match="does not exist"):
        missing.act(PROMPT, [], TOOLS)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PolicyError, match=r"holds no model: config.json, weights \(model.safe"):
        LocalHFPolicy(empty).load()
    no_tokenizer = tmp_path / "no-tokenizer"
    no_tokenizer.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(random_dir / name, no_tokenizer / name)
    with pytest.raises(PolicyError, match="holds no tokenizer: expected tokenizer.json"):
        LocalHFPolicy(no_tokenizer).load()
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(PolicyError, match="holds a LoRA adapter"):
        LocalHFPolicy(adapter).load()


def test_a_prompt_longer_than_the_context_is_a_policy_error(tmp_path):
    policy = LocalHFPolicy(build_tiny_model(tmp_path / "m", seed=2), max_new_tokens=50)
    policy.model.config.max_position_embeddings = 100
    with pytest.raises(
        PolicyError, match=r"the prompt has \d+ tokens and the model takes at most 100"
    ):
        policy.act(PROMPT, [], TOOLS)
    # a prompt that fits gets at most the rest of the context
    (generation,) = policy.generate_ids([list(range(1, 96))], temperature=1.0)
    assert len(generation.token_ids) <= 5


def test_bad_settings_are_config_errors(random_dir):
    with pytest.raises(ConfigError, match="temperature"):
        LocalHFPolicy(random_dir, temperature=-1)
    with pytest.raises(ConfigError, match="top_p"):
        LocalHFPolicy(random_dir, top_p=0)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        LocalHFPolicy(random_dir, max_new_tokens=0)
    with pytest.raises(PolicyError, match="does not know the task prompt"):
        LocalHFPolicy(random_dir).act("5", [Turn(action=None, observation="5")], TOOLS)
    if not torch.cuda.is_available():
        with pytest.raises(EnvironmentUnavailable, match="CUDA is not available"):
            LocalHFPolicy(random_dir, device="cuda").load()


def test_importing_the_policy_and_the_format_loads_no_model_library():
    code = (
        "import sys, trainer_core.policies.local_hf, trainer_core.policies.chat_format\n"
        "heavy = {'torch', 'transformers', 'tokenizers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_policies_of_one_directory_share_a_load_until_the_checkpoint_changes(tmp_path):
    """A collect run builds a policy per episode: the model is loaded from disk once per process,
    and a checkpoint rewritten in place (a new training run saving there) is loaded again."""
    path = build_tiny_model(tmp_path / "m", seed=3)
    first, second = LocalHFPolicy(path, device="cpu"), LocalHFPolicy(path, device="cpu")
    assert first.model is second.model and first.tokenizer is second.tokenizer
    rebuilt = build_tiny_model(tmp_path / "m", seed=4)  # same directory, new weights
    third = LocalHFPolicy(rebuilt, device="cpu")
    assert third.model is not first.model
    weights = next(iter(third.model.parameters()))
    assert not torch.equal(weights, next(iter(first.model.parameters())))
