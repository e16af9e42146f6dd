"""The decoupled GRPO trainer end to end on tiny models, with a file spool of groups: the
staleness bound (exact dropped counts), versions published without gaps, every group trained at
most once, resume after a trainer stopped mid-run, and a sampler thread feeding the synchronous
baseline."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainer_core.errors import ConfigError  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training.config import config_from_dict  # noqa: E402
from trainer_core.training.decoupled import (  # noqa: E402
    DecoupledConfig,
    GroupsTimeout,
    train_decoupled,
)
from trainer_core.training.episodes import Group, rollout_groups  # noqa: E402
from trainer_core.training.lineage import read_lineage  # noqa: E402
from trainer_core.training.modelling import load_model_and_tokenizer  # noqa: E402
from trainer_core.training.spool import FilePublisher, SpoolSource, spool_group  # noqa: E402
from trainer_core.training.tiny import build_tiny_model  # noqa: E402

torch.set_num_threads(1)

TASKS = arithmetic_tasks("train", n=4)

#: Groups in arrival order with the versions that sampled them. With 2 groups per step, a
#: version published per step and max_staleness 1, the trainer is at version s-1 at step s:
#: step 3 drops groups 4 and 6 (staleness 2), step 4 drops group 8 (staleness 2); groups 2, 3,
#: 5 and 9 are exactly at the bound (staleness 1) and kept.
VERSIONS = [0, 0, 0, 0, 0, 1, 0, 2, 1, 2, 3]
EXPECTED_STEPS = [
    {"step": 1, "version": 0, "consumed": [0, 1], "dropped": []},
    {"step": 2, "version": 1, "consumed": [2, 3], "dropped": []},
    {"step": 3, "version": 2, "consumed": [5, 7], "dropped": [4, 6]},
    {"step": 4, "version": 3, "consumed": [9, 10], "dropped": [8]},
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("decoupled")


@pytest.fixture(scope="module")
def base(workdir):
    return str(build_tiny_model(workdir / "base", hidden_size=48, num_layers=2, seed=1))


def decoupled_config(model_dir, out, **overrides):
    values = dict(
        model_dir=model_dir,
        output_dir=str(out),
        env_id="steplab/arithmetic",
        group_size=2,
        batch_size=2,
        max_steps=4,
        max_staleness=1,
        learning_rate=1e-3,
        temperature=0.7,
        max_new_tokens=12,
        max_episode_steps=2,
        system_prompt=False,
        device="cpu",
        seed=1,
        wait_seconds=30.0,
    )
    values.update(overrides)
    return DecoupledConfig(**values)


@pytest.fixture(scope="module")
def sampled(base, workdir):
    """One group per task sampled by the start model (behaviour recorded), its two completions
    given rewards 1 and 0 so that every group has something to learn."""
    model, tokenizer = load_model_and_tokenizer(base, device="cpu")
    cfg = decoupled_config(base, workdir / "unused")
    groups = rollout_groups(model, tokenizer, TASKS, cfg, seed=3, record_behaviour=True)
    for group in groups:
        for c, reward in zip(group.completions, (1.0, 0.0), strict=True):
            c.reward = reward
    return groups


def fill(spool, sampled, versions):
    """Spool a copy of a sampled group per version, in order; returns their ids."""
    ids = []
    for i, version in enumerate(versions):
        group = Group.from_dict(sampled[i % len(sampled)].to_dict())
        group.version = version
        ids.append(spool_group(spool, group))
    return ids


def check_versions(publisher, base, out, last):
    """Versions 0..last without a gap: 0 the start model, each later one a checkpoint."""
    versions = publisher.versions()
    assert [v["version"] for v in versions] == list(range(last + 1))
    assert versions[0]["path"] == base
    for v in versions[1:]:
        assert v["path"] == str(out / f"checkpoint-{v['step']}")


def trained_ids(source):
    return [gid for record in source.steps() for gid in record["consumed"]]


# --------------------------------------------------------------------------- the config


def test_config_options_are_checked(base, workdir):
    good = decoupled_config(base, workdir / "c")
    good.validate()
    assert good.groups_per_step == 2
    for overrides, match in [
        (dict(max_staleness=-1), "max_staleness"),
        (dict(importance_cap=0.5), "importance_cap"),
        (dict(publish_every=0), "publish_every"),
        (dict(stale_weight=0.0), "stale_weight"),
        (dict(stale_groups="keep"), "stale_groups"),
        (dict(save_every=3), "save_every"),
        (dict(env_id="", dataset="x.jsonl"), "env_id is required"),
    ]:
        with pytest.raises(ConfigError, match=match):
            decoupled_config(base, workdir / "c", **overrides).validate()
    with pytest.raises(ConfigError, match="stale_groups must be one of"):
        config_from_dict(
            DecoupledConfig,
            {
                "model_dir": base,
                "output_dir": "o",
                "env_id": "steplab/arithmetic",
                "stale_groups": "keep",
            },
        )
    assert (
        decoupled_config(base, workdir / "c", synchronous=True, max_staleness=3).max_staleness == 0
    )


# --------------------------------------------------------------------------- the trainer


def test_groups_older_than_the_bound_are_dropped_exactly(base, sampled, workdir):
    out, spool = workdir / "drop", workdir / "drop-spool"
    assert fill(spool, sampled, VERSIONS) == list(range(len(VERSIONS)))
    source, publisher = SpoolSource(spool), FilePublisher(workdir / "drop-versions")
    result = train_decoupled(decoupled_config(base, out), source, publisher)

    assert source.steps() == EXPECTED_STEPS
    assert source.counts() == {"ready": 0, "taken": 0, "consumed": 8, "dropped": 3}
    history = result.metrics_history
    assert [h["dropped"] for h in history] == [0, 0, 2, 1]
    assert [h["dropped_total"] for h in history] == [0, 0, 2, 3]
    assert [h["version"] for h in history] == [0, 1, 2, 3]
    assert [h["staleness_max"] for h in history] == [0, 1, 1, 1]
    assert [h["groups"] for h in history] == [2, 2, 2, 2]
    # step 1 trains the start model's own samples: every importance weight exactly 1
    first = history[0]
    assert first["importance_weight_min"] == first["importance_weight_max"] == 1.0
    assert first["clipped_fraction"] == 0.0
    assert all(1.0 <= h["importance_weight_max"] <= 2.0 for h in history)  # capped at C = 2
    check_versions(publisher, base, out, 4)
    assert [(e["consumed"], e["dropped"]) for e in read_lineage(out)] == [
        (s["consumed"], s["dropped"]) for s in EXPECTED_STEPS
    ]


def test_downweighted_groups_are_all_trained(base, sampled, workdir):
    out, spool = workdir / "down", workdir / "down-spool"
    fill(spool, sampled, VERSIONS[:8])
    source, publisher = SpoolSource(spool), FilePublisher(workdir / "down-versions")
    cfg = decoupled_config(base, out, stale_groups="downweight", stale_weight=0.5)
    result = train_decoupled(cfg, source, publisher)
    assert [r["consumed"] for r in source.steps()] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [r["dropped"] for r in source.steps()] == [[]] * 4
    assert [h["staleness_max"] for h in result.metrics_history] == [0, 1, 2, 3]
    assert result.metrics_history[-1]["dropped_total"] == 0
    check_versions(publisher, base, out, 4)


def test_a_stopped_trainer_resumes_without_training_a_group_twice(base, sampled, workdir):
    out, spool = workdir / "resume", workdir / "resume-spool"
    fill(spool, sampled, VERSIONS)
    source, publisher = SpoolSource(spool), FilePublisher(workdir / "resume-versions")
    first = train_decoupled(decoupled_config(base, out, max_steps=2), source, publisher)
    assert first.steps == 2
    # the trainer then died during step 3: it had settled the step's groups (but not written
    # its checkpoint), and had claimed one more group
    claimed = source.take(2, timeout=0)
    source.settle(3, 2, claimed[1:], claimed[:1])
    source.take(1, timeout=0)
    # ... and version 2 was checkpointed but never published
    (workdir / "resume-versions" / "versions" / "00000002.json").unlink()

    resumed = train_decoupled(decoupled_config(base, out, max_steps=4), source, publisher)
    assert resumed.steps == 4
    assert [h["step"] for h in resumed.metrics_history] == [3, 4]
    assert source.steps() == EXPECTED_STEPS  # as if it had never stopped
    ids = trained_ids(source)
    assert len(ids) == len(set(ids)) == 8
    assert resumed.metrics_history[-1]["dropped_total"] == 3  # the count survives the resume
    check_versions(publisher, base, out, 4)
    assert [e["step"] for e in read_lineage(out)] == [1, 2, 3, 4]
    again = train_decoupled(decoupled_config(base, out, max_steps=4), source, publisher)
    assert again.steps == 4 and again.checkpoint_dir == str(out / "checkpoint-4")


def test_a_trainer_without_groups_fails_clearly(base, workdir):
    source, publisher = SpoolSource(workdir / "empty"), FilePublisher(workdir / "empty-versions")
    cfg = decoupled_config(base, workdir / "empty-out", wait_seconds=0.01)
    with pytest.raises(GroupsTimeout, match="are the samplers running"):
        train_decoupled(cfg, source, publisher)
    assert publisher.latest() == (0, base)  # the start model was published for samplers


def sampler(spool, publisher, cfg, stop, per_version):
    """A synchronous sampler: loads the newest published version, samples ``per_version``
    groups with it (recording behaviour), and waits for the next version."""
    loaded, model, tokenizer, made = None, None, None, {}
    while not stop.is_set():
        latest = publisher.latest()
        if latest is None or made.get(latest[0], 0) >= per_version:
            stop.wait(0.01)
            continue
        version, path = latest
        if loaded != version:
            model, tokenizer = load_model_and_tokenizer(path, device="cpu")
            loaded = version
        task = TASKS[sum(made.values()) % len(TASKS)]
        seed = 100 + sum(made.values())
        (group,) = rollout_groups(model, tokenizer, [task], cfg, seed=seed, record_behaviour=True)
        group.version = version
        spool_group(spool, group)
        made[version] = made.get(version, 0) + 1


def test_the_synchronous_baseline_with_a_sampler_thread(base, workdir):
    out, spool = workdir / "sync", workdir / "sync-spool"
    source, publisher = SpoolSource(spool), FilePublisher(workdir / "sync-versions")
    cfg = decoupled_config(base, out, synchronous=True, max_steps=3)
    stop = threading.Event()
    thread = threading.Thread(
        target=sampler, args=(spool, publisher, cfg, stop, cfg.groups_per_step), daemon=True
    )
    thread.start()
    try:
        result = train_decoupled(cfg, source, publisher)
    finally:
        stop.set()
        thread.join()
    history = result.metrics_history
    assert [h["staleness_max"] for h in history] == [0, 0, 0]
    assert [h["dropped"] for h in history] == [0, 0, 0]
    # each step trains on its version's own samples: π_old equals the behaviour, weights are 1
    assert all(h["importance_weight_min"] == h["importance_weight_max"] == 1.0 for h in history)
    assert [r["version"] for r in source.steps()] == [0, 1, 2]
    ids = trained_ids(source)
    assert len(ids) == len(set(ids)) == 6
    check_versions(publisher, base, out, 3)


def test_process_advantage_trains_on_the_samplers_step_scores(base, sampled, workdir):
    """Decoupled samplers score each episode with the run's reward model, so the process and
    mixed estimators work here (online GRPO in one process refuses them); a group whose
    completions carry no step score is refused with what to do."""
    cfg = decoupled_config(base, workdir / "process", advantage="process", max_steps=1)
    cfg.validate()  # accepted decoupled ...
    from trainer_core.training.grpo import GRPOConfig

    fields = {f: getattr(cfg, f) for f in GRPOConfig.__dataclass_fields__}
    with pytest.raises(ConfigError, match="needs a reward model's step scores"):
        GRPOConfig(**fields).validate()  # ... not in-process

    spool = workdir / "process-unscored"
    fill(spool, sampled, [0, 0])  # the sampled groups have no step scores
    with pytest.raises(ConfigError, match="give the run a reward model"):
        train_decoupled(cfg, SpoolSource(spool), FilePublisher(workdir / "pu-versions"))

    spool = workdir / "process-scored"
    for i in range(2):
        group = Group.from_dict(sampled[i].to_dict())
        group.version = 0
        for c, score in zip(group.completions, (1.0, -1.0), strict=True):
            c.step_rewards = [score] * len(c.step_rewards)
        spool_group(spool, group)
    source = SpoolSource(spool)
    result = train_decoupled(cfg, source, FilePublisher(workdir / "ps-versions"))
    assert result.steps == 1 and source.steps()[0]["consumed"] == [0, 1]
    assert result.metrics_history[0]["grad_norm"] > 0.0  # the step scores gave a gradient
