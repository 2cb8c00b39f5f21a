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
    _demo: dict[str, Any] | None = field(default=None, repr=False)
    _task_settings: dict[str, dict[str, str]] | None = field(default=None, repr=False)

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
    def demo(self) -> dict[str, Any]:
        """What ``medeval demo`` marked about the run (``demo_note``): {} for any other run."""
        if self._demo is None:  # read once (a file beside the results)
            self._demo = demo_note(self.results_path, self.results)
        return self._demo

    def judges_scripted(self, judge: str | None = None) -> bool:
        """Whether ``judge``'s verdicts (None: the panel's numbers) come from a scripted judge: the demo's
        ``scripted_judges`` is true (every judge) or lists the judge (a panel with any listed judge is scripted)."""
        scripted = self.demo.get("scripted_judges")
        if scripted is True:
            return True
        if isinstance(scripted, list):
            return bool(scripted) if judge is None else judge in scripted
        return False

    def synthetic(self, task: str) -> bool:
        """The task's items are synthetic (the demo's ``synthetic_data``: true, or a list naming the task): their
        text is shown in report.html, never hidden as private data."""
        synthetic = self.demo.get("synthetic_data")
        return synthetic is True or (isinstance(synthetic, list) and task in synthetic)

    @property
    def scripted_model(self) -> bool:
        return self.demo.get("scripted_model") is True

    @property
    def rejudged(self) -> bool:
        """A ``medeval judge`` re-scoring of the run (``results_<date>_judged.json``)."""
        return self.results_path.stem.endswith(JUDGED_SUFFIX)

    def judged_path(self, task: str) -> Path | None:
        """The verdict records ``medeval judge`` wrote for ``task`` (``judged_<task>_<time>.jsonl``), if any."""
        stamp = (self.results.get("medeval_judge", {}).get(task) or {}).get("judged_at")
        path = self.results_path.parent / f"judged_{task}_{stamp}.jsonl"
        return path if stamp and path.is_file() else None

    def judge_records(self, task: str) -> list[dict[str, Any]]:
        """The records of ``judged_path(task)``, if any."""
        path = self.judged_path(task)
        if path is None:
            return []
        key = f"judged:{task}"  # the verdicts are read by several steps: once
        if key not in self._samples_cache:
            from medeval_metrics.breakdown import read_samples

            self._samples_cache[key] = _checked_records(path, read_samples(path), needs_doc_id=True)
        return self._samples_cache[key]

    def tasks(self) -> list[str]:
        return sorted(self.results.get("results", {}))

    def samples(self, task: str) -> list[dict[str, Any]]:
        path = self.sample_paths.get(task)
        if path is None:
            return []
        if task not in self._samples_cache:
            from medeval_metrics.breakdown import read_samples

            self._samples_cache[task] = _checked_records(path, read_samples(path))
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
            "few-shot as multi-turn": str(bool(results.get("fewshot_as_multiturn"))),  # left out below for 0-shot
            "system instruction": (
                f"{redact(_shorten(system))} (sha256 {str(results.get('system_instruction_sha') or '')[:12]})"
                if system
                else "none"
            ),
            "generation settings (command line)": redact(_format_gen_kwargs(gen_kwargs))
            if gen_kwargs
            else "task defaults",
            "limit": _limit_text(config.get("limit"), self.partial),
            # a task's own settings (the spec's task_settings: e.g. how a retrieval task retrieved), one row each
            **{f"{name}, `{task}`": text for task, own in self.task_settings().items() for name, text in own.items()},
            "lm-eval version": str(results.get("lm_eval_version", "?")),
            "transformers version": str(results.get("transformers_version", "?")),
            "date": self.date,
        }
        # only what applies to the run: few-shot turns to a run with examples, generation settings to one that
        # generates (where the results say; a run that does not say keeps them)
        if not self._has_few_shot():
            del settings["few-shot as multi-turn"]
        if not self._generates():
            del settings["generation settings (command line)"]
        return settings

    def task_settings(self) -> dict[str, dict[str, str]]:
        """Each task's own settings that change its scores, as its benchmark's spec prints them from the task's
        results config (``Reporting.task_settings``), redacted: task -> {name: text}; tasks with none left out."""
        if self._task_settings is None:  # read once: the settings table, the comparison and the run's key use it
            from medeval_metrics import registry
            from medeval_metrics.spec import named_function

            found: dict[str, dict[str, str]] = {}
            for task in self.tasks():
                spec = registry.benchmark_of(task)
                hook = spec.reporting.task_settings if spec is not None else None
                if hook is None:
                    continue
                config = (self.results.get("configs") or {}).get(task) or {}
                try:
                    own = named_function(hook)(config)
                except MedevalDataError as exc:
                    raise MedevalDataError(f"{self.results_path}: configs.{_shown(task)}: {exc}") from None
                if own:
                    found[task] = {str(name): redact(text) for name, text in own.items()}
            self._task_settings = found
        return self._task_settings

    def _has_few_shot(self) -> bool:
        shots = self.results.get("n-shot") or {}
        known = [v for v in shots.values() if isinstance(v, int) and not isinstance(v, bool)]
        return not shots or len(known) < len(shots) or any(v > 0 for v in known)

    def output_type(self, task: str) -> str | None:
        """The task's lm-eval output type: its results config's, else its pack YAML's; None where neither says."""
        from medeval_metrics import registry

        output_type = ((self.results.get("configs") or {}).get(task) or {}).get("output_type")
        if isinstance(output_type, str):
            return output_type
        try:
            return registry.task(task).output_type
        except KeyError:  # a task outside the pack whose config is not in the results
            return None

    def _generates(self) -> bool:
        types = [self.output_type(task) for task in self.tasks()]
        # a task whose output type is unknown may generate
        return not types or None in types or "generate_until" in types


