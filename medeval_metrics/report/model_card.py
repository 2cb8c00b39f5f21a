"""The model card's ``model-index`` and the in-place update of a card README.

Entries are keyed by (task, dataset, split, metric, model): each task variant is its own named
result (a data set's CoT and multiple-choice variants never share one), and a metric is restated
in place rather than added again, so running the same report any number of times leaves the card
byte-identical. (huggingface_hub's ``eval_results_to_model_index`` groups results by dataset
alone, which folds every variant of a data set into the first variant's name, so the pack
serialises the index itself in the Hub's schema.)

``update_card`` edits text, not a re-dumped YAML document: only the lines of the pack's own
results and its marked Markdown section change. A byte-order mark, CRLF line endings, comments
(also after the ``model-index`` block) and other models' or other tasks' entries stay byte for
byte. Every edit is checked by parsing the result; a layout the line editor cannot follow safely
(flow-style YAML) falls back to re-writing the ``model-index`` block alone.
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


def _eval_result_key(result) -> tuple:
    return (result.task_name, result.dataset_type, result.dataset_config, result.dataset_split,
            result.metric_type, result.metric_name, result.metric_config)


def merge_eval_results(existing: list, new: list) -> list:
    """``existing`` with every entry that ``new`` restates (same task, dataset, split, metric) replaced in place,
    then the rest of ``new``."""
    merged = list(existing)
    positions = {_eval_result_key(r): i for i, r in enumerate(merged)}
    for result in new:
        key = _eval_result_key(result)
        if key in positions:
            merged[positions[key]] = result
        else:
            positions[key] = len(merged)
            merged.append(result)
    return merged


def runs_eval_results(runs: list[Run], **source: str) -> list:
    """Eval results of several runs of one model; a later run's value replaces an earlier one's."""
    merged: list = []
    for run in runs:
        merged = merge_eval_results(merged, eval_results(score_rows(run), **source))
    return merged


# --------------------------------------------------------------------------- the Hub's schema, one result per task


def _without_none(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None}


def result_key(result: dict[str, Any]) -> tuple:
    """(task, dataset, config, split) of a model-index result dict: one result per task variant."""
    task, dataset = result.get("task") or {}, result.get("dataset") or {}
    return (task.get("name"), dataset.get("type"), dataset.get("config"), dataset.get("split"))


def metric_key(metric: dict[str, Any]) -> tuple:
    return (metric.get("type"), metric.get("name"), metric.get("config"))


def index_results(results: list) -> list[dict[str, Any]]:
    """EvalResults as model-index result dicts: one per (task, dataset, split), metrics in order."""
    grouped: dict[tuple, dict[str, Any]] = {}
    for r in results:
        entry = {
            "task": _without_none({"type": r.task_type, "name": r.task_name}),
            "dataset": _without_none({"name": r.dataset_name, "type": r.dataset_type, "config": r.dataset_config,
                                      "split": r.dataset_split, "revision": r.dataset_revision, "args": r.dataset_args}),
            "metrics": [],
        }
        if r.source_url is not None:
            entry["source"] = _without_none({"url": r.source_url, "name": r.source_name})
        result = grouped.setdefault(result_key(entry), entry)
        metric = _without_none({"type": r.metric_type, "value": r.metric_value, "name": r.metric_name,
                                "config": r.metric_config, "args": r.metric_args, "verified": r.verified or None,
                                "verifyToken": r.verify_token})
        _merge_metrics(result["metrics"], [metric])
    return list(grouped.values())


def _merge_metrics(existing: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Merge ``new`` into ``existing`` in place by metric key (a restated metric replaces the first copy)."""
    for metric in new:
        for index, old in enumerate(existing):
            if isinstance(old, dict) and metric_key(old) == metric_key(metric):
                existing[index] = metric
                break
        else:
            existing.append(metric)


