"""The package list: every package under medeval_metrics/ (found, so a new benchmark needs no entry here) plus
medeval_metrics.tasks, which pyproject's packages.find cannot express (it lives in the top-level tasks/ folder;
the mapping is pyproject's package-dir). Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["medeval_metrics", "medeval_metrics.*"]), "medeval_metrics.tasks"])