def scored_samples(run: Run, task: str) -> list[dict[str, Any]]:
    """The task's logged samples with their per-item metrics. After ``medeval judge``, the metrics it
    recomputed (its ``judged_<task>_<time>.jsonl``, matched by doc_id) replace lm-eval's, scored as it
    scored them: one sample per doc, in doc order, under the first sample's filter."""
    samples, judged = run.samples(task), run.judge_records(task)
    if not judged or not samples:
        return samples
    metrics = {int(record["doc_id"]): record.get("metrics") or {} for record in judged}
    by_doc: dict[int, dict[str, Any]] = {}
    if any(sample.get("doc_id") is None for sample in samples):  # matched to the verdicts by doc_id
        from medeval_metrics.data import MedevalDataError

        raise MedevalDataError(
            f"{run.sample_paths[task]}: a record has no 'doc_id', which `medeval judge`'s verdicts are matched by; "
            "the sample log was edited or not written by lm-eval. Run the evaluation again."
        )
    for sample in samples:
        by_doc.setdefault(int(sample["doc_id"]), sample)
    filter_name = by_doc[min(by_doc)].get("filter", "none")
    return [
        {"doc": sample["doc"], "filter": filter_name, **metrics[doc_id]}
        for doc_id, sample in sorted(by_doc.items())
        if doc_id in metrics
    ]


def _checked_records(path: Path, records: list[dict[str, Any]], needs_doc_id: bool = False) -> list[dict[str, Any]]:
    """Sample-log records whose fields the report reads have lm-eval's types (``doc`` an object, ``doc_id`` a whole
    number, ``filter`` text); else one line naming the file, the record and the fix."""
    from medeval_metrics.breakdown import json_kind

    for number, record in enumerate(records, 1):
        doc_id, problem = record.get("doc_id"), ""
        if not isinstance(record.get("doc", {}), dict):
            problem = f"'doc' is {json_kind(record['doc'])}, not an object"
        elif (doc_id is not None or needs_doc_id) and (not isinstance(doc_id, int) or isinstance(doc_id, bool)):
            problem = f"'doc_id' is {json_kind(doc_id)} ({_shown(repr(doc_id))}), not a whole number"
        elif not isinstance(record.get("filter", ""), str):
            problem = f"'filter' is {json_kind(record['filter'])}, not text"
        elif needs_doc_id and not isinstance(record.get("metrics") or {}, dict):  # `medeval judge`'s records
            problem = f"'metrics' is {json_kind(record['metrics'])}, not an object"
        if problem:
            raise MedevalDataError(
                f"{path}: record {number}: {problem}; the sample log was edited or not written by lm-eval. "
                "Run the evaluation again."
            )
    return records


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
# What `medeval demo` says about its run (``demo_note``, docs/report.md): the report labels the scripted judges'
# numbers "scripted" and shows the synthetic items' text.
DEMO_KEY = "medeval_demo"
DEMO_FILE = "medeval_demo.json"  # what `medeval demo` writes beside each results file of its run


