"""Runs trainers under accelerate's FSDP 2 on the CPU, for ``test_fsdp.py``:
``accelerate launch --use_fsdp --fsdp_version 2 ... fsdp_on_cpu.py JOBS.json``.

accelerate 1.x chooses FSDP only for accelerator processes: with CPU processes it keeps
``MULTI_CPU`` (and wraps the model in DDP) even when launched with ``--use_fsdp``, which is why
the trainers refuse FSDP on the CPU (``modelling.FSDP_NEEDS_GPUS``). torch's FSDP 2
(``fully_shard``) itself runs on the CPU over gloo, so this launcher marks the launched state as
FSDP when accelerate made the FSDP plugin but left the CPU out — the one decision accelerate
makes differently for GPUs. Everything after it is accelerate's and torch's FSDP 2 code as on
GPUs: ``fully_shard`` of each decoder layer, sharded parameters and optimizer state, gradient
reduction, ``clip_grad_norm_`` over shards, and the gathered state dicts of checkpoints.

JOBS.json is a list of ``{"name", "kind", "config"}`` (``kind``: sft, dpo, grpo, or decoupled
with ``"spool"`` and ``"versions"`` directories); each job is run in turn in the same processes,
and the main process prints ``{"name": ..., "result": TrainResult as a dict}`` per job (``"error"``
and the message instead for a job refused with a ConfigError), one JSON line each.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType

_init = AcceleratorState.__init__


def _fsdp_on_cpu(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    plugin = kwargs.get("fsdp_plugin")
    # FSDP already: the state of a later run in the same processes, remade from the launched
    # one (accelerate keeps the process group and its type, and then skips the plugin)
    chosen = (DistributedType.MULTI_CPU, DistributedType.FSDP)
    if plugin is not None and self.distributed_type in chosen:
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = plugin
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
        if self._mixed_precision != "no":
            plugin.set_mixed_precision(self._mixed_precision)


AcceleratorState.__init__ = _fsdp_on_cpu


def run(job: dict) -> object:
    from trainer_core.training.config import config_from_dict
    from trainer_core.training.methods import config_class, train_method

    if job["kind"] == "decoupled":
        from trainer_core.training.decoupled import DecoupledConfig, train_decoupled
        from trainer_core.training.spool import FilePublisher, SpoolSource

        config = config_from_dict(DecoupledConfig, job["config"])
        return train_decoupled(config, SpoolSource(job["spool"]), FilePublisher(job["versions"]))
    config = config_from_dict(config_class(job["kind"]), job["config"])
    return train_method(job["kind"], config)


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        jobs = json.load(fh)
    from trainer_core.errors import ConfigError

    for job in jobs:
        try:
            line = {"name": job["name"], "result": dataclasses.asdict(run(job))}
        except ConfigError as exc:  # refused by every process alike, before any collective
            line = {"name": job["name"], "error": str(exc)}
        if os.environ.get("RANK", "0") == "0":
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
