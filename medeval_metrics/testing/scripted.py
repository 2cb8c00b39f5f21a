"""A scripted lm-eval model backend: answers come from a table, so expected scores are known.

Registered as ``--model medeval-scripted`` when this module is imported (``medeval run`` does
that when asked for this model). ``--model_args table=/path/answers.json`` names a JSON file:

    {"key": "question",                 # doc field whose value selects the row
     "generate": {"<key value>": "model output text", ...},
     "choose":   {"<key value>": "B", ...},   # for loglikelihood: this continuation wins
     "default": ""}                     # output for docs not in the table

A doc missing from the table gets ``default``; the table can also be passed as a dict in Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (fills the registry first, so our entry does not hide the built-ins)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model


@register_model("medeval-scripted")
class ScriptedLM(LM):
    def __init__(self, table: str | dict[str, Any] | None = None, **_: Any) -> None:
        super().__init__()
        if isinstance(table, (str, Path)):
            table = json.loads(Path(table).read_text(encoding="utf-8"))
        self.table: dict[str, Any] = table or {}
        self.key = self.table.get("key", "question")
        self.requests_seen: list[Any] = []

    def _lookup(self, request: Any, section: str) -> Any:
        doc = request.doc or {}
        value = doc.get(self.key) if isinstance(doc, dict) else None
        return self.table.get(section, {}).get(str(value), self.table.get("default", ""))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        self.requests_seen.extend(requests)
        return [str(self._lookup(request, "generate")) for request in requests]

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        self.requests_seen.extend(requests)
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
