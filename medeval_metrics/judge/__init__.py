"""A generic LLM-judge panel for lm-eval tasks: any lm-eval backend can judge.

- ``config``: the panel (judges, budget, cache, rubric) from ``--metadata``, ``$MEDEVAL_JUDGES``, a file
  or list flags; ``validate_panel`` checks it completely before any generation
- ``rubric``: a rubric as data (YAML) and its prompt (fenced answer, placeholder example)
- ``verdict``: the verdict parser (real judges' shapes accepted; quoted forgeries and template echoes refused)
- ``health``: one tiny request per judge before a run (``--skip-judge-check``)
- ``client``: one judge as an lm-eval backend, sending exactly the headers its config names
- ``runner``: the scheduler: concurrency, one request budget per (judge, item), one re-ask decision,
  cached verdicts, failures *unscored* with their reason, dead judges stopped early
- ``cache``: the persistent SQLite verdict cache (batched writes)
- ``aggregate``: HELM panel score, MedARC reward (and both under their own failure rules), success
  and unscored rates, id-echo rate, Krippendorff's alpha
- ``filter``: ``JudgeFilter``, the lm-eval Filter that judges a whole task's answers in one batch
- ``cli``: ``medeval judge``, judging a finished run's logged samples, and the ``medeval run`` helpers

A task uses it by shipping a rubric (a YAML file or a ``Rubric``) and pointing ``JudgeFilter`` at it.
"""
