"""`medeval list`: a terminal table that fits 100 columns, with groups and the data each task needs."""

from medeval_metrics.cli import terminal_task_list
from medeval_metrics.manifest import build_manifest


def test_every_line_fits_100_columns_without_markdown():
    text = terminal_task_list(build_manifest())
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "`" not in text.split("\n\ndata:")[0] and "|" not in text


def test_each_task_says_which_data_it_needs():
    rows = {line.split()[0]: line for line in terminal_task_list(build_manifest()).splitlines()[2:] if line and not line.startswith(" ")}
    assert "public: Xueren/EMS-MCQA" in rows["emsqa_public_cot"] and "3,721" in rows["emsqa_public_cot"]
    assert "yours: emsqa_private_path" in rows["emsqa_private_mc"] and "loglik" in rows["emsqa_private_mc"]
    assert "public: truehealth/medicationqa" in rows["medicationqa"]
    assert "yours: emrqa_data_json" in rows["emrqa_risk"] and "yours: emrqa_data_ql_csv" in rows["emrqa_emrql_1"]


def test_groups_are_listed_with_their_members():
    text = terminal_task_list(build_manifest())
    assert "  emsqa: emsqa_public_variants, emsqa_private_variants" in text
    group_block = text.split("groups")[1]
    assert "emsqa_private_variants: emsqa_private, emsqa_private_cot" in group_block and "emrqa_obesity" in group_block


def test_a_narrower_width_is_respected():
    assert max(len(line) for line in terminal_task_list(build_manifest(), width=90).splitlines()) <= 90
