"""Checks ``medeval run`` makes before lm-eval builds the model.

lm-eval builds the model first and the tasks after, so a typo in a task name, a bad ``--metadata``, a model
folder that is not there or a missing data file would otherwise surface after a model has loaded (minutes
for a real one), one at a time. Nothing here builds a model; each problem is one line naming what is wrong
and the fix, and every problem found is reported at once.

Modules: ``argv`` (the command line, read once into ``RunSettings``: what every check and wrapper reads), ``catalogue`` (the pack's names, tags, sources and
keys), ``keys`` (typos in metadata keys, variables, on/off values; keys given where lm-eval would copy them), ``selection`` (what ``--tasks`` selects),
``model`` (the model resolves, and has a chat template when one is asked for), ``options`` (lm-eval's own options),
``data_checks``, ``judges``, ``problems`` (reporting them together), ``checks`` (``run_checks``, all of them in one
pass), ``notices`` (what a run that passed will not compute, said before the model loads) and ``budget`` (after a
run: the outputs that ran to the token budget).
The names below are the ones other code imports from ``medeval_metrics.preflight``.
"""

from __future__ import annotations

from medeval_metrics.data import flag_setting
from medeval_metrics.preflight.argv import (
    ALLOW_UNKNOWN_METADATA,
    BREAKDOWN_FLAG,
    SKIP_JUDGE_CHECK,
    RunSettings,
    parse_metadata,
    read_command_line,
    with_judge_panel,
)
from medeval_metrics.preflight.catalogue import (
    JUDGES_KEY,
    known_metadata_keys,
    pack_key_prefixes,
    pack_names,
    pack_tags,
    task_set_keys,
)
from medeval_metrics.preflight.checks import run_checks
from medeval_metrics.preflight.judges import check_judge_panel
from medeval_metrics.preflight.keys import (
    FULL_INDEX_ENV,
    credential_problems,
    environment_problems,
    environment_variable,
    known_environment_variables,
    metadata_key_problems,
)
from medeval_metrics.preflight.options import run_option_problems, unwritable_reason
from medeval_metrics.preflight.problems import RunProblems, raise_problems
from medeval_metrics.preflight.selection import Selection

__all__ = [
    "ALLOW_UNKNOWN_METADATA",
    "BREAKDOWN_FLAG",
    "FULL_INDEX_ENV",
    "JUDGES_KEY",
    "SKIP_JUDGE_CHECK",
    "RunProblems",
    "RunSettings",
    "Selection",
    "check_judge_panel",
    "credential_problems",
    "environment_problems",
    "environment_variable",
    "flag_setting",
    "known_environment_variables",
    "known_metadata_keys",
    "metadata_key_problems",
    "pack_key_prefixes",
    "pack_names",
    "pack_tags",
    "parse_metadata",
    "raise_problems",
    "read_command_line",
    "run_checks",
    "run_option_problems",
    "task_set_keys",
    "unwritable_reason",
    "with_judge_panel",
]
