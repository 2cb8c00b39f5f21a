"""Keep README.md's task table equal to the benchmark specs (`medeval list --markdown`).

The table sits between TABLE_START and TABLE_END. Usage:
  python scripts/readme_tasks_table.py --check   # exit 1 and show both tables if they differ
  python scripts/readme_tasks_table.py --write   # replace the table in README.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TABLE_START = "<!-- medeval:tasks-table:start -->"
TABLE_END = "<!-- medeval:tasks-table:end -->"
README = Path(__file__).resolve().parent.parent / "README.md"


def generated_table() -> str:
    from medeval_metrics.manifest import build_manifest, tasks_table

    return tasks_table(build_manifest(), markdown=True)


def current_table(text: str) -> str:
    """The README's table (between the markers); ValueError if the markers are missing or misordered."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {TABLE_START} ... {TABLE_END} block")
    return text[start + len(TABLE_START) : end].strip("\n")


def with_table(text: str, table: str) -> str:
    current_table(text)  # validates the markers
    start, end = text.find(TABLE_START) + len(TABLE_START), text.find(TABLE_END)
    return text[:start] + "\n" + table + "\n" + text[end:]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", type=Path, default=README)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    table = generated_table()
    if args.write:
        args.readme.write_text(with_table(text, table), encoding="utf-8")
        return 0
    if current_table(text) != table:
        print(
            f"{args.readme}: task table differs from the manifest. Run: python scripts/readme_tasks_table.py --write\n"
            f"--- README\n{current_table(text)}\n--- manifest\n{table}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
