"""A generic LLM-judge panel for lm-eval tasks: any lm-eval backend can judge.

- ``config``: the panel (judges, concurrency, retries, cache) from ``$MEDEVAL_JUDGES`` or a file
- ``rubric``: the prompt (answer fenced, injection-proof verdict id) and the verdict parser
- ``runner``: concurrent, retried, cached judging; failures become *unscored* verdicts
- ``cache``: the persistent SQLite verdict cache
- ``aggregate``: HELM panel score, MedARC reward, success/unscored rates, Krippendorff's alpha
- ``filter``: ``JudgeFilter``, the lm-eval Filter that judges a whole task's answers in one batch
- ``cli``: ``medeval judge``, judging a finished run's logged samples

Another task uses it by defining its own ``Rubric`` and pointing ``JudgeFilter`` at it.
"""
