"""``run_checks``: every check ``medeval run`` makes before lm-eval builds the model, in one pass.

Order: lm-eval's options and the model first (a model that cannot load is one line, before any data is
read), then the settings, the task names, each selected task's data and the judge panel. Every problem of
every check that can run is reported together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from medeval_metrics.data import setting
from medeval_metrics.preflight import model as model_check
from medeval_metrics.preflight.argv import RunSettings, settings_of
from medeval_metrics.preflight.catalogue import JUDGES_KEY, sources_for
from medeval_metrics.preflight.data_checks import data_source_problems, group_problems, user_task_problems
from medeval_metrics.preflight.judges import check_judge_panel, needs_judges
from medeval_metrics.preflight.keys import (
    credential_problems,
    environment_problems,
    flag_problems,
    keys_meant,
    metadata_key_problems,
    task_yaml_credential_problems,
)
from medeval_metrics.preflight.notices import Notify, pre_run_notices, print_notice
from medeval_metrics.preflight.options import run_option_problems
from medeval_metrics.preflight.problems import collect, raise_problems
from medeval_metrics.preflight.selection import Selection, lm_eval_task_names, select, user_task_yamls
from medeval_metrics.settings import variable_value_problems
from medeval_metrics.sources import clear_hub_unreachable, hub_unreachable, mark_hub_unreachable


def _hub_needed(tasks: Sequence[str], metadata: Mapping) -> bool:
    """Whether a selected task reads a source from the Hub (no local copy given)."""
    from medeval_metrics import registry

    hub = {s.key for spec in registry.benchmarks() for s in spec.sources if s.hub}
    return any(key in hub and not setting(metadata, key) for key in sources_for(tasks))


def run_checks(
    settings: RunSettings | Sequence[str],
    lm_eval_names: Callable[[], list[str]] | None = None,
    environ: Mapping[str, str] | None = None,
    check_options: bool = False,
    allow_unknown_metadata: bool = False,
    hub_reachable: Callable[[], bool] | None = None,
    notify: Notify | None = print_notice,
) -> Selection | None:
    """Every check of ``medeval run``'s settings (``RunSettings``, or a command line read into them); returns the
    selection (None without ``--tasks``). The problems of all checks that can run are reported together in one
    error (a data source is checked only for tasks whose names are right).

    ``lm_eval_names`` lists lm-eval's tasks (default: its full index, built only for a name not the pack's).
    ``check_options``: also lm-eval's own options and the model (``run_option_problems``), as ``medeval run``
    does. ``hub_reachable``: the network probe (default: a connection to the Hub's host, made only when a
    Hub download is needed and the Hub is not switched off). A Hub found unreachable stays marked so for the
    run that follows (``medeval run`` clears it when the run ends); when a problem stops the run, it is cleared.
    ``notify``: gets each notice (``notices.pre_run_notices``: e.g. a judged task without a panel) once every check
    has passed, before the model is built (default: printed as ``medeval: note: ...`` on stderr; None: not said).
    """
    clear_hub_unreachable()  # each run probes afresh
    settings = settings_of(settings)
    try:
        selection = _run_checks(settings, lm_eval_names, environ, check_options, allow_unknown_metadata, hub_reachable)
    except BaseException:
        clear_hub_unreachable()
        raise
    if selection is not None and notify is not None:
        pack_tasks = [*selection.pack_tasks, *(task for task, _ in selection.user_tasks.values())]
        environ = os.environ if environ is None else environ
        for notice in pre_run_notices(settings, list(dict.fromkeys(pack_tasks)), environ):
            notify(notice)
    return selection


def _run_checks(
    settings: RunSettings,
    lm_eval_names: Callable[[], list[str]] | None = None,
    environ: Mapping[str, str] | None = None,
    check_options: bool = False,
    allow_unknown_metadata: bool = False,
    hub_reachable: Callable[[], bool] | None = None,
) -> Selection | None:
    environ = os.environ if environ is None else environ
    if not settings.readable:  # nothing else can be checked on a line argparse cannot read
        raise_problems(settings.problems)
    allow_unknown_metadata = allow_unknown_metadata or settings.allow_unknown_metadata
    probe = hub_reachable or model_check.hub_reachable
    problems: list[str] = []
    where, metadata, names = settings.include_path, settings.metadata, settings.tasks
    if lm_eval_names is None:
        lm_eval_names = lambda: lm_eval_task_names(where)
    if check_options:
        problems += run_option_problems(settings)
        model_problem = model_check.model_problem(settings.model, settings.model_args, environ, probe)
        if model_problem is None:  # the model resolves: then its tokenizer can be asked for a chat template
            model_problem = model_check.chat_template_problem(
                settings.model, settings.model_args, settings.apply_chat_template
            )
        problems += [model_problem] if model_problem else []
    problems += list(settings.problems)  # what could not be read: after the options and the model
    # keys where lm-eval would copy them into the results: refused, whatever else is wrong
    problems += credential_problems(settings.model_args, metadata, environ)
    problems += task_yaml_credential_problems(user_task_yamls(names or [], where), environ)
    selection, name_problems = select(names, lm_eval_names, where is not None, where) if names else (None, [])
    # a key the pack does not read is refused unless --allow-unknown-metadata lets it through (meant for the user's
    # own tasks or lm-eval's, but it works with the pack's tasks alone too); a near-miss of a pack key always is
    problems += metadata_key_problems(metadata, allow_unknown_metadata)
    problems += environment_problems(environ)
    problems += variable_value_problems(environ)  # the variables read outside the settings reader, bounded too
    problems += flag_problems(metadata, environ)
    if selection is None:
        raise_problems(problems)
        return None
    problems += name_problems
    if (selection.pack_tasks or selection.user_tasks) and settings.metadata_read:  # the data of the tasks named right
        groups, left_out = group_problems(selection, metadata)
        checked = [t for t in selection.pack_tasks if t not in left_out]
        meant = keys_meant(metadata, environ, allow_unknown_metadata)
        every = checked + [pack_task for pack_task, _ in selection.user_tasks.values()]
        if (
            not model_check.hub_disabled(environ)
            and not hub_unreachable()
            and _hub_needed(every, metadata)
            and not probe()
        ):
            mark_hub_unreachable()  # each download fails at once instead of retrying
        problems += data_source_problems(checked, metadata, skip=meant)
        problems += user_task_problems(selection, metadata, skip=meant)
        if needs_judges(every) and JUDGES_KEY not in meant:
            collect(problems, check_judge_panel, metadata)
        problems += groups  # last: its way out is to run the rest, whose problems are listed above
    raise_problems(problems)
    return selection
