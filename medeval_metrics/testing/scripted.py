"""A scripted lm-eval model backend: answers come from a table, so expected scores are known.

Registered as ``--model medeval-scripted`` when this module is imported (``medeval run`` does
that when asked for this model). ``--model_args table=/path/answers.json`` names a JSON file:

    {"key": "question",                 # doc field whose value selects the row (a list: the first the doc has)
     "generate": {"<key value>": "model output text", ...},
     "choose":   {"<key value>": "B", ...},   # for loglikelihood: this continuation wins
     "prompt":   {"<text in the prompt>": "reply" or ["1st reply", "2nd", ...]},  # requests without a doc
     "default": ""}                     # output for docs not in the table

A doc missing from the table gets ``default``; the table can also be passed as a dict in Python.
``record=/some/folder`` appends the key of every doc this process answers to
``/some/folder/rank<R>.txt`` (one line each), so tests can see how the work was spread.

Data-parallel mode (``--model_args table=...,data_parallel=true``, launched by ``torchrun
--nproc_per_node N``): each process joins a ``torch.distributed`` gloo group (CPU only, no GPU
needed), reports its rank and world size to lm-eval, which then hands it only its shard of the
docs and gathers the per-item metrics on rank 0 through ``all_gather`` / ``gather_object`` /
``barrier`` below. Outside torchrun (no ``WORLD_SIZE``) the flag is a no-op: one process.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (fills the registry first, so our entry does not hide the built-ins)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from medeval_metrics.settings import is_true


@register_model("medeval-scripted")
class ScriptedLM(LM):
    def __init__(
        self,
        table: str | dict[str, Any] | None = None,
        data_parallel: bool | str = False,
        record: str | None = None,
        **_: Any,
    ) -> None:
        super().__init__()
        if isinstance(table, (str, Path)):
            table = json.loads(Path(table).read_text(encoding="utf-8"))
        self.table: dict[str, Any] = table or {}
        self.key = self.table.get("key", "question")
        self.requests_seen: list[Any] = []
        self._prompt_uses: dict[str, int] = {}
        self._device = "cpu"  # lm-eval puts its per-rank request counts on lm.device before all_gather
        self._distributed = is_true(data_parallel) and int(os.environ.get("WORLD_SIZE", "1")) > 1
        if self._distributed:
            import torch.distributed as dist

            if not dist.is_initialized():
                dist.init_process_group(backend="gloo")  # env:// rendezvous that torchrun sets up
                atexit.register(_leave_group)
            self._rank = dist.get_rank()
            self._world_size = dist.get_world_size()
        self.record = Path(record) if record else None

    def _record(self, requests: list[Any]) -> None:
        if self.record is None:
            return
        self.record.mkdir(parents=True, exist_ok=True)
        with (self.record / f"rank{self._rank}.txt").open("a", encoding="utf-8") as handle:
            for request in requests:
                doc = request.doc if isinstance(request.doc, dict) else {}
                handle.write(json.dumps(str(doc.get(self.key))) + "\n")

    # --- data-parallel primitives lm-eval's evaluator calls when world_size > 1 ---

    def all_gather(self, tensor: Any) -> Any:
        if not self._distributed:
            return tensor
        import torch
        import torch.distributed as dist

        tensor = tensor.to("cpu")
        parts = [torch.empty_like(tensor) for _ in range(self._world_size)]
        dist.all_gather(parts, tensor)
        # a 0-d count per rank becomes a 1-d tensor indexed by rank, as lm-eval reads it
        return torch.stack(parts) if tensor.dim() == 0 else torch.cat(parts)

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        if not self._distributed:
            return [obj]
        import torch.distributed as dist

        gathered: list[Any] | None = [None] * self._world_size if self._rank == dst else None
        dist.gather_object(obj, gathered, dst=dst)
        return gathered

    def barrier(self) -> None:
        if self._distributed:
            import torch.distributed as dist

            dist.barrier()

    def _lookup(self, request: Any, section: str) -> Any:
        doc = request.doc or {}
        keys = self.key if isinstance(self.key, list) else [self.key]  # a list: the first field the doc has
        field = next((k for k in keys if isinstance(doc, dict) and k in doc), keys[0])
        value = doc.get(field) if isinstance(doc, dict) else None
        if value is None and self.table.get("prompt"):
            # a backend called without docs (a judge, the EMSQA extraction fallback): the reply whose
            # key the prompt contains; a list of replies is used in order, its last one repeated
            context = str(request.args[0])
            for needle, replies in self.table["prompt"].items():
                if needle in context:
                    if not isinstance(replies, list):
                        return replies
                    used = self._prompt_uses.get(needle, 0)
                    self._prompt_uses[needle] = used + 1
                    return replies[min(used, len(replies) - 1)]
        return self.table.get(section, {}).get(str(value), self.table.get("default", ""))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        self.requests_seen.extend(requests)
        self._record(requests)
        return [str(self._lookup(request, "generate")) for request in requests]

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        self.requests_seen.extend(requests)
        self._record(requests)
        out = []
        for request in requests:
            continuation = str(request.args[1]).strip()
            chosen = str(self._lookup(request, "choose")).strip()
            out.append((0.0, True) if continuation == chosen else (-10.0, False))
        return out

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        return [-1.0 for _ in requests]

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return "\n".join(f"<|{m['role']}|>\n{m['content']}" for m in chat_history) + (
            "\n<|assistant|>\n" if add_generation_prompt else ""
        )

    @property
    def tokenizer_name(self) -> str:
        return "medeval-scripted"

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return "medeval-scripted" if chat_template else None


def _leave_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
