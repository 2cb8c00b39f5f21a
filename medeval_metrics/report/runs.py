"""Reading lm-eval output folders: one ``Run`` per results JSON, with its logged samples.

Only a whitelist of settings leaves this module (see ``Run.settings``): lm-eval copies
``--model_args`` and ``--metadata`` into the results JSON, and those can hold API keys, tokens or
private paths, so nothing is printed unless it is known to be harmless, and every printed value
still goes through ``redact``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.redact import redact_for_display

# Model arguments that name the model; every other model argument is left out of reports.
SAFE_MODEL_ARGS = ("pretrained", "model", "revision", "dtype")


def redact(text: Any) -> str:
    """The text with anything that looks like a credential replaced by ``[redacted]``
    (``redact.redact_for_display``: the pack's one pattern table, in display mode)."""
    return redact_for_display(text)


def parse_model_args(model_args: Any) -> dict[str, str]:
    """lm-eval's ``model_args`` (a ``k=v,k2=v2`` string or a dict) as a dict of strings."""
    if isinstance(model_args, dict):
        return {str(k): str(v) for k, v in model_args.items()}
    if not isinstance(model_args, str) or not model_args.strip():
        return {}
    pairs = {}
    for part in model_args.split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs


@dataclass
class Run:
    """One lm-eval evaluation: its results JSON and the samples it logged (task -> records)."""

    results_path: Path
    results: dict[str, Any]
    sample_paths: dict[str, Path] = field(default_factory=dict)
    label: str = ""
    _samples_cache: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    @property
    def model_name(self) -> str:
        """The model's name from whitelisted arguments only (``pretrained`` or ``model``), redacted."""
        args = parse_model_args(self.results.get("config", {}).get("model_args"))
        name = args.get("pretrained") or args.get("model") or self.results.get("model_name") or "unknown-model"
        return redact(name)

    @property
    def partial(self) -> bool:
        """Run with a ``--limit`` that cut a test set: its scores cover part of it and are not comparable.
        A limit at least as large as every set (lm-eval's ``n-samples``, one entry per task, groups have
        none: effective == original for each) scored the whole sets; without those counts a limited run
        counts as partial."""
        if self.results.get("config", {}).get("limit") in (None, "None"):
            return False
        counts = self.results.get("n-samples")
        return not isinstance(counts, dict) or not counts or not all(map(_covers_the_whole_set, counts.values()))

    @property
    def date(self) -> str:
        return _date_of(self.results_path)

    @property
    def rejudged(self) -> bool:
        """A ``medeval judge`` re-scoring of the run (``results_<date>_judged.json``)."""
        return self.results_path.stem.endswith(JUDGED_SUFFIX)

    def judge_records(self, task: str) -> list[dict[str, Any]]:
        """The verdict records ``medeval judge`` wrote for ``task`` (``judged_<task>_<time>.jsonl``), if any."""
        stamp = (self.results.get("medeval_judge", {}).get(task) or {}).get("judged_at")
        path = self.results_path.parent / f"judged_{task}_{stamp}.jsonl"
        if not stamp or not path.is_file():
            return []
        from medeval_metrics.breakdown import read_samples

        return read_samples(path)

    def tasks(self) -> list[str]:
        return sorted(self.results.get("results", {}))

    def samples(self, task: str) -> list[dict[str, Any]]:
        path = self.sample_paths.get(task)
        if path is None:
            return []
        if task not in self._samples_cache:
            from medeval_metrics.breakdown import read_samples

            self._samples_cache[task] = read_samples(path)
        return self._samples_cache[task]

    def settings(self) -> dict[str, str]:
        """The settings that change scores, as printable strings (never raw model_args or metadata)."""
        results, config = self.results, self.results.get("config", {})
        args = parse_model_args(config.get("model_args"))
        model_bits = [f"{key}={redact(_no_local_path(args[key]))}" for key in SAFE_MODEL_ARGS if args.get(key)]
        chat_template = results.get("chat_template")
        system = results.get("system_instruction")
        gen_kwargs = config.get("gen_kwargs")
        settings = {
            "model": f"{config.get('model', '?')} ({', '.join(model_bits) or redact(_no_local_path(self.model_name))})",
            "chat template": (
                f"applied (sha256 {str(results.get('chat_template_sha') or '')[:12]})"
                if chat_template
                else "not applied"
            ),
            "few-shot as multi-turn": str(bool(results.get("fewshot_as_multiturn"))),
            "system instruction": (
                f"{redact(_shorten(system))} (sha256 {str(results.get('system_instruction_sha') or '')[:12]})"
                if system
                else "none"
            ),
            "generation settings (command line)": redact(_format_gen_kwargs(gen_kwargs))
            if gen_kwargs
            else "task defaults",
            "limit": _limit_text(config.get("limit"), self.partial),
            "lm-eval version": str(results.get("lm_eval_version", "?")),
            "transformers version": str(results.get("transformers_version", "?")),
            "date": self.date,
        }
        return settings


def _covers_the_whole_set(counts: Any) -> bool:
    """lm-eval's ``n-samples`` entry of a task says every item was scored."""
    if not isinstance(counts, dict):
        return False
    original, effective = counts.get("original"), counts.get("effective")
    return isinstance(original, int) and isinstance(effective, int) and effective >= original


def _limit_text(limit: Any, partial: bool = True) -> str:
    if limit in (None, "None"):
        return "none (full test sets)"
    if isinstance(limit, float) and limit.is_integer() and limit >= 1:
        limit = int(limit)  # lm-eval stores --limit 6 as 6.0; below 1 it is a fraction
    if not partial:
        return f"{limit} (not below any set's size: full test sets)"
    return f"{limit} (partial run: not comparable with full runs)"


def _shorten(text: Any, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_gen_kwargs(gen_kwargs: Any) -> str:
    if isinstance(gen_kwargs, dict):
        return ", ".join(f"{k}={v}" for k, v in gen_kwargs.items())
    return str(gen_kwargs)


JUDGED_SUFFIX = "_judged"


def _date_of(results_path: Path) -> str:
    """The run's date id: results_<date>.json, <stem>_<date>.json (for ``--output_path <stem>.json``)
    or either with ``_judged`` (``medeval judge``); lm-eval's date ids hold no "_"."""
    return results_path.stem.removesuffix(JUDGED_SUFFIX).rsplit("_", 1)[-1]


def _samples_for(results_path: Path, tasks: list[str]) -> dict[str, Path]:
    """``samples_<task>_<date>.jsonl`` written by the same run (same date suffix, same folder)."""
    date = _date_of(results_path)
    found = {}
    for task in tasks:
        path = results_path.parent / f"samples_{task}_{date}.jsonl"
        if path.is_file():
            found[task] = path
    return found


def _settings_key(run: Run) -> str:
    """What makes two runs in one folder the same evaluation: model, command-line config, tasks, their
    versions, few-shot counts, chat template and system instruction (not the date, nor settings that do
    not change scores: batch size, device, the answer cache); where two runs agree on all of this, the
    items they evaluated are compared too (``_items_key``)."""
    results = run.results
    config = {
        k: v
        for k, v in results.get("config", {}).items()
        if k not in ("batch_size", "batch_sizes", "device", "use_cache")
    }
    return json.dumps(
        [
            str(run.results_path.parent),
            config,
            sorted(results.get("results", {})),
            results.get("versions"),
            results.get("n-shot"),
            results.get("chat_template_sha"),
            results.get("system_instruction_sha"),
            results.get("fewshot_as_multiturn"),
        ],
        sort_keys=True,
        default=str,
    )


# A server on loopback (the demo's fake judges, a local test server) gets a new port each time it
# starts: the port is no part of what was evaluated; the scheme, host and path are.
_LOOPBACK_PORT = re.compile(
    r"(?i)(\b[a-z][a-z0-9+.-]*://(?:[^/@\s\"'\\]*@)?(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])):\d{1,5}(?!\d)"
)


def without_loopback_ports(text: str) -> str:
    """``text`` with the port of every loopback URL (localhost, 127.x.x.x, [::1]) left out."""
    return _LOOPBACK_PORT.sub(r"\1", text)


def _items_key(run: Run) -> str:
    """The items a run evaluated, per task: its logged docs, prompts and targets. lm-eval's ``task_hashes``
    hash each doc as the task built it, and a task may copy settings with URLs into every doc (a judge
    panel), so two runs against a loopback server differ there by a port alone: from the logged samples,
    each doc is hashed again without loopback ports. A task without logged samples keeps lm-eval's hash."""
    import hashlib

    key = dict(run.results.get("task_hashes") or {})
    for task in sorted(run.sample_paths):
        digest = hashlib.sha256()
        for sample in run.samples(task):
            doc = json.dumps(sample.get("doc"), sort_keys=True, ensure_ascii=False, default=str)
            digest.update(
                json.dumps([without_loopback_ports(doc), sample.get("prompt_hash"), sample.get("target_hash")]).encode(
                    "utf-8"
                )
            )
        key[task] = digest.hexdigest()
    return json.dumps(key, sort_keys=True)


def _newest_of_repeats(runs: list[Run], notes: list[str]) -> list[Run]:
    """Runs with the same settings and items in one folder (a re-run into the same --output_path) collapse
    to the newest."""
    settings = {id(run): _settings_key(run) for run in runs}
    repeated = {key for key in settings.values() if list(settings.values()).count(key) > 1}
    # the items are read only for runs whose settings agree
    keys = {id(run): (settings[id(run)], _items_key(run) if settings[id(run)] in repeated else "") for run in runs}
    newest: dict[tuple[str, str], Run] = {}
    for run in runs:  # oldest first, so the last one wins
        newest[keys[id(run)]] = run
    kept = [run for run in runs if newest[keys[id(run)]] is run]
    for run in kept:
        dropped = [r for r in runs if r is not run and keys[id(r)] == keys[id(run)]]
        if dropped:
            notes.append(
                f"{run.results_path.parent}: {len(dropped) + 1} runs with the same settings; reporting the newest "
                f"({run.results_path.name}), not {', '.join(r.results_path.name for r in dropped)}"
            )
    return kept


def load_runs(folders: list[Path], notes: list[str] | None = None) -> list[Run]:
    """Every run (results JSON) under the given lm-eval output folders or results files, oldest first.

    Runs with the same settings in one folder collapse to the newest; ``notes`` (if given) says so.
    """
    runs = []
    for folder in folders:
        folder = Path(folder)
        if folder.is_file() and folder.suffix == ".json":
            paths = [folder]
        elif folder.suffix == ".json" and not folder.exists():
            # the same --output_path given to lm-eval as a .json name: it wrote <stem>_<date>.json files
            paths = sorted(folder.parent.glob(f"{folder.stem}_*.json")) if folder.parent.is_dir() else []
        elif folder.is_dir():
            paths = sorted(folder.rglob("results_*.json"))
        else:
            raise MedevalDataError(f"{folder} does not exist. Pass the folder given to lm-eval's --output_path.")
        if not paths and folder.suffix == ".json":
            raise MedevalDataError(
                f"{folder}: no {folder.stem}_<date>.json next to it. Pass what was given to lm-eval's --output_path."
            )
        if not paths:
            raise MedevalDataError(
                f"{folder}: no results_*.json found. Pass the folder given to lm-eval's --output_path "
                "(the run must have finished; lm-eval writes results at the end)."
            )
        # a re-judged results file supersedes the run it re-scored
        superseded = {
            p.with_name(p.stem.removesuffix(JUDGED_SUFFIX) + ".json") for p in paths if p.stem.endswith(JUDGED_SUFFIX)
        }
        paths = [p for p in paths if p not in superseded]
        for path in paths:
            try:
                results = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise MedevalDataError(f"{path}: not a readable lm-eval results JSON ({exc}).") from exc
            if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
                raise MedevalDataError(f"{path}: has no 'results' section; is it an lm-eval results file?")
            runs.append(Run(path, results, _samples_for(path, sorted(results["results"]))))
    runs.sort(key=lambda run: (run.date, str(run.results_path)))
    runs = _newest_of_repeats(runs, notes if notes is not None else [])
    _label_runs(runs)
    return runs


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HUB_CACHE_FOLDER = re.compile(r"^models--([^/]+?)--([^/]+)$")


def _is_local_path(model_name: str) -> bool:
    return (
        model_name.startswith(("/", ".", "~", "\\"))
        or bool(re.match(r"^[A-Za-z]:[\\/]", model_name))
        or ("/" in model_name and not _HUB_ID.match(model_name))
    )


def card_model_name(model_name: str) -> str:
    """The name a model card gives the model: a Hub id as it is; for a local folder, the repo id it
    was saved from (a Hub cache snapshot's ``models--org--name``, or the ``_name_or_path`` in its
    config.json when that is a repo id), else the folder's name. A local path never becomes the name."""
    if not _is_local_path(model_name):
        return model_name
    parts = [p for p in model_name.replace("\\", "/").rstrip("/").split("/") if p]
    for part in parts:
        match = _HUB_CACHE_FOLDER.match(part)
        if match:
            return f"{match.group(1)}/{match.group(2)}"
    folder = Path(model_name).expanduser()
    try:
        saved_from = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        saved_from = None
    if isinstance(saved_from, str) and _HUB_ID.match(saved_from) and not Path(saved_from).exists():
        return saved_from
    return parts[-1] if parts else "unknown-model"


def _no_local_path(value: str) -> str:
    """A model path as a card may show it: a local folder by its name only (its place on disk is private)."""
    return f"{card_model_name(value)} (local folder)" if _is_local_path(value) else value


def _short_name(model_name: str) -> str:
    """A local model path shortens to its folder name (or the repo id it came from); a Hub id stays whole."""
    return card_model_name(model_name)


def _label_runs(runs: list[Run]) -> None:
    """Short unique labels: the model name, with the run date added where a model has several runs."""
    names = [_short_name(run.model_name) for run in runs]
    seen: dict[str, int] = {}
    for run, name in zip(runs, names):
        label = name if names.count(name) == 1 else f"{name} ({run.date[:19]})"
        seen[label] = seen.get(label, 0) + 1
        run.label = label if seen[label] == 1 else f"{label} #{seen[label]}"  # same model, same date: copies
