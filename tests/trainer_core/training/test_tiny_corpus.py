"""The lookup tokenizer corpus: real reference episodes with the generator's names taken out, so
that a tokenizer trained on it learns no merge inside a name (held-out names tokenize like
training ones)."""

from __future__ import annotations

import re

from trainer_core.tasks.suites.lookup import lookup_tasks
from trainer_core.training.tiny import _name_words, lookup_corpus


def test_the_lookup_corpus_holds_episodes_but_no_pool_name():
    texts = lookup_corpus(n_episodes=3)
    episodes = texts[:3]
    assert all('"fetch"' in t and '"submit"' in t for t in episodes)
    pool = _name_words()
    words = {w for t in episodes for w in re.findall(r"\b[A-Z][a-z]+\b", t)}
    assert not words & pool
    with_names = lookup_corpus(n_episodes=3, names=True)
    task = lookup_tasks("train", n=1, start=500_000)[0]
    subject = next(w for w in re.findall(r"\b[A-Z][a-z]+\b", task.prompt) if w in pool)
    assert subject in with_names[0] and subject not in episodes[0]
