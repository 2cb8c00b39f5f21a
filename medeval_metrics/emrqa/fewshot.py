"""emrQL few-shot examples: lm-eval's sampler over the prepared pool, topped up from training.

The pool is one training row per logical-form template (``prepare``). A small or filtered
``data-ql.csv`` can have fewer templates than the shot count, and lm-eval's own sampler then fails
with a bare ``ValueError`` from ``random.sample``. The loader therefore appends a few more training
rows (``fewshot_role: top_up``); this sampler draws from the pool alone whenever it is large enough
(exactly the draw lm-eval's default sampler makes, so such runs are unchanged), from pool plus top-up
rows otherwise, and names the size it needs when even that is too small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval.api.samplers import ContextSampler

from medeval_metrics.data import MedevalDataError

FEWSHOT_TOP_UP = 64  # the pool is topped up to this many rows at most


class FewshotPoolSampler(ContextSampler):
    """``fewshot_config.sampler`` of the emrQL tasks (lm-eval accepts a ContextSampler subclass there)."""

    def sample(
        self, n: int, eval_doc: dict[str, Any] | None = None, df: Sequence[dict[str, Any]] | None = None, **kwargs: Any
    ) -> Sequence[dict[str, Any]]:
        if n <= 0:
            return []
        if df:
            self.df = df
        docs = [d for d in self.fewshot_docs() if eval_doc is None or d != eval_doc]
        pool = [d for d in docs if d.get("fewshot_role", "pool") == "pool"]
        candidates = pool if len(pool) >= n else docs
        if len(candidates) < n:
            variant = next((d.get("emrql_variant") for d in docs if d.get("emrql_variant")), "emrQL")
            raise MedevalDataError(
                f"{variant}: {n}-shot prompts need {n} few-shot examples, but the prepared data-ql.csv gives "
                f"{len(pool)} (one training row per logical-form template) and {len(docs) - len(pool)} more training "
                f"rows to top them up (at most {FEWSHOT_TOP_UP} in all). Use --num_fewshot {len(docs)} or fewer, "
                "or a data-ql.csv with more training rows."
            )
        return self.rnd.sample(candidates, n)
