"""The GRPO trainer, offline on exported groups and online in ``steplab/arithmetic``, on tiny
models built here (random weights, a tokenizer trained on the spot, nothing downloaded)."""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainer_core.errors import ConfigError, InputError  # noqa: E402
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.policies.base import Turn  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training import grpo, sft  # noqa: E402
from trainer_core.training.data import batch_indices, collate  # noqa: E402
from trainer_core.training.lineage import read_lineage  # noqa: E402
from trainer_core.training.modelling import (  # noqa: E402
    IGNORE_INDEX,
    load_model_and_tokenizer,
    sequence_logprobs,
)
from trainer_core.training.tiny import build_tiny_model  # noqa: E402

torch.set_num_threads(1)

TASKS = arithmetic_tasks("train", n=4)


def calc(expression, thought="Use the calculator."):
    return {"tool": "calculator", "params": {"expression": expression}, "thought": thought}


def submit(answer, thought=""):
    return {"tool": "submit", "params": {"answer": answer}, "thought": thought}


def good_turns(task):
    expression, answer = task.metadata["expression"], str(task.expected_answer)
    return [
        Turn(action=calc(expression), observation=f"{expression} = {answer}"),
        Turn(action=submit(answer), observation="ok"),
    ]


def guess_turns(task):
    wrong = str(int(task.expected_answer) + 1)
    return [Turn(action=submit(wrong, "Guess."), observation="no")]


def completion(task, turns):
    return cf.to_messages(prompt=task.prompt, history=turns)[1:]


def group_row(task, *, detour=True):
    """The reference (reward 1) and a guess (reward 0); with ``detour``, first a trajectory with
    a calculator error before the right answer (reward 1, the error's step reward -0.5)."""
    expression = task.metadata["expression"]
    detour_turns = [
        Turn(action=calc(expression + " +"), observation="Error: cannot parse"),
        *good_turns(task),
    ]
    row = {
        "prompt": [{"role": "user", "content": task.prompt}],
        "completions": [completion(task, good_turns(task)), completion(task, guess_turns(task))],
        "rewards": [1.0, 0.0],
        "step_rewards": [[0.0, 0.0], [0.0]],
        "task_id": task.id,
    }
    if detour:
        row["completions"].insert(0, completion(task, detour_turns))
        row["rewards"].insert(0, 1.0)
        row["step_rewards"].insert(0, [-0.5, 0.0, 0.0])
    return row


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("grpo")


@pytest.fixture(scope="module")
def start_model(workdir):
    """A tiny model fine-tuned (SFT, 150 steps) on two behaviours for each of 4 tasks: call the
    calculator then submit its result (success), or guess a wrong answer at once (failure) — so
    sampled rewards start near one half and GRPO has a decision to learn."""
    base = build_tiny_model(workdir / "base", hidden_size=64, num_layers=2, seed=1)
    rows = []
    for task in TASKS:
        rows.append({"messages": cf.to_messages(prompt=task.prompt, history=good_turns(task))})
        rows.append({"messages": cf.to_messages(prompt=task.prompt, history=guess_turns(task))})
    result = sft.train(
        sft.SFTConfig(
            model_dir=str(base),
            output_dir=str(workdir / "sft"),
            dataset=write_jsonl(workdir / "sft.jsonl", rows),
            max_steps=150,
            batch_size=4,
            learning_rate=3e-3,
            lr_schedule="constant",
            device="cpu",
        )
    )
    return result.checkpoint_dir


def online_config(model_dir, out, **overrides):
    values = dict(
        model_dir=model_dir,
        output_dir=str(out),
        env_id="steplab/arithmetic",
        num_tasks=len(TASKS),
        group_size=8,
        batch_size=4,
        max_steps=15,
        learning_rate=1e-3,
        lr_schedule="constant",
        temperature=0.7,
        max_new_tokens=48,
        max_episode_steps=3,
        system_prompt=False,
        device="cpu",
        seed=1,
    )
    values.update(overrides)
    return grpo.GRPOConfig(**values)


def mean_sampled_reward(model_dir, config, *, episodes=16, seed=999):
    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    sample = grpo.GRPOConfig(**{**config.__dict__, "group_size": episodes})
    groups = grpo.rollout_groups(model, tokenizer, TASKS, sample, seed=seed)
    rewards = [c.reward for g in groups for c in g.completions]
    return sum(rewards) / len(rewards)


