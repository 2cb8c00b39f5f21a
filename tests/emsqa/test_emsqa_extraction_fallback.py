"""The opt-in extraction fallback (issue 20): outputs the rules cannot read go to a configured model.

The model here is the scripted lm-eval backend (``medeval-scripted``, replies chosen by text in the
prompt), reached through the judge's runner as a real backend would be: built from the config, asked
in batches, re-asked within its budget, its replies cached.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import medeval_metrics.testing.scripted  # noqa: F401  (registers the medeval-scripted backend)
from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa import ExtractAnswerFilter, extract, fallback, process_results
from medeval_metrics.emsqa.fallback import QUESTION, ModelRead

DRUGS = ["ibuprofen", "aspirin", "acetaminophen", "morphine"]


def doc(key: str | None = None, gold=("b",)) -> dict:
    """An item as the loader gives it; ``key``: the extraction-model config's key it carries (``held``)."""
    d = {
        "question": "which medication is given first for chest pain?",
        "letters": ["a", "b", "c", "d"],
        "options": DRUGS,
        "gold": list(gold),
    }
    if key:
        d[fallback.DOC_FIELD] = key
    return d


def held(config_json: str) -> str:
    """The config checked and held as the task's loader holds it; the key its documents carry."""
    return fallback.register(fallback.config_from_metadata({fallback.METADATA_KEY: config_json}))


def config(tmp_path: Path, replies: dict, cache: bool = True, max_reasks: int = 1) -> str:
    table = tmp_path / "reader.json"
    table.write_text(json.dumps({"prompt": replies, "default": "no idea"}), encoding="utf-8")
    return json.dumps(
        {
            "judges": [
                {
                    "name": "reader",
                    "backend": "medeval-scripted",
                    "model": "scripted",
                    "model_args": {"table": str(table), "record": str(tmp_path / "asked")},
                }
            ],
            "cache": str(tmp_path / "cache.sqlite") if cache else None,
            "max_reasks": max_reasks,
        }
    )


def requests_made(tmp_path: Path) -> int:
    folder = tmp_path / "asked"
    return sum(len(f.read_text().splitlines()) for f in folder.glob("rank*.txt")) if folder.exists() else 0


@pytest.mark.parametrize(
    "reply, scores",
    [
        ('{"letters": ["b"]}', {"b": 1}),
        ('Sure. {"letters": ["A", "c"]}', {"a": 1, "c": 1}),
        ('{"letters": "b, d"}', {"b": 1, "d": 1}),
        ('{"letters": []}', {"none": 1}),  # the reply commits to no option: a reading, not a failure
        ('<think>{"letters": ["a"]}</think>{"letters": ["d"]}', {"d": 1}),
        ('{"letters": ["<option letter>"]}', None),  # the prompt's example echoed
        ('{"letters": ["aspirin"]}', None),
        ("B", None),
        ("", None),
    ],
)
def test_the_models_reply_is_read_strictly(reply, scores):
    assert QUESTION.parse(reply, "the output").scores == scores