def demo_note(results_path: Path, results: dict[str, Any]) -> dict[str, Any]:
    """What ``medeval demo`` says about a run: ``medeval_demo.json`` beside its results file, or the same object
    under ``results["medeval_demo"]``; {} for any other run. ``scripted_judges``: true (every judge) or the
    scripted judges' names; ``synthetic_data``: true (every task) or the synthetic tasks' names; ``scripted_model``:
    true or false. A note of another form is one line naming the file and the field."""
    note, where = results.get(DEMO_KEY), results_path
    path = results_path.with_name(DEMO_FILE)
    if note is None and path.is_file():
        where = path
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise MedevalDataError(
                f"{path}: not a readable medeval demo note ({_shown(exc, 120)}). Run `medeval demo` again, or "
                "remove the file if the runs beside it are not the demo's."
            ) from None
    if note is None:
        return {}
    embedded = where == results_path

    def refuse(name: str, value: Any, expected: str) -> None:
        from medeval_metrics.breakdown import json_kind

        field = f"'{DEMO_KEY}{'.' + name if name else ''}'" if embedded else (f"'{name}'" if name else "the note")
        raise MedevalDataError(
            f"{where}: {field} is {json_kind(value)} ({_shown(repr(value))}), not {expected} as `medeval demo` "
            "writes it; the file was edited. Run `medeval demo` again."
        )

    if not isinstance(note, dict):
        refuse("", note, "an object")
    for name, what in (("scripted_judges", "judge names"), ("synthetic_data", "task names")):
        value = note.get(name)
        names = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not (isinstance(value, (bool, type(None))) or names):
            refuse(name, value, f"true, false or a list of {what}")
    if not isinstance(note.get("scripted_model"), (bool, type(None))):
        refuse("scripted_model", note["scripted_model"], "true or false")
    return note


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
    versions, few-shot counts, chat template, system instruction and each task's own settings (the spec's
    ``task_settings``: a retrieval task's retriever, k, mode...) (not the date, nor settings that do
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
            run.task_settings(),  # e.g. another retriever, k or mode: another evaluation
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


def read_results(path: Path) -> dict[str, Any]:
    """A results JSON, every field the report reads checked (``check_results``); anything else is one line."""
    from medeval_metrics.breakdown import utf8_text, without_lone_surrogates

    try:
        text = utf8_text(path, "not an lm-eval results JSON", "Pass the results file lm-eval wrote.")
        results = json.loads(text)
    except OSError as exc:
        raise MedevalDataError(f"{path}: not a readable lm-eval results JSON ({exc.strerror or exc}).") from None
    except MedevalDataError:
        raise
    except (ValueError, RecursionError) as exc:
        raise MedevalDataError(
            f"{path}: not a readable lm-eval results JSON ({_shown(exc, 120)}). Pass the results file lm-eval wrote."
        ) from None
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        raise MedevalDataError(f"{path}: has no 'results' section; is it an lm-eval results file?")
    results = without_lone_surrogates(results)
    check_results(path, results)
    # a section written as null reads as absent: the report reads sections with .get(name, {})
    return {key: value for key, value in results.items() if not (value is None and key in _FIELDS)}


def _shown(value: Any, limit: int = 60) -> str:
    from medeval_metrics.breakdown import shown

    return shown(value, limit)