# --------------------------------------------------------------------------- advantages


def test_each_estimator_reaches_every_token_of_its_step(start_model, workdir):
    """The row's step scores (never with the outcome added) and outcome rewards go to the named
    estimator, and every trained token of a step carries its step's advantage."""
    from trainer_core.training.advantages import estimate

    _, tokenizer = load_model_and_tokenizer(start_model, device="cpu")
    row = group_row(TASKS[0])
    configs = {
        name: online_config(start_model, workdir, env_id="", dataset="x.jsonl", advantage=name)
        for name in ("outcome", "process", "mixed")
    }
    group = grpo.encode_group(row, 0, tokenizer, configs["outcome"])
    assert [c.step_rewards for c in group.completions] == [[-0.5, 0.0, 0.0], [0.0, 0.0], [0.0]]
    assert [c.reward for c in group.completions] == [1.0, 1.0, 0.0]

    def per_turn(cfg):
        out = []
        for c, adv_row in zip(group.completions, grpo.advantage_rows(group, cfg), strict=True):
            turns = {}
            tokens = grpo.token_advantages(c, adv_row)
            for s, label, a in zip(c.encoded.step_ids, c.encoded.labels, tokens, strict=True):
                if label != IGNORE_INDEX:
                    turns.setdefault(s, set()).add(round(a, 6))
            assert all(len(v) == 1 for v in turns.values())  # one advantage per turn
            out.append([next(iter(turns[s])) for s in sorted(turns)])
        return out

    rewards, steps = [1.0, 1.0, 0.0], [[-0.5, 0.0, 0.0], [0.0, 0.0], [0.0]]
    for name, cfg in configs.items():
        expected = estimate(name, rewards, steps)
        assert per_turn(cfg) == [pytest.approx(e, abs=1e-5) for e in expected], name
    outcome = per_turn(configs["outcome"])
    assert outcome[0] == pytest.approx([outcome[0][0]] * 3) and outcome[2][0] < 0 < outcome[0][0]
    process = per_turn(configs["process"])
    assert process[0][0] < process[0][1]  # the calculator error is the step blamed
    # a row's outcome_rewards, when given, are the outcome (its rewards may be reward-model totals)
    scored = {**row, "rewards": [0.9, 0.7, 0.1], "outcome_rewards": [1.0, 1.0, 0.0]}
    again = grpo.encode_group(scored, 0, tokenizer, configs["outcome"])
    assert [c.reward for c in again.completions] == [1.0, 1.0, 0.0]


def test_runs_made_with_the_old_step_level_flag_load_with_the_named_estimator(start_model, workdir):
    from trainer_core.training.config import config_from_dict

    base = dataclasses.asdict(online_config(start_model, workdir, env_id="", dataset="x.jsonl"))
    del base["advantage"]
    del base["process_weight"]
    on = config_from_dict(grpo.GRPOConfig, {**base, "step_level_advantage": True})
    off = config_from_dict(
        grpo.GRPOConfig, {**base, "step_level_advantage": False, "step_error_penalty": 0.1}
    )
    assert (on.advantage, off.advantage) == ("mixed", "outcome")
    with pytest.raises(ConfigError, match="advantage must be one of"):
        config_from_dict(grpo.GRPOConfig, {**base, "advantage": "reward_to_go"})
    with pytest.raises(ConfigError, match="needs a reward model's step scores"):
        online_config(start_model, workdir, advantage="process").validate()


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo", "bnpo"])
def test_offline_grpo_prefers_the_rewarded_trajectories(start_model, workdir, loss_type):
    rows = [group_row(t, detour=False) for t in TASKS]
    dataset = write_jsonl(workdir / "groups.jsonl", rows)
    cfg = online_config(
        start_model,
        workdir / f"offline-{loss_type}",
        env_id="",
        dataset=dataset,
        batch_size=2,
        max_steps=4,
        learning_rate=1e-3,
        beta=0.04 if loss_type == "grpo" else 0.0,
    )
    result = grpo.train(cfg)
    assert result.steps == 4 and all(h["loss"] == h["loss"] for h in result.metrics_history)

    def margin(path):
        model, tokenizer = load_model_and_tokenizer(path, device="cpu")
        groups = [grpo.encode_group(r, i, tokenizer, cfg) for i, r in enumerate(rows)]
        good = [g.completions[0].encoded for g in groups]
        bad = [g.completions[1].encoded for g in groups]
        with torch.no_grad():
            lp = sequence_logprobs(model, collate(good + bad, tokenizer.pad_token_id))
        return float((lp[: len(good)] - lp[len(good) :]).mean())

    assert margin(result.checkpoint_dir) > margin(start_model) + 0.5


