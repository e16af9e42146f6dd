"""Episodes of the policy being trained, for online GRPO: each task played ``group_size``
times in its environment, all live episodes decoded together turn by turn, and each episode kept
as the token ids the model saw and sampled (see :mod:`trainer_core.training.grpo`).

:class:`Completion` and :class:`Group` are what the GRPO trainer learns from, online (from
:func:`rollout_groups`) and offline (from exported groups).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainer_core.errors import ConfigError
from trainer_core.training.data import Encoded
from trainer_core.training.modelling import IGNORE_INDEX

__all__ = ["Completion", "EpisodeSettings", "Group", "load_tasks_for", "rollout_groups"]


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


@dataclass
class Completion:
    """One trajectory of a group, encoded with its prompt."""

    encoded: Encoded  # labels only on the completion's tokens that carry loss
    reward: float  # the trajectory's outcome reward R (the outcome estimator's)
    step_rewards: list[float | None]  # the reward model's r_t per assistant turn (None: unscored)
    success: bool | None = None  # online: the environment's outcome


@dataclass
class Group:
    completions: list[Completion]
    key: str  # the task id (online) or the row index (offline)


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
    rewards: list[float] = field(default_factory=list)
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
            episodes.append(_Episode(env, g, ids, [IGNORE_INDEX] * len(ids), [-1] * len(ids)))


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
    if generation.finish_reason != "stop":  # the format closes the turn
        e.ids.append(im_end)
        e.labels.append(IGNORE_INDEX)
        e.steps.append(-1)
    parsed = chat_format.parse_assistant(generation.text)
    action = parsed if isinstance(parsed, dict) else None
    error = parsed if isinstance(parsed, str) else None
    ts = play_step(e.env, Decision(action=action, error=error, raw=generation.text))
    e.rewards.append(float(ts.reward))
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


def _completion(e: _Episode, config: EpisodeSettings) -> Completion:
    """A finished episode as a :class:`Completion`: without ``observation_masking`` every token
    after the prompt carries loss. Its reward is the environment's (the outcome reward of the
    submission); its steps have no reward model's scores (``None``)."""
    labels = e.labels
    if not config.observation_masking:
        start = e.steps.index(0) if 0 in e.steps else len(e.ids)
        labels = [IGNORE_INDEX if p < start else t for p, t in enumerate(e.ids)]
    encoded = Encoded(e.ids, labels, e.steps, [1.0] * len(e.ids))
    steps: list[float | None] = [None] * max(1, len(e.rewards))
    return Completion(encoded, float(sum(e.rewards)), steps, success=e.success)


def rollout_groups(
    model: Any, tokenizer: Any, tasks: Sequence[Any], config: EpisodeSettings, *, seed: int
) -> list[Group]:
    """Play ``group_size`` episodes of each task with ``model`` (see the module docstring); one
    :class:`Group` per task. Sampling is seeded by ``seed`` and leaves the global random state
    as it was."""
    from trainer_core.policies import chat_format
    from trainer_core.policies.local_hf import LocalHFPolicy

    im_end = tokenizer.convert_tokens_to_ids(chat_format.IM_END)
    policy = LocalHFPolicy.from_model(
        model,
        tokenizer,
        temperature=config.temperature,
        max_new_tokens=config.max_new_tokens,
        seed=seed,
    )
    episodes: list[_Episode] = []
    was_training = model.training
    try:
        _start_episodes(episodes, tasks, tokenizer, config)
        model.eval()
        for turn in range(config.max_episode_steps):
            live = [
                e
                for e in episodes
                if not e.done and len(e.ids) + config.max_new_tokens <= config.max_length
            ]
            if not live:
                break
            for e, generation in zip(live, policy.generate_ids([e.ids for e in live]), strict=True):
                _play_turn(e, generation, turn, tokenizer, im_end, config)
    finally:
        model.train(was_training)
        for e in episodes:
            e.env.close()
    groups = [Group(completions=[], key=str(getattr(t, "id", i))) for i, t in enumerate(tasks)]
    for e in episodes:
        groups[e.group].completions.append(_completion(e, config))
    return groups
