"""Compatibility alias, kept for users' code and task YAMLs: ``medeval_metrics.retrieval`` moved to
``medeval_metrics.emsqa.retrieval`` (issue 19); this name and its submodules are the same module objects."""

import importlib
import pkgutil
import sys

_NEW = "medeval_metrics.emsqa.retrieval"
_package = importlib.import_module(_NEW)
# Each submodule is registered under the old name too, so `import medeval_metrics.retrieval.index` finds the
# module already loaded instead of loading a second copy from the new folder.
for _info in pkgutil.iter_modules(_package.__path__):
    sys.modules[f"{__name__}.{_info.name}"] = importlib.import_module(f"{_NEW}.{_info.name}")
sys.modules[__name__] = _package