class Stop(Exception):
    pass


def test_offline_lineage_lists_each_steps_group_rows_once_across_a_resume(workdir):
    """Each step's line lists the dataset rows of its groups (grad_accum micro-batches of the
    seeded order over the groups kept; a row without 2 completions is dropped, so rows are not
    positions); a run stopped after step 3 (checkpoint at 2) and resumed in its output_dir ends
    with the same lines as one that never stopped."""
    model = str(build_tiny_model(workdir / "lineage-model", hidden_size=32, num_layers=1))
    rows = [group_row(t, detour=False) for t in TASKS]
    single = {**rows[1], "completions": rows[1]["completions"][:1], "rewards": [1.0]}
    del single["step_rewards"]
    rows.insert(1, single)  # row 1: one completion, dropped
    dataset = write_jsonl(workdir / "lineage-groups.jsonl", rows)
    run = dict(env_id="", dataset=dataset, batch_size=2, grad_accum=2, max_steps=4, save_every=2)
    grpo.train(online_config(model, workdir / "lineage-whole", **run))

    def stop_at_3(event):
        if event.step == 3:
            raise Stop

    with pytest.raises(Stop):
        grpo.train(online_config(model, workdir / "lineage-run", **run), on_progress=stop_at_3)
    assert [e["step"] for e in read_lineage(workdir / "lineage-run")] == [1, 2, 3]
    again = online_config(model, workdir / "lineage-run", **run)
    grpo.train(dataclasses.replace(again, resume_from=str(workdir / "lineage-run")))

    kept = [0, 2, 3, 4]
    expected = [
        [kept[i] for m in (0, 1) for i in batch_indices(4, 2, 2 * step + m, 1)] for step in range(4)
    ]
    lineage = read_lineage(workdir / "lineage-run")
    assert lineage == read_lineage(workdir / "lineage-whole")
    assert lineage == [
        {"step": s + 1, "consumed": ids, "dropped": []} for s, ids in enumerate(expected)
    ]


def test_offline_rows_are_checked(start_model, workdir):
    bad = write_jsonl(workdir / "bad.jsonl", [{"prompt": [], "completions": [], "rewards": [1]}])
    cfg = online_config(start_model, workdir / "bad", env_id="", dataset=bad)
    with pytest.raises(InputError, match="row 0"):
        grpo.train(cfg)
    with pytest.raises(ConfigError, match="not both"):
        online_config(start_model, workdir, dataset=bad).validate()
    with pytest.raises(ConfigError, match="unknown GRPO loss type 'ppo'"):
        online_config(start_model, workdir, loss_type="ppo").validate()
    with pytest.raises(ConfigError, match="group_size"):
        online_config(start_model, workdir, group_size=1).validate()


# --------------------------------------------------------------------------- online


def test_rollouts_keep_the_sampled_tokens_and_mask_observations(start_model, workdir):
    model, tokenizer = load_model_and_tokenizer(start_model, device="cpu")
    cfg = online_config(start_model, workdir, group_size=4)
    groups = grpo.rollout_groups(model, tokenizer, TASKS[:2], cfg, seed=3)
    assert [len(g.completions) for g in groups] == [4, 4]
    prompt = cf.tokenize(
        [{"role": "user", "content": TASKS[0].prompt}], tokenizer, add_generation_prompt=True
    ).input_ids
    calls = 0
    for c in groups[0].completions:
        e = c.encoded
        assert e.input_ids[: len(prompt)] == prompt
        assert e.labels[: len(prompt)] == [IGNORE_INDEX] * len(prompt)
        text = tokenizer.decode(e.input_ids)
        if "<|im_start|>tool\n" in text:  # a calculator turn: its result is in the sequence ...
            calls += 1
            observed = text.split("<|im_start|>tool\n")[1].split("<|im_end|>")[0]
            policy = tokenizer.decode([t for t in e.labels if t != IGNORE_INDEX])
            assert observed and observed not in policy  # ... and carries no loss
        assert c.reward in (0.0, 1.0) and c.success == (c.reward == 1.0)
    assert calls > 0


