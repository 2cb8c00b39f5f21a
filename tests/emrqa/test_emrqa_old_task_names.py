"""The emrQL tasks were renamed to follow the prefix rule (issue 19: emrql_1 -> emrqa_emrql_1); the old names
still select them, in lm-eval's index and in `medeval run`'s task selection. (The run itself, under the old
name, is in test_emrqa_e2e.py.)"""

import pytest

import medeval_metrics
from medeval_metrics import preflight, registry
from medeval_metrics.preflight.selection import select
from medeval_metrics.task_yaml import own_task_config


def select_tasks(names, lm_eval_names=None, user_tasks=False):
    """The selection ``run_checks`` makes of ``names``; a wrong name raises its problem."""
    selection, problems = select(names, lm_eval_names, user_tasks)
    preflight.raise_problems(problems)
    return selection


RENAMED = {"emrql_1": "emrqa_emrql_1", "emrql_2": "emrqa_emrql_2"}


def test_every_task_name_starts_with_its_benchmark():
    for spec in registry.benchmarks():
        for task in spec.tasks:
            assert task.name == spec.name or task.name.startswith(f"{spec.name}_"), (spec.name, task.name)


@pytest.mark.parametrize("old, new", RENAMED.items())
def test_the_old_name_selects_the_renamed_task(old, new):
    selection = select_tasks([old])
    assert selection.pack_tasks == [new] and selection.only_pack
    assert registry.groups()[old] == (new,)
    assert old not in {t.name for t in registry.all_tasks()}


@pytest.mark.parametrize("old, new", RENAMED.items())
def test_lm_eval_indexes_the_old_name_as_a_group_of_the_renamed_task(old, new):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path())
    assert old in manager.all_groups and new in manager.all_subtasks and old not in manager.all_subtasks
    group = own_task_config(manager.task_index[old].yaml_path)
    assert group["group"] == old and group["task"] == [new]
    assert "aggregate_metric_list" not in group  # no second row of the same scores


@pytest.mark.parametrize("old, new", RENAMED.items())
def test_the_renamed_task_is_the_old_one_at_the_same_version(old, new):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, include_path=medeval_metrics.tasks_path())
    config = own_task_config(manager.task_index[new].yaml_path)
    assert config["task"] == new and config["metadata"]["version"] == 1 == registry.task(new).version
    assert config["dataset_kwargs"] == {"variant": old}  # the prepared data is the same files as before