def _merge_result(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The pack's new result over its earlier one: new metrics replace theirs, earlier-only metrics stay once."""
    metrics: list[dict[str, Any]] = []
    seen = set()
    for metric in old.get("metrics") or []:
        if isinstance(metric, dict) and metric_key(metric) not in seen:  # copies left by older pack versions go
            seen.add(metric_key(metric))
            metrics.append(metric)
    _merge_metrics(metrics, new["metrics"])
    return {**new, "metrics": metrics}


def model_index(model_name: str, results: list) -> list[dict[str, Any]]:
    return [{"name": model_name, "results": index_results(results)}]


def _dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)


def model_index_yaml(model_name: str, results: list) -> str:
    return _dump({"model-index": model_index(model_name, results)}) + "\n"


# --------------------------------------------------------------------------- card update

_ITEM = re.compile(r"^( *)-(?: |$)")


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _is_filler(line: str) -> bool:
    """Blank or comment-only line: it belongs to no YAML node."""
    stripped = _bare(line).strip()
    return not stripped or stripped.startswith("#")


def _sequence_items(lines: list[str], start: int, end: int) -> tuple[str, list[tuple[int, int]]] | None:
    """Indentation and (start, end) line ranges of the block-sequence items in ``lines[start:end]``.

    An item ends at its last content line; blank and comment lines after it stay outside it.
    None when the lines are not a plain block sequence.
    """
    first = next((i for i in range(start, end) if not _is_filler(lines[i])), None)
    if first is None:
        return None
    match = _ITEM.match(_bare(lines[first]))
    if not match:
        return None
    indent = match.group(1)
    starts = [i for i in range(first, end) if _ITEM.match(_bare(lines[i])) and _ITEM.match(_bare(lines[i])).group(1) == indent]
    items = []
    for n, item_start in enumerate(starts):
        item_end = starts[n + 1] if n + 1 < len(starts) else end
        while item_end > item_start + 1 and _is_filler(lines[item_end - 1]):
            item_end -= 1
        items.append((item_start, item_end))
    for i in range(first, end):  # every content line is inside an item and indented under it
        if not _is_filler(lines[i]) and not any(s <= i < e for s, e in items):
            return None
        if not _is_filler(lines[i]) and not _bare(lines[i]).startswith(indent):
            return None
    return indent, items


def _as_lines(yaml_text: str, indent: str, newline: str) -> list[str]:
    return [indent + line + newline for line in yaml_text.splitlines()]


class _LayoutNotFollowed(Exception):
    """The card's YAML is laid out in a way the line editor does not edit (e.g. flow style)."""


def _edit_entry(lines: list[str], indent: str, new_results: list[dict[str, Any]], newline: str,
                entry: dict[str, Any]) -> list[str]:
    """Our model's entry (its lines) with the pack's results replaced in place and new ones appended."""
    key_indent = indent + "  "
    results_at = next((i for i, line in enumerate(lines)
                       if re.match(rf"^(?:{re.escape(indent)}- |{re.escape(key_indent)})results\s*:", _bare(line))), None)
    if results_at is None:
        raise _LayoutNotFollowed
    after_colon = _bare(lines[results_at]).split(":", 1)[1].split(" #", 1)[0].strip()
    by_key = {result_key(r): r for r in new_results}
    if after_colon in ("[]", ""):
        block_end = results_at + 1
        while block_end < len(lines) and (_is_filler(lines[block_end]) or not re.match(
                rf"^{re.escape(key_indent)}[^\s#-]", _bare(lines[block_end]))):
            block_end += 1
        old_results = entry.get("results") or []
        if after_colon == "[]" or not old_results:
            if after_colon == "[]":
                head = lines[results_at].replace("[]", "", 1).rstrip(" \r\n")
                head_lines = [head + newline]
            else:
                head_lines = [lines[results_at]]
            new_lines = [line for r in new_results for line in _as_lines(_dump([r]), key_indent, newline)]
            return lines[:results_at] + head_lines + new_lines + lines[results_at + 1:]
        parsed = _sequence_items(lines, results_at + 1, block_end)
        if parsed is None or len(parsed[1]) != len(old_results):
            raise _LayoutNotFollowed
        item_indent, items = parsed
        out = list(lines[: items[0][0]])
        done = set()
        previous_end = items[0][0]
        for (start, end), old in zip(items, old_results):
            out += lines[previous_end:start]
            key = result_key(old) if isinstance(old, dict) else None
            if key in by_key and key not in done:
                done.add(key)
                out += _as_lines(_dump([_merge_result(old, by_key[key])]), item_indent, newline)
            elif key in done:  # a second copy of one of the pack's results (older pack versions wrote them)
                pass
            else:
                out += lines[start:end]
            previous_end = end
        out += [line for r in new_results if result_key(r) not in done
                for line in _as_lines(_dump([r]), item_indent, newline)]
        return out + lines[previous_end:]
    raise _LayoutNotFollowed


