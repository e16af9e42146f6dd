"""trainer_core: Steplab's plain Python library (environments, sandboxes, tasks, policies,
recording, rewards, datasets, training, evaluation).

It imports no Django, Celery, webapp or workers, and importing it never imports torch,
transformers, peft, accelerate or datasets (those load lazily where training needs them).
"""

__version__ = "0.1.0"
