"""The byte-preserving line editor of a card's YAML header: the pack's ``model-index`` results in place.

It edits text, not a re-dumped YAML document: only the lines of the pack's own results change. A
byte-order mark, CRLF line endings, comments (also after the ``model-index`` block) and other
models' or other tasks' entries stay byte for byte. ``report.model_card.update_card`` checks every
edit by parsing the result; a layout the editor cannot follow safely (flow-style YAML) raises
``LayoutNotFollowed`` and the caller falls back to ``rewrite_model_index`` (the block alone re-written).
"""

from __future__ import annotations

import re
from typing import Any

from medeval_metrics.report.model_index import _dump, _merge_result, result_key

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
    starts = [
        i for i in range(first, end) if _ITEM.match(_bare(lines[i])) and _ITEM.match(_bare(lines[i])).group(1) == indent
    ]
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


class LayoutNotFollowed(Exception):
    """The card's YAML is laid out in a way the line editor does not edit (e.g. flow style)."""


def _edit_entry(
    lines: list[str], indent: str, new_results: list[dict[str, Any]], newline: str, entry: dict[str, Any]
) -> list[str]:
    """Our model's entry (its lines) with the pack's results replaced in place and new ones appended."""
    key_indent = indent + "  "
    results_at = next(
        (
            i
            for i, line in enumerate(lines)
            if re.match(rf"^(?:{re.escape(indent)}- |{re.escape(key_indent)})results\s*:", _bare(line))
        ),
        None,
    )
    if results_at is None:
        raise LayoutNotFollowed
    after_colon = _bare(lines[results_at]).split(":", 1)[1].split(" #", 1)[0].strip()
    by_key = {result_key(r): r for r in new_results}
    if after_colon in ("[]", ""):
        block_end = results_at + 1
        while block_end < len(lines) and (
            _is_filler(lines[block_end]) or not re.match(rf"^{re.escape(key_indent)}[^\s#-]", _bare(lines[block_end]))
        ):
            block_end += 1
        old_results = entry.get("results") or []
        if after_colon == "[]" or not old_results:
            if after_colon == "[]":
                head = lines[results_at].replace("[]", "", 1).rstrip(" \r\n")
                head_lines = [head + newline]
            else:
                head_lines = [lines[results_at]]
            new_lines = [line for r in new_results for line in _as_lines(_dump([r]), key_indent, newline)]
            return lines[:results_at] + head_lines + new_lines + lines[results_at + 1 :]
        parsed = _sequence_items(lines, results_at + 1, block_end)
        if parsed is None or len(parsed[1]) != len(old_results):
            raise LayoutNotFollowed
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
        out += [
            line
            for r in new_results
            if result_key(r) not in done
            for line in _as_lines(_dump([r]), item_indent, newline)
        ]
        return out + lines[previous_end:]
    raise LayoutNotFollowed


def merged_index(
    entries: list[dict[str, Any]], model_name: str, new_results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
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
    return entries[:ours_at] + [{**ours, "results": results}] + entries[ours_at + 1 :]


def edit_model_index(
    header_lines: list[str],
    entries: list[dict[str, Any]],
    model_name: str,
    new_results: list[dict[str, Any]],
    newline: str,
) -> list[str]:
    """The header lines with the model-index edited line by line; raises LayoutNotFollowed where it cannot."""
    start = next((i for i, line in enumerate(header_lines) if re.match(r"^model-index\s*:", line)), None)
    if start is None:
        block = _as_lines(_dump({"model-index": merged_index([], model_name, new_results)}), "", newline)
        lines = list(header_lines)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += newline
        return lines + block
    if _bare(header_lines[start]).split(":", 1)[1].split(" #", 1)[0].strip():
        raise LayoutNotFollowed  # `model-index: [...]` in flow style
    end = start + 1
    while end < len(header_lines) and (_is_filler(header_lines[end]) or not re.match(r"^[^\s#-]", header_lines[end])):
        end += 1
    parsed = _sequence_items(header_lines, start + 1, end)
    if parsed is None or len(parsed[1]) != len(entries):
        raise LayoutNotFollowed
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


def rewrite_model_index(header_lines: list[str], index: list[dict[str, Any]], newline: str) -> list[str]:
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