def test_off_by_default_and_one_model_at_most(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_EMSQA_EXTRACTION_MODEL", raising=False)
    assert fallback.config_from_metadata({}) is None
    two = json.loads(config(tmp_path, {}))
    two["judges"].append({**two["judges"][0], "name": "other"})
    with pytest.raises(MedevalDataError, match="exactly one model"):
        fallback.config_from_metadata({fallback.METADATA_KEY: json.dumps(two)})
    with pytest.raises(MedevalDataError, match=fallback.METADATA_KEY):
        fallback.config_from_metadata({fallback.METADATA_KEY: str(tmp_path / "missing.yaml")})
    monkeypatch.setenv("MEDEVAL_EMSQA_EXTRACTION_MODEL", config(tmp_path, {}))
    assert fallback.config_from_metadata({}).judge_names == ["reader"]


def test_only_outputs_the_rules_cannot_read_go_to_the_model_and_its_readings_are_counted(tmp_path):
    unread = "Aspirin helps, I think, though morphine is used too; hard to say which."
    undecided = "Hard to say which; each has its uses."
    cfg = held(
        config(tmp_path, {unread: '{"letters": ["b"]}', undecided: '{"letters": []}', '["b"]': '{"letters": ["d"]}'})
    )  # would change a read answer: must never be asked
    docs = [doc(cfg), doc(cfg), doc(cfg)]
    answers = ExtractAnswerFilter().apply([[unread], [undecided], ['["b"]']], docs)
    assert answers == [[["b"]], [None], [["b"]]]
    assert isinstance(answers[0][0], ModelRead) and not isinstance(answers[2][0], ModelRead)
    assert requests_made(tmp_path) == 2  # the rules read the third: it is never asked
    metrics = [process_results(d, a) for d, a in zip(docs, answers)]
    assert [m["extracted_by_model"] for m in metrics] == [1.0, 0.0, 0.0]
    assert [m["acc"] for m in metrics] == [1.0, 0.0, 1.0]
    assert [m["unparseable"] for m in metrics] == [0.0, 1.0, 0.0]


# Replies the rules find commit to no option (issue 31): asking a model about them could only get a guess
# (one of a loop's answers, the echoed example, another item's answer), so they are never sent.
QUESTION_TEXT = "which medication is given first for chest pain?"
OPTIONS_BLOCK = "A. ibuprofen\nB. aspirin\nC. acetaminophen\nD. morphine"
INSTRUCTION = (
    "One or more options may be correct. Reply with a JSON list of the lowercase letters of all correct options,"
    ' e.g. ["b"] or ["a", "c"].'
)
BLOCK = f"{OPTIONS_BLOCK}\n{INSTRUCTION}\nAnswer:"  # the prompt's tail, which a base model repeats
COMMITS_TO_NOTHING = {  # output -> why the reader reads no answer
    # a reply naming different answers in turn, to its budget
    'The answer is "b".\nThe answer is "a".\nThe answer is "d".\nThe answer is "b".\nThe answer is': (
        extract.NAMES_ANSWERS_IN_TURN
    ),
    "Answer: B\nAnswer: A\nAnswer: C": extract.NAMES_ANSWERS_IN_TURN,
    # the prompt block restarted and cut by the budget; with the question; bare labels; the options alone
    f" {BLOCK}\n{BLOCK}\nA. ibuprofen\nB": extract.RESTATES_PROMPT,
    f"\nQuestion: {QUESTION_TEXT}\n{BLOCK}\nQuestion: {QUESTION_TEXT}\n{OPTIONS_BLOCK}\nAns": extract.RESTATES_PROMPT,
    "\nA.\nB.\nC.\nD.\nAnswer:\nA.\nB.\nC": extract.RESTATES_PROMPT,
    OPTIONS_BLOCK: extract.RESTATES_PROMPT,
    "\nAnswer:\nAnswer:\nAnswer:\nAnsw": extract.RESTATES_PROMPT,
    # counting through the alphabet past the options
    " A: B: C: D: E: F: G: H: I: J:": extract.COUNTS_ALPHABET,
    '["A"] ["B"] ["C"] ["D"] ["E"] ["F"] ["G"]': extract.COUNTS_ALPHABET,
    # the block, then another item: nothing past the echo is this item's
    f" {BLOCK}\nQuestion: what is the first step in treating a burn?\nA. stop the burning process\nAnswer: the first": (
        extract.RESTATES_PROMPT
    ),
    # another item's question, with its own answer
    '\n\nQuestion: what is the first step in treating a burn?\nA. stop the burning process\nB. apply ice\nAnswer: ["a"]': (
        extract.ANOTHER_ITEM
    ),
}
UNREADABLE = [  # the rules cannot read these, and found no reason they commit to nothing: the model is asked
    "Aspirin helps, I think, though morphine is used too; hard to say which.",
    "The answer is either B or C.",
    f"{OPTIONS_BLOCK}\nHard to say; the second one, I think.",  # the options restated, then the model's own words
    "A. ibuprofen - no\nB. aspirin - probably\nC. acetaminophen - unsure\nD. morphine - later",  # a list of its own
    "<think>The patient has chest pain, so aspirin",  # cut inside its reasoning
]


@pytest.mark.parametrize(
    "output, reason, letters",
    [
        *((output, reason, None) for output, reason in COMMITS_TO_NOTHING.items()),
        *((output, None, None) for output in UNREADABLE),
        ('["b"]', None, ["b"]),  # an answer has no reason either
        ("It is B.", None, ["b"]),
    ],
)
def test_the_reader_says_why_a_reply_commits_to_nothing(output, reason, letters):
    assert extract.commits_to_nothing(output, ["a", "b", "c", "d"], DRUGS, QUESTION_TEXT) == reason
    assert extract.extract_answer(output, ["a", "b", "c", "d"], DRUGS, QUESTION_TEXT) == letters  # public: as before


def test_replies_that_commit_to_nothing_are_never_sent_to_the_model(tmp_path):
    """The model would read every reply it is asked about as "a" (a guess on the replies that commit to
    nothing): only the unreadable ones are asked, and only they count as extracted by the model."""
    outputs = [*COMMITS_TO_NOTHING, *UNREADABLE]
    cfg = held(config(tmp_path, {"Options:\nA. ibuprofen": '{"letters": ["a"]}'}))  # in every request
    docs = [doc(cfg, gold=("a",)) for _ in outputs]
    answers = ExtractAnswerFilter().apply([[output] for output in outputs], docs)
    assert answers == [[None]] * 11 + [[["a"]]] * 5
    assert requests_made(tmp_path) == 5
    metrics = [process_results(d, a) for d, a in zip(docs, answers)]
    assert [m["extracted_by_model"] for m in metrics] == [0.0] * 11 + [1.0] * 5
    assert [m["unparseable"] for m in metrics] == [1.0] * 11 + [0.0] * 5
    assert [m["acc"] for m in metrics] == [0.0] * 11 + [1.0] * 5


def test_a_letter_outside_the_options_or_an_unusable_reply_leaves_the_output_unparseable(tmp_path):
    odd, bad = "Hmm, maybe the fifth one.", "Let me think about this more carefully."
    cfg = held(config(tmp_path, {odd: '{"letters": ["e"]}', bad: "The reply commits to B."}, max_reasks=1))
    answers = ExtractAnswerFilter().apply([[odd], [bad]], [doc(cfg), doc(cfg)])
    assert answers == [[None], [None]]
    # the unusable reply is asked once more (max_reasks=1), and no more: 1 + 2 requests
    assert requests_made(tmp_path) == 3


def test_readings_are_cached_and_a_rerun_asks_nothing(tmp_path):
    unread = "Aspirin helps, I think, though morphine is used too; hard to say which."
    cfg = held(config(tmp_path, {unread: '{"letters": ["b"]}'}))
    assert ExtractAnswerFilter().apply([[unread]], [doc(cfg)]) == [[["b"]]]
    assert ExtractAnswerFilter().apply([[unread]], [doc(cfg)]) == [[["b"]]]
    assert requests_made(tmp_path) == 1


def test_the_loader_checks_the_config_holds_it_and_gives_the_documents_its_key(tmp_path, monkeypatch):
    """lm-eval gives a filter only the documents: each carries a short key naming the config the loader holds
    once (a digest: never the config, its paths, URLs or key names), the same key for the same config."""
    from medeval_metrics.emsqa import load_private

    monkeypatch.delenv("MEDEVAL_EMSQA_EXTRACTION_MODEL", raising=False)
    items = tmp_path / "private.json"
    items.write_text(json.dumps([{"question": "q1?", "choices": ["a. x", "b. y"], "answer": "a"}]), encoding="utf-8")
    plain = load_private(emsqa_private_path=str(items))["test"]
    assert fallback.DOC_FIELD not in plain.column_names
    cfg = config(tmp_path, {})
    stamped = load_private(emsqa_private_path=str(items), emsqa_extraction_model=cfg)["test"]
    key = stamped[0][fallback.DOC_FIELD]
    assert fallback.registered(key).judge_names == ["reader"] and key == held(cfg)
    assert len(key) < 40 and str(tmp_path) not in key and "reader" not in key and "{" not in key
    again = load_private(emsqa_private_path=str(items), emsqa_extraction_model=cfg)["test"]
    assert again[0][fallback.DOC_FIELD] == key  # lm-eval's doc hashes stay put between runs
    with pytest.raises(MedevalDataError, match="unknown lm-eval backend|backend"):
        bad = json.loads(cfg)
        bad["judges"][0]["backend"] = "no-such-backend"
        load_private(emsqa_private_path=str(items), emsqa_extraction_model=json.dumps(bad))


def test_a_key_no_loader_holds_is_a_clear_error():
    """Documents built in another process (or edited) name a config this process never checked: refused with
    the key, the field and the fix, not read as "fallback off"."""
    with pytest.raises(
        MedevalDataError, match=r"extraction_model names .extraction-model-0{16}.*emsqa_extraction_model"
    ):
        ExtractAnswerFilter().apply([["Hard to say."]], [doc("extraction-model-0000000000000000")])
    # a value that is no key (a config stamped by an older pack) is not echoed: it could hold paths
    stamped = json.dumps({"judges": [{"name": "r", "model": "/private/models/reader"}]})
    with pytest.raises(MedevalDataError, match="not a key") as caught:
        ExtractAnswerFilter().apply([["Hard to say."]], [doc(stamped)])
    assert "/private" not in str(caught.value)


@pytest.mark.e2e
def test_through_lm_eval_only_unread_outputs_are_read_by_the_model_and_counted(tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medeval_metrics import tasks_path
    from medeval_metrics.testing.scripted import ScriptedLM

    synthetic = Path(__file__).resolve().parents[1] / "fixtures" / "emsqa_synthetic.json"
    items = json.loads(synthetic.read_text(encoding="utf-8"))
    gold = [[item["answer"]] if isinstance(item["answer"], str) else sorted(item["answer"]) for item in items]
    # even items answered in the requested format; odd items in prose the rules cannot read, which the
    # extraction model reads as the gold answer for items 1 and 3 and as no answer for the rest; item 5
    # names different answers in turn: the rules find it commits to none, and the model (which would read
    # it as the gold answer) is never asked
    outputs, replies = {}, {}
    for index, (item, answer) in enumerate(zip(items, gold)):
        if index % 2 == 0:
            outputs[item["question"]] = json.dumps(answer)
        elif index == 5:
            outputs[item["question"]] = 'The answer is "a".\nThe answer is "b".\nThe answer is "a".\nThe answer is "b".'
            replies['The answer is "a".'] = json.dumps({"letters": answer})
        else:
            outputs[item["question"]] = f"Hard to say for item {index}; several look right to me."
            replies[f"item {index};"] = json.dumps({"letters": answer if index in (1, 3) else []})
    manager = TaskManager(
        include_defaults=False,
        include_path=tasks_path(),
        metadata={"emsqa_private_path": str(synthetic), fallback.METADATA_KEY: config(tmp_path, replies)},
    )
    model = ScriptedLM({"key": "question", "generate": outputs})
    results = lm_eval.simple_evaluate(model=model, tasks=["emsqa_private"], task_manager=manager, log_samples=True)
    metrics = results["results"]["emsqa_private"]
    n = len(items)
    assert metrics["extracted_by_model,flexible-extract"] == pytest.approx(2 / n)
    assert metrics["acc,flexible-extract"] == pytest.approx((n // 2 + 2) / n)
    assert metrics["unparseable,flexible-extract"] == pytest.approx((n // 2 - 2) / n)
    assert requests_made(tmp_path) == n // 2 - 1  # only the unread half was asked, less the looping item 5
    samples = results["samples"]["emsqa_private"]
    assert sum(s["extracted_by_model"] for s in samples) == 2  # the logged samples carry the same count


@pytest.mark.e2e
def test_smollm2_as_the_extraction_model(request, tmp_path):
    """SmolLM2-135M-Instruct (``medeval make-real-model``) on the hf backend, on CPU, reads outputs the rules
    cannot: the run completes on CPU, every reading is one the item allows (its own letters, or none), and a
    rerun is answered from the cache."""
    try:
        model_dir = request.getfixturevalue("real_model")
    except pytest.FixtureLookupError:
        pytest.skip("the real_model fixture (medeval make-real-model, issue 20) is not in this checkout")
    # two outputs, one round (max_reasks 0): about a minute of CPU; on two busy cores, several
    outputs = ["I'd go with the second one.", "Probably the last of them, though I am torn."]
    judge = {
        "name": "smollm2",
        "backend": "hf",
        "model": str(model_dir),
        "max_tokens": 24,
        "model_args": {"device": "cpu", "dtype": "float32"},
    }
    cfg = json.dumps({"judges": [judge], "cache": str(tmp_path / "cache.sqlite"), "max_reasks": 0})
    docs = [doc(held(cfg)) for _ in outputs]
    answers = ExtractAnswerFilter().apply([[o] for o in outputs], docs)
    for (answer,) in answers:
        assert answer is None or (isinstance(answer, ModelRead) and set(answer) <= set("abcd"))
    metrics = [process_results(d, a) for d, a in zip(docs, answers)]
    assert [m["extracted_by_model"] for m in metrics] == [float(a[0] is not None) for a in answers]
    # a rerun is answered from the cache: the same readings
    assert ExtractAnswerFilter().apply([[o] for o in outputs], docs) == answers
