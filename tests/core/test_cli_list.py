"""`medeval list`: a terminal table that fits 100 columns, with groups and the data each task needs."""

from medeval_metrics.cli import terminal_task_list
from medeval_metrics.manifest import build_manifest


def test_every_line_fits_100_columns_without_markdown():
    text = terminal_task_list(build_manifest())
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "`" not in text.split("\n\ndata:")[0] and "|" not in text


def task_rows(text: str) -> dict[str, str]:
    """Each task's row with its continuation lines (the data and metrics columns wrap) joined, column by column."""
    lines = text.split("\n\ngroups")[0].splitlines()[2:]
    data_at, metrics_at = text.index("data it needs"), text.index("metrics")
    rows: dict[str, list[list[str]]] = {}
    for line in lines:
        if not line.startswith(" "):
            task = line.split()[0]
            rows[task] = [[line[:data_at]], [], []]
        rows[task][1].append(line[data_at:metrics_at].strip())
        rows[task][2].append(line[metrics_at:].strip())
    return {
        task: " ".join(parts[0]) + " " + " ".join(p for p in parts[1] if p) + " | " + " ".join(p for p in parts[2] if p)
        for task, parts in rows.items()
    }


def test_no_name_is_cut_the_columns_wrap_instead():
    manifest = build_manifest()
    rows = task_rows(terminal_task_list(manifest))
    for task in manifest["tasks"]:
        assert rows[task["task"]].split(" | ")[1] == ", ".join(task["metrics"]), task["task"]
    narrow = terminal_task_list(manifest, width=80)  # too narrow for both columns: the metrics under each task
    assert "    metrics: rougeL, bleu, bertscore_f1," in narrow and max(len(line) for line in narrow.splitlines()) <= 80
    assert "..." not in terminal_task_list(manifest) + narrow


def test_the_tag_is_listed():
    assert "  medeval: every task above" in terminal_task_list(build_manifest()).split("tags (")[1]


def test_each_task_says_which_data_it_needs():
    rows = task_rows(terminal_task_list(build_manifest()))
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
