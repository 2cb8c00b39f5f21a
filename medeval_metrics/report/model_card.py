"""The in-place update of a model card README: the pack's ``model-index`` entries and its results section.

The model-index is built by ``report.model_index`` and edited into the card's YAML header line by
line by ``report.card_yaml`` (bytes outside the pack's own results stay as they were). The card is
written atomically (``safe_files``); a card that is a link is written through only when its target
is inside the same repository (``safe_files.card_target``). The old import names stay here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.report.card_yaml import (  # noqa: F401  (old import names)
    LayoutNotFollowed,
    _bare,
    _edit_entry,
    _is_filler,
    _sequence_items,
    edit_model_index,
    merged_index,
    rewrite_model_index,
)
from medeval_metrics.report.model_index import (  # noqa: F401  (old import names)
    DEFAULT_SOURCE_NAME,
    DEFAULT_SOURCE_URL,
    _dataset_of,
    _dump,
    _merge_metrics,
    _merge_result,
    eval_results,
    index_results,
    merge_eval_results,
    metric_key,
    model_index,
    model_index_yaml,
    result_key,
    runs_eval_results,
)

_LayoutNotFollowed, _edit_model_index, _merged_index = LayoutNotFollowed, edit_model_index, merged_index
_rewrite_model_index = rewrite_model_index

CARD_START = "<!-- medeval:results:start -->"
CARD_END = "<!-- medeval:results:end -->"


def _check_entries(card_path: Path, entries: Any) -> list[dict[str, Any]]:
    problem = None
    if not isinstance(entries, list):
        problem = "model-index is not a list"
    else:
        for entry in entries:
            if not isinstance(entry, dict) or "name" not in entry:
                problem = f"an entry has no 'name': {str(entry)[:80]!r}"
            elif not isinstance(entry.get("results", []), list) or not all(
                isinstance(r, dict) for r in entry.get("results") or []
            ):
                problem = f"entry {entry.get('name')!r} has 'results' that are not a list of mappings"
            if problem:
                break
    if problem:
        raise MedevalDataError(
            f"{card_path}: its model-index is not in the Hub's format ({problem}). Fix it, then re-run."
        )
    return entries


def update_card(card_path: Path, model_name: str, results: list, section_markdown: str) -> bool:
    """Merge the pack's model-index entries and results section into a model card; True if it changed.
    A card that does not exist yet is created (and its folder), holding the pack's results alone."""
    import yaml

    from medeval_metrics.safe_files import card_target

    card_path, note = card_target(Path(card_path))
    if note:
        print(f"medeval report: note: {note}", file=sys.stderr)
    try:
        raw = card_path.read_bytes() if card_path.exists() else b""
    except OSError as exc:
        what = (
            "is a folder: pass the card file in it (README.md)"
            if card_path.is_dir()
            else f"cannot be read ({exc.strerror or exc})"
        )
        raise MedevalDataError(f"--update-card {card_path}: {what}. The report itself is written.") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MedevalDataError(f"{card_path}: not UTF-8 text ({exc}). Save the card as UTF-8, then re-run.") from exc
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom) :]
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
        body = "".join(lines[close + 1 :])
        try:
            parsed_header = yaml.safe_load("".join(header_lines)) or {}
        except yaml.YAMLError as exc:
            raise MedevalDataError(
                f"{card_path}: the YAML header does not parse ({exc}). Fix it, then re-run."
            ) from exc
    if not isinstance(parsed_header, dict):
        raise MedevalDataError(f"{card_path}: the YAML header is not a mapping. Fix it, then re-run.")
    entries = _check_entries(card_path, parsed_header.get("model-index") or [])
    new_results = index_results(results)
    expected = merged_index(entries, model_name, new_results)
    try:
        new_header = edit_model_index(header_lines, entries, model_name, new_results, newline)
        if (yaml.safe_load("".join(new_header)) or {}).get("model-index") != expected:
            raise LayoutNotFollowed
    except (LayoutNotFollowed, yaml.YAMLError):
        new_header = rewrite_model_index(header_lines, expected, newline)

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
    from medeval_metrics.safe_files import MedevalWriteError, atomic_write_bytes

    try:
        atomic_write_bytes(card_path, new_text.encode("utf-8"))  # the card's permissions are kept
    except MedevalWriteError as exc:
        reason = exc.__cause__.strerror if isinstance(exc.__cause__, OSError) else None
        raise MedevalDataError(
            f"--update-card {card_path}: cannot write the card ({reason or exc}); it was not changed. "
            "The report itself is written; pass a card path you can write to, then re-run."
        ) from exc
    return True
