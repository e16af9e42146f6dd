"""Episodes of the policy being trained, for online GRPO: each task played ``group_size``
times in its environment, all live episodes decoded together turn by turn, and each episode kept
as the token ids the model saw and sampled (see :mod:`trainer_core.training.grpo`).

:class:`Completion` and :class:`Group` are what the GRPO trainer learns from, online (from
:func:`rollout_groups`) and offline (from exported groups). For decoupled training
(:mod:`trainer_core.training.decoupled`) a group also carries the policy version that sampled it
and, per token, the behaviour log-probs ``log μ(a_t)`` of the distribution actually sampled from
(``rollout_groups(..., record_behaviour=True)``); :meth:`Group.to_dict` / :meth:`Group.from_dict`
are its JSON form (a store's payload, a spool file).

Sampling is from ``softmax(logits / temperature)`` with no top-p or top-k truncation: the
importance weights of off-policy training need the log-probs of the whole distribution, so a
generator that truncates it is refused.

A model sharded over processes (FSDP) samples in lockstep: every forward pass is a collective,
so a process whose episodes have all ended keeps taking part in the others' turns (a throwaway
one-token prompt) until every process is done, and :func:`sequence_logprobs` runs the model even
for a sequence without labels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainer_core.errors import ConfigError, InputError
from trainer_core.training.data import Encoded
from trainer_core.training.modelling import IGNORE_INDEX

__all__ = [
    "Completion",
    "EpisodeSettings",
    "TokenGenerator",
    "Group",
    "load_tasks_for",
    "rollout_groups",
    "sequence_logprobs",
]


class EpisodeSettings(Protocol):
    """The options episodes are played with: the fields of
    :class:`~trainer_core.training.grpo.GRPOConfig` this module reads (see their help there)."""

    env_id: str
    tasks: str
    num_tasks: int
    group_size: int
    system_prompt: bool
    temperature: float
    max_new_tokens: int
    max_episode_steps: int
    max_length: int
    observation_masking: bool


class TokenGenerator(Protocol):
    """What samples the episodes' turns: :class:`~trainer_core.policies.local_hf.LocalHFPolicy`
    (``from_model`` around the model being trained) or an inference server's backend. One
    completion per prompt (token ids), each a ``local_hf.Generation`` (sampled ids, their
    log-probs when asked for, the finish reason)."""

    def generate_ids(self, prompts: list[list[int]]) -> list[Any]: ...


@dataclass
class Completion:
    """One trajectory of a group, encoded with its prompt."""

    encoded: Encoded  # labels only on the completion's tokens that carry loss
    reward: float  # the trajectory's outcome reward R (the outcome estimator's)
    step_rewards: list[float | None]  # the reward model's r_t per assistant turn (None: unscored)
    success: bool | None = None  # online: the environment's outcome
    # log μ(a_t) per token of encoded.input_ids under the distribution sampled from (temperature
    # applied); 0.0 where the policy did not sample the token (prompt, observations, an
    # <|im_end|> added after a turn cut at max_new_tokens). None: not recorded.
    behaviour_logprobs: list[float] | None = None
    # the episode's readable turns, one dict per assistant turn: text (what the model wrote),
    # action (the parsed tool call, None when it wrote none), error (why it is not an action),
    # observation (what came back), reward (the environment's for the turn). None offline.
    turns: list[dict[str, Any]] | None = None


@dataclass
class Group:
    """The completions of one prompt (task), learnt from together (advantages are relative to
    the group). Decoupled training also records which policy ``version`` sampled every one of its
    completions, the store's ``id`` of the group (lineage) and the sampling ``seed``."""

    completions: list[Completion]
    key: str  # the task id (online) or the row index (offline)
    version: int | None = None  # the policy version that sampled all its completions
    id: int | str | None = None  # the store's id (a spool's counter, a database row)
    seed: int | None = None  # the seed its episodes were sampled with

    def to_dict(self) -> dict[str, Any]:
        """The group as JSON-safe data (lists, numbers, strings, None); :meth:`from_dict` reads
        it back equal."""
        return {
            "key": self.key,
            "version": self.version,
            "id": self.id,
            "seed": self.seed,
            "completions": [_completion_dict(c) for c in self.completions],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Group:
        """A group from :meth:`to_dict`'s form; InputError naming what is missing or wrong."""
        if not isinstance(data, Mapping) or not isinstance(data.get("completions"), list):
            raise InputError("a group is a mapping with a list of completions (Group.to_dict())")
        version, seed, gid = data.get("version"), data.get("seed"), data.get("id")
        for name, value in (("version", version), ("seed", seed)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InputError(f"a group's {name} must be a whole number or null, not {value!r}")
        if gid is not None and (isinstance(gid, bool) or not isinstance(gid, (int, str))):
            raise InputError(f"a group's id must be a number, text or null, not {gid!r}")
        completions = [_completion_from_dict(c, i) for i, c in enumerate(data["completions"])]
        return cls(completions, str(data.get("key", "")), version, gid, seed)


def _completion_dict(c: Completion) -> dict[str, Any]:
    e = c.encoded
    return {
        "input_ids": list(e.input_ids),
        "labels": list(e.labels),
        "step_ids": list(e.step_ids),
        "weights": [float(w) for w in e.weights],
        "behaviour_logprobs": (
            None if c.behaviour_logprobs is None else [float(x) for x in c.behaviour_logprobs]
        ),
        "reward": float(c.reward),
        "step_rewards": [None if r is None else float(r) for r in c.step_rewards],
        "success": c.success,
        "turns": c.turns,
    }


def _completion_from_dict(data: Any, index: int) -> Completion:
    where = f"completion {index}"
    if not isinstance(data, Mapping):
        raise InputError(f"{where} must be a mapping (Group.to_dict())")
    lists = {}
    for name in ("input_ids", "labels", "step_ids", "weights"):
        value = data.get(name)
        if not isinstance(value, list):
            raise InputError(f"{where}: {name} must be a list")
        lists[name] = value
    n = len(lists["input_ids"])
    behaviour = data.get("behaviour_logprobs")
    lengths = [len(v) for v in lists.values()] + ([len(behaviour)] if behaviour is not None else [])
    if any(length != n for length in lengths):
        raise InputError(
            f"{where}: input_ids, labels, step_ids, weights and behaviour_logprobs must have one "
            "entry per token each"
        )
    reward = data.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or math.isnan(reward):
        raise InputError(f"{where}: reward must be a number, not {reward!r}")
    steps = data.get("step_rewards")
    if not isinstance(steps, list):
        raise InputError(f"{where}: step_rewards must be a list (null for an unscored step)")
    encoded = Encoded(
        [int(t) for t in lists["input_ids"]],
        [int(t) for t in lists["labels"]],
        [int(t) for t in lists["step_ids"]],
        [float(w) for w in lists["weights"]],
    )
    return Completion(
        encoded,
        float(reward),
        [None if r is None else float(r) for r in steps],
        success=data.get("success"),
        behaviour_logprobs=None if behaviour is None else [float(x) for x in behaviour],
        turns=data.get("turns"),
    )


def load_tasks_for(config: EpisodeSettings) -> list[Any]:
    """The online prompts: the task file, else the arithmetic train split; the first
    ``num_tasks`` of them (all with 0)."""
    if config.tasks:
        from trainer_core.tasks.files import load_tasks

        tasks = list(load_tasks(config.tasks).tasks)
    elif config.env_id.strip() == "steplab/arithmetic":
        from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

        tasks = arithmetic_tasks("train", n=config.num_tasks or 64)
    else:
        raise ConfigError(
            f"GRPOConfig: env {config.env_id!r} needs tasks: give a task file (JSONL or YAML)"
        )
    tasks = tasks[: config.num_tasks] if config.num_tasks else tasks
    if not tasks:
        raise ConfigError("GRPOConfig: the task file holds no tasks")
    return tasks


def _observation_ids(tokenizer: Any, role: str, text: str) -> list[int]:
    """Ids of what follows an assistant turn's ``<|im_end|>``: the newline, the observation as a
    ``role`` message, and the next assistant header — exactly as :func:`chat_format.tokenize`
    encodes them."""
    from trainer_core.policies import chat_format

    head = [{"role": "assistant", "content": "x"}]
    before = chat_format.tokenize(head, tokenizer).input_ids
    full = chat_format.tokenize(
        [*head, {"role": role, "content": text}], tokenizer, add_generation_prompt=True
    ).input_ids
    end = len(before) - 1 - before[::-1].index(tokenizer.convert_tokens_to_ids(chat_format.IM_END))
    return full[end + 1 :]


@dataclass
class _Episode:
    env: Any
    group: int
    ids: list[int]
    labels: list[int]
    steps: list[int]
    behaviour: list[float]  # the generator's log-prob of each sampled token, 0.0 elsewhere
    rewards: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    success: bool = False
    done: bool = False


def _start_episodes(
    episodes: list[_Episode], tasks: Sequence[Any], tokenizer: Any, config: EpisodeSettings
) -> None:
    """Append ``group_size`` fresh episodes of each task to ``episodes`` (the caller closes their
    environments): the environment reset, the prompt (the tools' system prompt when
    ``config.system_prompt``, then the task) tokenized up to the assistant header."""
    from trainer_core.envs.registry import make
    from trainer_core.policies import chat_format

    for g, task in enumerate(tasks):
        for _ in range(config.group_size):
            env = make(config.env_id)
            ts = env.reset(task=task)
            system = (
                chat_format.system_prompt(env.available_tools) if config.system_prompt else None
            )
            messages = chat_format.to_messages(prompt=ts.observation, history=[], system=system)
            ids = chat_format.tokenize(messages, tokenizer, add_generation_prompt=True).input_ids
            n = len(ids)
            episodes.append(_Episode(env, g, ids, [IGNORE_INDEX] * n, [-1] * n, [0.0] * n))


def _play_turn(
    e: _Episode, generation: Any, turn: int, tokenizer: Any, im_end: int, config: EpisodeSettings
) -> None:
    """Append one sampled turn to episode ``e``, play it in the environment, and append the
    observation and the next assistant header (or end the episode: done, out of turns, or no room
    for another turn within ``max_length``)."""
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Decision, play_step

    sampled = list(generation.token_ids)
    e.ids += sampled
    e.labels += sampled
    e.steps += [turn] * len(sampled)
    logprobs = generation.logprobs
    e.behaviour += [float(x) for x in logprobs] if logprobs else [0.0] * len(sampled)
    if generation.finish_reason != "stop":  # the format closes the turn
        e.ids.append(im_end)
        e.labels.append(IGNORE_INDEX)
        e.steps.append(-1)
        e.behaviour.append(0.0)
    parsed = chat_format.parse_assistant(generation.text)
    action = parsed if isinstance(parsed, dict) else None
    error = parsed if isinstance(parsed, str) else None
    ts = play_step(e.env, Decision(action=action, error=error, raw=generation.text))
    e.rewards.append(float(ts.reward))
    e.turns.append(
        {
            "text": generation.text,
            "action": action,
            "error": error,
            "observation": ts.observation,
            "reward": float(ts.reward),
        }
    )
    if ts.done or turn == config.max_episode_steps - 1:
        e.done = True
        e.success = bool((ts.info.get("outcome") or {}).get("success"))
        return
    more = _observation_ids(tokenizer, "tool" if action else "user", ts.observation)
    if len(e.ids) + len(more) + config.max_new_tokens > config.max_length:
        e.done = True  # no room for another turn
        return
    e.ids += more
    e.labels += [IGNORE_INDEX] * len(more)
    e.steps += [-1] * len(more)
    e.behaviour += [0.0] * len(more)


def _completion(e: _Episode, config: EpisodeSettings) -> Completion:
    """A finished episode as a :class:`Completion`: without ``observation_masking`` every token
    after the prompt carries loss. Its reward is the environment's (the outcome reward of the
    submission); its steps have no reward model's scores (``None``). Behaviour log-probs are
    left to :func:`rollout_groups` (recorded or not)."""
    labels = e.labels
    if not config.observation_masking:
        start = e.steps.index(0) if 0 in e.steps else len(e.ids)
        labels = [IGNORE_INDEX if p < start else t for p, t in enumerate(e.ids)]
    encoded = Encoded(e.ids, labels, e.steps, [1.0] * len(e.ids))
    steps: list[float | None] = [None] * max(1, len(e.rewards))
    return Completion(encoded, float(sum(e.rewards)), steps, success=e.success, turns=e.turns)


def _check_generator(generator: Any, record_behaviour: bool) -> None:
    """Refuse a generator that truncates the sampling distribution (top-p below 1, top-k above
    0): importance weights need the log-probs of the whole tempered distribution."""
    top_p = getattr(generator, "top_p", None)
    top_k = getattr(generator, "top_k", None)
    if top_p is not None and float(top_p) < 1.0:
        raise ConfigError(
            f"the generator samples with top_p={top_p}: RL samples from the whole distribution "
            "(its log-probs are the behaviour log-probs); set top_p to 1.0"
        )
    if top_k not in (None, 0, -1):
        raise ConfigError(
            f"the generator samples with top_k={top_k}: RL samples from the whole distribution "
            "(its log-probs are the behaviour log-probs); turn top_k off (0 or -1)"
        )
    if record_behaviour and getattr(generator, "return_logprobs", True) is False:
        raise ConfigError(
            "record_behaviour needs the generator's log-probs: make it return them "
            "(LocalHFPolicy(return_logprobs=True); an inference server asked for logprobs)"
        )


def sequence_logprobs(
    model: Any, ids: Sequence[int], labels: Sequence[int], temperature: float
) -> list[float]:
    """Per token of ``ids``, ``log softmax(logits / temperature)`` of that token given the tokens
    before it (teacher-forced), 0.0 where ``labels`` is IGNORE_INDEX (and at the first token).
    One sequence alone (no padding), no gradient, the model in eval mode for the call, logits in
    fp32; the LM head runs only from the first labelled position on (a function of ``labels``,
    so the same ``ids`` and ``labels`` always give the same computation)."""
    import torch

    if len(ids) != len(labels):
        raise InputError(f"{len(ids)} ids but {len(labels)} labels: give one label per token")
    if not temperature > 0:
        raise ConfigError(f"temperature must be above 0 (got {temperature})")
    from trainer_core.policies.local_hf import is_sharded_model

    n = len(ids)
    first = next((t for t in range(1, n) if labels[t] != IGNORE_INDEX), None)
    if first is None and not is_sharded_model(model):
        return [0.0] * n
    device = next(model.parameters()).device
    keep = n - first + 1 if first is not None else 1  # logits at positions first-1 .. n-1
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            x = torch.tensor([list(ids)], dtype=torch.long, device=device)
            out = model(input_ids=x, logits_to_keep=keep)
            if first is None:  # the forward pass was the other processes' collective
                return [0.0] * n
            logits = out.logits[0, :-1, :].float() / temperature  # predicts first .. n-1
            target = torch.tensor(list(labels[first:]), dtype=torch.long, device=device)
            picked = logits.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            logp = picked - torch.logsumexp(logits, dim=-1)
            logp = torch.where(target != IGNORE_INDEX, logp, torch.zeros_like(logp))
    finally:
        model.train(was_training)
    return [0.0] * first + logp.tolist()


def _check_logprobs(generation: Any) -> None:
    """A generation's log-probs, one per sampled token, are needed to record behaviour."""
    logprobs = generation.logprobs
    if logprobs is None:
        raise ConfigError(
            "the generator returned no log-probs with its tokens: record_behaviour needs them "
            "(ask the server or policy for logprobs)"
        )
    if len(logprobs) != len(generation.token_ids):
        raise ConfigError(
            f"the generator returned {len(logprobs)} log-probs for {len(generation.token_ids)} "
            "sampled tokens; it must return one per token"
        )


def _record_behaviour(
    episodes: list[_Episode],
    completions: list[Completion],
    model: Any,
    config: EpisodeSettings,
    *,
    generated: bool,
) -> None:
    """Set each completion's behaviour log-probs: the generator's own (``generated``), else
    recomputed by :func:`sequence_logprobs` on ``model``
    (teacher-forced, each completion alone, as the trainer computes π_old) — kept on the sampled
    tokens only, 0.0 elsewhere."""
    for e, c in zip(episodes, completions, strict=True):
        if generated:
            c.behaviour_logprobs = list(e.behaviour)
            continue
        values = sequence_logprobs(model, c.encoded.input_ids, c.encoded.labels, config.temperature)
        c.behaviour_logprobs = [v if s >= 0 else 0.0 for v, s in zip(values, e.steps, strict=True)]


def _anyone_samples(mine: bool, lockstep: Any) -> bool:
    """Whether a turn is played: this process has live episodes (``mine``) or, with a sharded
    model (``lockstep``: the model, else None), any process has."""
    if lockstep is None:
        return mine
    import torch

    flag = torch.tensor([1.0 if mine else 0.0], device=next(lockstep.parameters()).device)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return bool(flag.item())


def rollout_groups(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Any],
    config: EpisodeSettings,
    *,
    seed: int,
    record_behaviour: bool = False,
    generator: TokenGenerator | None = None,
) -> list[Group]:
    """Play ``group_size`` episodes of each task (see the module docstring); one :class:`Group`
    per task, its ``seed`` set. The turns are sampled by ``generator`` when given (anything with
    ``generate_ids(prompts) -> [Generation]``, e.g. an inference server's backend; its own seeding
    applies), else by ``model`` wrapped in a
    :class:`~trainer_core.policies.local_hf.LocalHFPolicy` seeded by ``seed`` (leaving the global
    random state as it was).

    ``record_behaviour``: set every completion's ``behaviour_logprobs`` — with a generator, the
    log-probs it returned with each sampled token (a ConfigError when it returns none); with a
    model, recomputed after the episodes by :func:`sequence_logprobs` (teacher-forced, no grad, one
    completion at a time without padding, fp32 logits / temperature) — the function the
    decoupled trainer computes π_old with, so equal weights give importance weights of exactly 1.
    """
    from trainer_core.policies import chat_format
    from trainer_core.policies.local_hf import LocalHFPolicy, is_sharded_model

    if generator is None and model is None:
        raise ConfigError("rollout_groups needs a model or a generator to sample with")
    if generator is not None:
        _check_generator(generator, record_behaviour)
    im_end = tokenizer.convert_tokens_to_ids(chat_format.IM_END)
    policy = generator or LocalHFPolicy.from_model(
        model,
        tokenizer,
        temperature=config.temperature,
        max_new_tokens=config.max_new_tokens,
        seed=seed,
    )
    episodes: list[_Episode] = []
    was_training = model.training if model is not None and generator is None else None
    lockstep = model if generator is None and is_sharded_model(model) else None
    try:
        _start_episodes(episodes, tasks, tokenizer, config)
        if was_training is not None:
            model.eval()
        for turn in range(config.max_episode_steps):
            live = [
                e
                for e in episodes
                if not e.done and len(e.ids) + config.max_new_tokens <= config.max_length
            ]
            if not _anyone_samples(bool(live), lockstep):
                break
            if not live:  # another process still samples: take part in its forward passes
                policy.generate_ids([[im_end]])
                continue
            generations = policy.generate_ids([e.ids for e in live])
            for e, generation in zip(live, generations, strict=True):
                if generator is not None and record_behaviour:
                    _check_logprobs(generation)
                _play_turn(e, generation, turn, tokenizer, im_end, config)
    finally:
        if was_training is not None:
            model.train(was_training)
        for e in episodes:
            e.env.close()
    completions = [_completion(e, config) for e in episodes]
    if record_behaviour:
        _record_behaviour(episodes, completions, model, config, generated=generator is not None)
    groups = [
        Group(completions=[], key=str(getattr(t, "id", i)), seed=seed) for i, t in enumerate(tasks)
    ]
    for e, c in zip(episodes, completions, strict=True):
        groups[e.group].completions.append(c)
    return groups
