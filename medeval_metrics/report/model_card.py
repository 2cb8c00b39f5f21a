"""The model card's ``model-index`` (via huggingface_hub) and the in-place update of a card README.

The update touches two things only: the ``model-index`` key of the YAML header (other header lines
are kept byte for byte) and the Markdown between ``CARD_START`` and ``CARD_END`` (appended at the
end the first time). Entries are merged by everything but their value, so re-running replaces the
pack's numbers instead of adding copies, and running twice changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.report.metric_info import metric_info, reporting_for
from medeval_metrics.report.runs import Run
from medeval_metrics.report.tables import ScoreRow, score_rows

CARD_START = "<!-- medeval:results:start -->"
CARD_END = "<!-- medeval:results:end -->"
DEFAULT_SOURCE_NAME = "lm-evaluation-harness with medeval-metrics"
DEFAULT_SOURCE_URL = "https://github.com/EleutherAI/lm-evaluation-harness"


def _dataset_of(task: str) -> tuple[str, str, str | None]:
    """(dataset type, dataset name, split) for a pack task, from its benchmark's spec."""
    from medeval_metrics import registry

    entry, benchmark = registry.task(task), registry.benchmark_of(task)
    source = benchmark.source(entry.source)
    display = reporting_for(benchmark.name).display_name or benchmark.name
    if source.hub:
        # the split as the Hub copy names it (where a whole set is published as one Hub split)
        return source.hub, f"{display} ({task})", source.hub_split or entry.split
    # A set with no public copy (e.g. a private set): name it so it cannot pass for a Hub dataset.
    return f"medeval/{entry.source.removesuffix('_path')}", f"{display} ({task}, the evaluator's own copy)", entry.split


def eval_results(rows: list[ScoreRow], source_name: str = DEFAULT_SOURCE_NAME, source_url: str = DEFAULT_SOURCE_URL):
    """``huggingface_hub.EvalResult`` per reportable metric row."""
    from huggingface_hub import EvalResult

    out = []
    for row in rows:
        info = metric_info(row.benchmark, row.metric)
        if not info.in_model_index:
            continue
        dataset_type, dataset_name, split = _dataset_of(row.task)
        out.append(
            EvalResult(
                task_type=reporting_for(row.benchmark).task_type,
                task_name=row.task,
                dataset_type=dataset_type,
                dataset_name=dataset_name,
                dataset_split=split,
                # the Hub's convention for few-shot counts (as on the Open LLM Leaderboard cards)
                dataset_args={"num_few_shot": row.n_shot} if isinstance(row.n_shot, int) else None,
                metric_type=info.hub_type,
                metric_name=info.label,
                metric_config=None if row.filter == "none" else row.filter,
                metric_value=round(row.value, 6),
                source_name=source_name,
                source_url=source_url,
            )
        )
    return out


def merge_eval_results(existing: list, new: list) -> list:
    """``existing`` with every entry that ``new`` restates replaced in place, then the rest of ``new``."""
    merged = list(existing)
    for result in new:
        for index, old in enumerate(merged):
            if old.is_equal_except_value(result):
                merged[index] = result
                break
        else:
            merged.append(result)
    return merged


def runs_eval_results(runs: list[Run], **source: str) -> list:
    """Eval results of several runs of one model; a later run's value replaces an earlier one's."""
    merged: list = []
    for run in runs:
        merged = merge_eval_results(merged, eval_results(score_rows(run), **source))
    return merged


def model_index_yaml(model_name: str, results: list) -> str:
    from huggingface_hub import ModelCardData

    return ModelCardData(model_name=model_name, eval_results=results).to_yaml() + "\n"


# --------------------------------------------------------------------------- card update

_HEADER = re.compile(r"\A(---[ \t]*\r?\n)(.*?)(^---[ \t]*$)", re.DOTALL | re.MULTILINE)
_TOP_LEVEL_KEY = re.compile(r"^[^\s#-][^:]*:")


def _split_header(text: str) -> tuple[str | None, str]:
    match = _HEADER.match(text)
    if not match:
        return None, text
    return match.group(2), text[match.end():]


def _replace_model_index_block(header: str, block: str) -> str:
    """Header text with its top-level ``model-index:`` block replaced (or appended), other lines kept."""
    lines = header.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^model-index\s*:", line)), None)
    if start is None:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        return "".join(lines) + block
    end = start + 1
    while end < len(lines) and not _TOP_LEVEL_KEY.match(lines[end]):
        end += 1
    return "".join(lines[:start]) + block + "".join(lines[end:])


def update_card(card_path: Path, model_name: str, results: list, section_markdown: str) -> bool:
    """Merge the pack's model-index entries and results section into a model card; True if it changed."""
    import yaml
    from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results

    card_path = Path(card_path)
    text = card_path.read_text(encoding="utf-8") if card_path.exists() else ""
    header, body = _split_header(text)
    if header is None:
        body = "\n\n" + body.lstrip("\n")  # a blank line between the new header and the card's text
    try:
        metadata = yaml.safe_load(header) if header else {}
    except yaml.YAMLError as exc:
        raise MedevalDataError(f"{card_path}: the YAML header does not parse ({exc}). Fix it, then re-run.") from exc
    metadata = metadata or {}
    if not isinstance(metadata, dict):
        raise MedevalDataError(f"{card_path}: the YAML header is not a mapping. Fix it, then re-run.")
    existing_index = metadata.get("model-index")
    name = model_name
    existing: list = []
    other_models: list[dict[str, Any]] = []
    if existing_index:
        try:
            # Merge into the card's entry for this model (or its only entry); keep other models' entries.
            entries = list(existing_index)
            ours = next((e for e in entries if e.get("name") == model_name), entries[0] if len(entries) == 1 else None)
            if ours is not None:
                name, existing = model_index_to_eval_results([ours])
                other_models = [e for e in entries if e is not ours]
            else:
                other_models = entries
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MedevalDataError(
                f"{card_path}: its model-index is not in the Hub's format ({exc!r}). Fix it, then re-run."
            ) from exc
    merged = merge_eval_results(existing, results)
    index = other_models + eval_results_to_model_index(name, merged)
    block = yaml.safe_dump({"model-index": index}, sort_keys=False, allow_unicode=True)
    new_header = _replace_model_index_block(header or "", block)
    section = f"{CARD_START}\n{section_markdown.strip()}\n{CARD_END}"
    pattern = re.compile(re.escape(CARD_START) + r".*?" + re.escape(CARD_END), re.DOTALL)
    if pattern.search(body):
        new_body = pattern.sub(lambda _: section, body, count=1)
    else:
        new_body = (body.rstrip("\n") + "\n\n" if body.strip() else "\n") + section + "\n"
    new_text = f"---\n{new_header}---{new_body if new_body.startswith(chr(10)) else chr(10) + new_body}"
    if new_text == text:
        return False
    card_path.write_text(new_text, encoding="utf-8")
    return True