def _merged_index(entries: list[dict[str, Any]], model_name: str, new_results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model-index the update must produce: other models' entries as they are, ours merged in place
    (or appended: moving it would make alternating updates of two models rewrite the card each time)."""
    ours_at = next((n for n, e in enumerate(entries) if e.get("name") == model_name), None)
    if ours_at is None:
        return entries + [{"name": model_name, "results": new_results}]
    ours = entries[ours_at]
    by_key = {result_key(r): r for r in new_results}
    results, done = [], set()
    for old in ours.get("results") or []:
        key = result_key(old) if isinstance(old, dict) else None
        if key in by_key and key not in done:
            done.add(key)
            results.append(_merge_result(old, by_key[key]))
        elif key not in done:
            results.append(old)
    results += [r for r in new_results if result_key(r) not in done]
    return entries[:ours_at] + [{**ours, "results": results}] + entries[ours_at + 1:]


def _edit_model_index(header_lines: list[str], entries: list[dict[str, Any]], model_name: str,
                      new_results: list[dict[str, Any]], newline: str) -> list[str]:
    """The header lines with the model-index edited line by line; raises _LayoutNotFollowed where it cannot."""
    start = next((i for i, line in enumerate(header_lines) if re.match(r"^model-index\s*:", line)), None)
    if start is None:
        block = _as_lines(_dump({"model-index": _merged_index([], model_name, new_results)}), "", newline)
        lines = list(header_lines)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += newline
        return lines + block
    if _bare(header_lines[start]).split(":", 1)[1].split(" #", 1)[0].strip():
        raise _LayoutNotFollowed  # `model-index: [...]` in flow style
    end = start + 1
    while end < len(header_lines) and (_is_filler(header_lines[end]) or not re.match(r"^[^\s#-]", header_lines[end])):
        end += 1
    parsed = _sequence_items(header_lines, start + 1, end)
    if parsed is None or len(parsed[1]) != len(entries):
        raise _LayoutNotFollowed
    indent, items = parsed
    ours_at = next((n for n, e in enumerate(entries) if e.get("name") == model_name), None)
    if ours_at is None:
        ours_lines = _as_lines(_dump([{"name": model_name, "results": new_results}]), indent, newline)
    else:
        s, e = items[ours_at]
        ours_lines = _edit_entry(header_lines[s:e], indent, new_results, newline, entries[ours_at])
    if ours_at is None:  # a new entry goes after the last one; every other line stays
        last_end = items[-1][1]
        return header_lines[:last_end] + ours_lines + header_lines[last_end:]
    s, e = items[ours_at]
    return header_lines[:s] + ours_lines + header_lines[e:]


def _rewrite_model_index(header_lines: list[str], index: list[dict[str, Any]], newline: str) -> list[str]:
    """Fallback: the model-index block re-written whole (lines outside it kept)."""
    start = next((i for i, line in enumerate(header_lines) if re.match(r"^model-index\s*:", line)), None)
    block = _as_lines(_dump({"model-index": index}), "", newline)
    if start is None:
        return header_lines + block
    end = start + 1
    while end < len(header_lines) and (_is_filler(header_lines[end]) or not re.match(r"^[^\s#-]", header_lines[end])):
        end += 1
    while end > start + 1 and _is_filler(header_lines[end - 1]):
        end -= 1  # trailing comments after the block stay
    return header_lines[:start] + block + header_lines[end:]


def _check_entries(card_path: Path, entries: Any) -> list[dict[str, Any]]:
    problem = None
    if not isinstance(entries, list):
        problem = "model-index is not a list"
    else:
        for entry in entries:
            if not isinstance(entry, dict) or "name" not in entry:
                problem = f"an entry has no 'name': {str(entry)[:80]!r}"
            elif not isinstance(entry.get("results", []), list) or not all(isinstance(r, dict) for r in entry.get("results") or []):
                problem = f"entry {entry.get('name')!r} has 'results' that are not a list of mappings"
            if problem:
                break
    if problem:
        raise MedevalDataError(f"{card_path}: its model-index is not in the Hub's format ({problem}). Fix it, then re-run.")
    return entries


def update_card(card_path: Path, model_name: str, results: list, section_markdown: str) -> bool:
    """Merge the pack's model-index entries and results section into a model card; True if it changed.
    A card that does not exist yet is created (and its folder), holding the pack's results alone."""
    import yaml

    card_path = Path(card_path)
    try:
        raw = card_path.read_bytes() if card_path.exists() else b""
    except OSError as exc:
        what = "is a folder: pass the card file in it (README.md)" if card_path.is_dir() else f"cannot be read ({exc.strerror or exc})"
        raise MedevalDataError(f"--update-card {card_path}: {what}. The report itself is written.") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MedevalDataError(f"{card_path}: not UTF-8 text ({exc}). Save the card as UTF-8, then re-run.") from exc
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom):]
    newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
    lines = text.splitlines(keepends=True)
    close = None
    if lines and _bare(lines[0]).rstrip() == "---":
        close = next((i for i in range(1, len(lines)) if _bare(lines[i]).rstrip() == "---"), None)
    if close is None:
        opening, header_lines, closing = "---" + newline, [], "---" + newline
        body = newline + text.lstrip("\r\n") if text.strip() else ""
        parsed_header: Any = {}
    else:
        opening, header_lines, closing = lines[0], lines[1:close], lines[close]
        if not closing.endswith("\n"):
            closing += newline
        body = "".join(lines[close + 1:])
        try:
            parsed_header = yaml.safe_load("".join(header_lines)) or {}
        except yaml.YAMLError as exc:
            raise MedevalDataError(f"{card_path}: the YAML header does not parse ({exc}). Fix it, then re-run.") from exc
    if not isinstance(parsed_header, dict):
        raise MedevalDataError(f"{card_path}: the YAML header is not a mapping. Fix it, then re-run.")
    entries = _check_entries(card_path, parsed_header.get("model-index") or [])
    new_results = index_results(results)
    expected = _merged_index(entries, model_name, new_results)
    try:
        new_header = _edit_model_index(header_lines, entries, model_name, new_results, newline)
        if (yaml.safe_load("".join(new_header)) or {}).get("model-index") != expected:
            raise _LayoutNotFollowed
    except (_LayoutNotFollowed, yaml.YAMLError):
        new_header = _rewrite_model_index(header_lines, expected, newline)

    section = newline.join([CARD_START, *section_markdown.strip().splitlines(), CARD_END])
    pattern = re.compile(re.escape(CARD_START) + r".*?" + re.escape(CARD_END), re.DOTALL)
    if pattern.search(body):
        new_body = pattern.sub(lambda _: section, body, count=1)
    elif body.strip():
        new_body = body.rstrip("\r\n") + newline + newline + section + newline
    else:
        new_body = newline + section + newline
    new_text = bom + opening + "".join(new_header) + closing + new_body
    if new_text.encode("utf-8") == raw:
        return False
    try:
        _replace_file(card_path, new_text.encode("utf-8"))
    except OSError as exc:
        raise MedevalDataError(
            f"--update-card {card_path}: cannot write the card ({exc.strerror or exc}); it was not changed. "
            "The report itself is written; pass a card path you can write to, then re-run."
        ) from exc
    return True


def _replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a file beside it, so that a failed write (a full disk) leaves
    the card as it was; the card's permissions are kept."""
    import os
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.medeval-partial")
    try:
        partial.write_bytes(data)
        if path.exists():
            shutil.copymode(path, partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
