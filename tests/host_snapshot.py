"""What "leaves lm-eval as it found it" means, as something a test can compare: every attribute of every
loaded ``lm_eval`` module and of every class those modules define, and the process-wide hooks a library
could replace (exception hooks, ``warnings.showwarning``, logging's record factory, every logger's filters
and handlers, the standard streams, the SIGINT handler, ``sys.argv``, the umask and the environment)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import warnings
from typing import Any


def _class_attributes(prefix: str, cls: type, into: dict[str, int]) -> None:
    for name, value in list(vars(cls).items()):
        into[f"{prefix}.{name}"] = id(value)


def snapshot() -> dict[str, int]:
    """Object identities keyed by where they are reachable; two snapshots differ where something was replaced."""
    out: dict[str, int] = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "lm_eval" or module_name.startswith("lm_eval.")):
            continue
        for name, value in list(vars(module).items()):
            if name.startswith("__") and name.endswith("__"):
                continue
            out[f"{module_name}:{name}"] = id(value)
            if isinstance(value, type) and getattr(value, "__module__", None) == module_name:
                _class_attributes(f"{module_name}:{name}", value, out)
    out["sys.excepthook"] = id(sys.excepthook)
    out["sys.stdout"] = id(sys.stdout)
    out["sys.stderr"] = id(sys.stderr)
    out["threading.excepthook"] = id(threading.excepthook)
    out["warnings.showwarning"] = id(warnings.showwarning)
    out["warnings.formatwarning"] = id(warnings.formatwarning)
    out["logging.record_factory"] = id(logging.getLogRecordFactory())
    mask = os.umask(0o022)  # read by setting it: put back at once
    os.umask(mask)
    out["process umask"] = mask
    out["process environment"] = hash(tuple(sorted(os.environ.items())))
    out["SIGINT handler"] = id(signal.getsignal(signal.SIGINT))
    out["sys.argv"] = hash(tuple(sys.argv))
    out["logging.logger_class"] = id(logging.getLoggerClass())
    loggers: dict[str, Any] = {"<root>": logging.getLogger()}
    loggers.update(
        (name, lg) for name, lg in list(logging.root.manager.loggerDict.items()) if isinstance(lg, logging.Logger)
    )
    for name, logger in loggers.items():
        out[f"logger {name} filters"] = hash(tuple(id(f) for f in logger.filters))
        out[f"logger {name} handlers"] = hash(tuple(id(h) for h in logger.handlers))
        for handler in logger.handlers:
            out[f"logger {name} handler {id(handler)} filters"] = hash(tuple(id(f) for f in handler.filters))
    return out


def replaced(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """What was there before and is another object now (new modules and names are not replacements)."""
    return sorted(key for key, value in before.items() if key in after and after[key] != value)