# What lm-eval (and `medeval run`, `medeval judge`) write in the fields the report reads, as (JSON types, words);
# "count": a whole number >= 0, "seconds": a number >= 0.
_TEXT = ((str, type(None)), "text")
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "config": ((dict, type(None)), "an object"),
    "versions": ((dict, type(None)), "an object (task -> version)"),
    "n-shot": ((dict, type(None)), "an object (task -> few-shot count)"),
    "n-samples": ((dict, type(None)), "an object (task -> its sample counts)"),
    "configs": ((dict, type(None)), "an object (task -> its configuration)"),
    "task_hashes": ((dict, type(None)), "an object (task -> hash)"),
    "medeval_judge": ((dict, type(None)), "an object (task -> what `medeval judge` did)"),
    "medeval_run": ((dict, type(None)), "an object (what `medeval run` recorded)"),
    "chat_template": _TEXT,
    "chat_template_sha": _TEXT,
    "system_instruction": _TEXT,
    "system_instruction_sha": _TEXT,
    "lm_eval_version": _TEXT,
    "transformers_version": _TEXT,
    "model_name": _TEXT,
    "fewshot_as_multiturn": ((bool, type(None)), "true or false"),
}
_CONFIG_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "model": _TEXT,
    "model_args": ((str, dict, type(None)), "text (k=v,k2=v2) or an object"),
    "gen_kwargs": ((str, dict, type(None)), "text (k=v,k2=v2) or an object"),
}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def check_results(path: Path, results: dict[str, Any]) -> None:
    """Every field of a results file that the report reads has the type lm-eval writes; else one line naming
    the file, the field, what it holds and the fix. (The metric values themselves are checked by
    ``report.numbers``: a bad one can be left out with --skip-bad-numbers.)"""
    from medeval_metrics.breakdown import json_kind

    def refuse(field: str, value: Any, expected: str) -> None:
        shown = _shown(json.dumps(value, default=str)) if isinstance(value, (dict, list)) else _shown(repr(value))
        raise MedevalDataError(
            f"{path}: {field} is {json_kind(value)} ({shown}), not {expected} as lm-eval and `medeval run` write it; "
            "the file was edited or not written by them. Restore it, or run the evaluation again."
        )

    def check(mapping: dict[str, Any], fields: dict[str, tuple[tuple[type, ...], str]], prefix: str) -> None:
        for name, (types, expected) in fields.items():
            value = mapping.get(name)
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                refuse(f"'{prefix}{name}'", value, expected)

    check(results, _FIELDS, "")
    for task, entry in results["results"].items():
        if not isinstance(entry, dict):
            refuse(f"'results.{_shown(task)}'", entry, "an object (metric,filter -> value)")
    check(results.get("config") or {}, _CONFIG_FIELDS, "config.")
    limit = (results.get("config") or {}).get("limit")
    if limit not in (None, "None") and not _is_seconds(limit):  # a count, or a fraction below 1
        refuse("'config.limit'", limit, "null or a number >= 0")
    for task, version in (results.get("versions") or {}).items():
        if not isinstance(version, (str, int, float, type(None))) or isinstance(version, bool):
            refuse(f"'versions.{_shown(task)}'", version, "a version (a number or text)")
    for task, shots in (results.get("n-shot") or {}).items():
        if not (_is_count(shots) or isinstance(shots, (str, type(None)))):
            refuse(f"'n-shot.{_shown(task)}'", shots, "a whole number >= 0")
    for task, counts in (results.get("n-samples") or {}).items():
        if not isinstance(counts, dict):
            refuse(f"'n-samples.{_shown(task)}'", counts, "an object with 'original' and 'effective' counts")
        for name in ("original", "effective"):
            if name in counts and not _is_count(counts[name]):
                refuse(f"'n-samples.{_shown(task)}.{name}'", counts[name], "a whole number >= 0")
    for task, config in (results.get("configs") or {}).items():
        if not isinstance(config, dict):
            refuse(f"'configs.{_shown(task)}'", config, "an object")
        if not isinstance(config.get("generation_kwargs"), (dict, type(None))):
            refuse(f"'configs.{_shown(task)}.generation_kwargs'", config["generation_kwargs"], "an object")
    for task, judged in (results.get("medeval_judge") or {}).items():
        if not isinstance(judged, dict):
            refuse(f"'medeval_judge.{_shown(task)}'", judged, "an object")
        if not isinstance(judged.get("judged_at"), (str, type(None))):
            refuse(f"'medeval_judge.{_shown(task)}.judged_at'", judged["judged_at"], "a date id (text)")
    setup = (results.get("medeval_run") or {}).get("setup_s")
    if setup is not None and not _is_seconds(setup):
        refuse("'medeval_run.setup_s'", setup, "a number of seconds >= 0")
    recorded = (results.get("medeval_run") or {}).get("tasks")
    if not isinstance(recorded, (dict, type(None))):
        refuse("'medeval_run.tasks'", recorded, "an object (task -> its times)")
    for task, entry in (recorded or {}).items():
        where = f"medeval_run.tasks.{_shown(task)}"
        if not isinstance(entry, dict):
            refuse(f"'{where}'", entry, "an object")
        for name in ("wall_s", "model_s", "filters_s", "prepare_s", "scoring_s"):
            if name in entry and not _is_seconds(entry[name]):
                refuse(f"'{where}.{name}'", entry[name], "a number of seconds >= 0")
        judge = entry.get("judge")
        if not isinstance(judge, (dict, type(None))):
            refuse(f"'{where}.judge'", judge, "an object")
        for name in ("requests", "prompt_tokens", "completion_tokens"):
            if name in (judge or {}) and not _is_count(judge[name]):
                refuse(f"'{where}.judge.{name}'", judge[name], "a whole number >= 0")


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
            results = read_results(path)
            run = Run(path, results, _samples_for(path, sorted(results["results"])))
            run.demo  # noqa: B018  (read now: a bad demo note is an error before anything is written)
            runs.append(run)
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
