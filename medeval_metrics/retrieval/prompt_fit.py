"""Does a prompt with its retrieved documents fit the evaluated model's context?

Counted at dataset-build time with the evaluated model's tokenizer (``pretrained``/``tokenizer`` from
``--model_args``, which lm-eval passes to loaders); the limit is ``max_length`` (vLLM:
``max_model_len``) if given, else the model config's ``max_position_embeddings`` / ``n_positions``
/ ``n_ctx``, else 2048 (lm-eval's HF default). Without a loadable tokenizer (API models) the
count is an estimate, 4 characters per token, and says so. Chat-template tokens are not counted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

log = logging.getLogger("medeval_metrics.retrieval")
DEFAULT_LIMIT = 2048


class PromptFit:
    def __init__(self, model_args: Mapping[str, Any], max_gen_toks: int) -> None:
        self.max_gen_toks = int(max_gen_toks)
        self.tokenizer = None
        explicit = model_args.get("max_length") or model_args.get("max_model_len")
        self.limit = int(explicit) if explicit else None
        name = model_args.get("tokenizer") or model_args.get("pretrained")
        if name:
            try:
                from transformers import AutoConfig, AutoTokenizer

                self.tokenizer = AutoTokenizer.from_pretrained(str(name))
                if self.limit is None:
                    config = AutoConfig.from_pretrained(str(model_args.get("pretrained") or name))
                    self.limit = next((int(getattr(config, a)) for a in ("max_position_embeddings", "n_positions", "n_ctx")
                                       if getattr(config, a, None)), DEFAULT_LIMIT)
            except Exception as exc:  # an API model's name, offline: fall back to the labelled estimate
                log.warning("medeval: cannot load tokenizer %r (%s); estimating prompt length", name, type(exc).__name__)
                self.tokenizer = None
        self.limit = self.limit or DEFAULT_LIMIT
        counted = f"tokenizer {Path(str(name)).name}" if self.tokenizer is not None else "estimate: characters/4"
        self.method = f"{counted}, limit {self.limit} incl. {self.max_gen_toks} generated"

    def count(self, prompts: Sequence[str]) -> list[int]:
        if self.tokenizer is None:
            return [(len(p) + 3) // 4 for p in prompts]
        return [len(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]

    def fits(self, tokens: int) -> bool:
        return tokens + self.max_gen_toks <= self.limit