def test_online_grpo_raises_the_mean_sampled_reward(start_model, workdir):
    cfg = online_config(start_model, workdir / "online")
    before = mean_sampled_reward(start_model, cfg)
    result = grpo.train(cfg)
    after = mean_sampled_reward(result.checkpoint_dir, cfg)
    assert 0.2 < before < 0.7  # neither all wrong nor all right: there is something to learn
    assert after > before + 0.2, (before, after)
    assert "success_rate" in result.metrics_history[-1]


def test_online_resume_gives_the_same_next_step(start_model, workdir):
    small = dict(max_steps=2, batch_size=2, group_size=4)
    whole = grpo.train(online_config(start_model, workdir / "whole", **small))
    grpo.train(online_config(start_model, workdir / "part", save_every=1, **small))
    resumed = grpo.train(
        online_config(
            start_model,
            workdir / "resumed",
            resume_from=str(workdir / "part" / "checkpoint-1"),
            **small,
        )
    )
    expected, got = whole.metrics_history[-1], resumed.metrics_history[-1]
    assert got["step"] == 2
    assert got["reward"] == expected["reward"]
    assert got["loss"] == pytest.approx(expected["loss"], abs=1e-6)

    # lineage: each step's tasks with the seed their group was sampled with, once per step
    lineage = read_lineage(workdir / "whole")
    assert read_lineage(workdir / "resumed") == read_lineage(workdir / "part") == lineage
    seeds = [1 * 1_000_003 + step * 7919 for step in (0, 1)]  # run seed, micro-batch, rank 0
    assert lineage == [
        {
            "step": step + 1,
            "consumed": [f"{TASKS[i].id}@{seeds[step]}" for i in batch_indices(4, 2, step, 1)],
            "dropped": [],
        }
        for step in (0, 1)
    ]
    # replaying step 1 from its line (its tasks, their seed; the start model) samples the
    # completions step 1 trained on: the same tokens and mean reward
    by_id = {t.id: t for t in TASKS}
    parsed = [i.rsplit("@", 1) for i in lineage[0]["consumed"]]
    (seed,) = {int(s) for _, s in parsed}
    model, tokenizer = load_model_and_tokenizer(start_model, device="cpu")
    sample = online_config(start_model, workdir, **small)
    groups = grpo.rollout_groups(model, tokenizer, [by_id[t] for t, _ in parsed], sample, seed=seed)
    replayed = [c for g in groups for c in g.completions]
    assert sum(len(c.encoded) for c in replayed) == whole.metrics_history[0]["tokens"]
    mean = sum(c.reward for c in replayed) / len(replayed)
    assert mean == pytest.approx(whole.metrics_history[0]["reward"])


def test_logprobs_skip_the_prompt_logits_and_equal_the_full_computation(start_model):
    """The trainer's log-probs build logits only from the first loss position on; they equal the
    full computation (:func:`token_logprobs`) at temperature 1 and log_softmax(logits / T)."""
    from trainer_core.training.data import Encoded
    from trainer_core.training.modelling import token_logprobs

    model, tokenizer = load_model_and_tokenizer(start_model, device="cpu")
    g = torch.Generator().manual_seed(0)
    rows = []
    for n, start in [(20, 7), (15, 3), (30, 12)]:
        ids = torch.randint(0, 300, (n,), generator=g).tolist()
        rows.append(Encoded(ids, [IGNORE_INDEX] * start + ids[start:], [0] * n, [1.0] * n))
    batch = collate(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        assert torch.allclose(grpo._logprobs(model, batch, 1.0), token_logprobs(model, batch))
        logits = model(input_ids=batch["input_ids"]).logits[:, :-1].float() / 0.7
        labels = batch["labels"][:, 1:]
        picked = logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        expected = torch.nn.functional.pad(picked * (labels != IGNORE_INDEX), (1, 0))
        assert torch.allclose(grpo._logprobs(model, batch, 0.7), expected, atol=1e-5)
