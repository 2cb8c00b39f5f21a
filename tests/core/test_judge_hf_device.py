"""A judge on lm-eval's ``hf`` backend on a machine without CUDA: it loads on the CPU unless told
otherwise, an explicit CUDA device is refused before any generation, and a judge model that cannot
be loaded leaves its items unscored with the reason instead of a traceback after the model answered."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge import client as client_module
from medeval_metrics.judge import runner as runner_module
from medeval_metrics.judge.config import device_problem, judge_device, panel_from_obj, validate_panel
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC


def hf_panel(**model_args):
    judge = {"name": "small", "backend": "hf", "model": "/models/smollm2", "model_args": model_args}
    return panel_from_obj({"judges": [judge], "cache": None}, "test panel")


@pytest.mark.parametrize(
    ("model_args", "cuda", "expected"),
    [
        ({}, False, "cpu"),  # lm-eval's HFLM would pick "cuda" and fail at model.to()
        ({}, True, "cuda"),
        ({"device": "cpu"}, True, "cpu"),
        ({"device": "cuda:1"}, True, "cuda:1"),
        ({"device": "mps"}, False, "mps"),
    ],
)
def test_device_comes_from_the_judge_settings_else_cpu_without_a_gpu(model_args, cuda, expected):
    judge = hf_panel(**model_args).judges[0]
    assert judge_device(judge, cuda_available=lambda: cuda) == expected


def test_api_judges_have_no_device():
    panel = panel_from_obj(
        {
            "judges": [
                {
                    "name": "api",
                    "backend": "local-chat-completions",
                    "model": "m",
                    "base_url": "http://127.0.0.1:9/v1/chat/completions",
                    "model_args": {"device": "cuda"},
                }
            ],
            "cache": None,
        },
        "t",
    )
    assert judge_device(panel.judges[0], cuda_available=lambda: False) is None
    assert device_problem(panel.judges[0], cuda_available=lambda: False) is None


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_asked_for_on_a_machine_without_it_is_one_line_naming_the_fix(device):
    judge = hf_panel(device=device).judges[0]
    problem = device_problem(judge, cuda_available=lambda: False)
    assert problem.startswith("judge small: model_args device") and '"device": "cpu"' in problem
    assert "\n" not in problem
    assert device_problem(judge, cuda_available=lambda: True) is None
    assert device_problem(hf_panel(device="cpu").judges[0], cuda_available=lambda: False) is None


def test_validate_panel_refuses_cuda_before_the_run(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(MedevalDataError, match="torch sees no CUDA GPU"):
        validate_panel(hf_panel(device="cuda"), check_backends=False)
    validate_panel(hf_panel(), check_backends=False)  # no device: the CPU, no problem


@pytest.mark.e2e  # the tiny model
def test_medeval_run_stops_before_generation_on_a_cuda_judge_without_cuda(monkeypatch, capsys, tiny_model, shared_data):
    import torch
    from conftest import clear_medeval_settings, run_medeval

    clear_medeval_settings(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    panel = {
        "judges": [{"name": "small", "backend": "hf", "model": str(tiny_model), "model_args": {"device": "cuda"}}],
        "cache": None,
    }
    meta = {
        "medicationqa_path": str(shared_data / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"),
        "medeval_judges": json.dumps(panel),
    }
    out = run_medeval(
        [
            "run",
            "--tasks",
            "medicationqa",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model}",
            "--limit",
            "1",
            "--metadata",
            json.dumps(meta),
        ],
        capsys,
    )
    assert out.returncode == 2
    assert "torch sees no CUDA GPU" in out.stderr and "Traceback" not in out.stderr


class _Recorder:
    """Stands in for lm-eval's HFLM class: records the arguments the judge client builds it with."""

    seen: ClassVar[list[dict]] = []

    @classmethod
    def create_from_arg_obj(cls, args, extra):
        cls.seen.append(dict(args))
        return object()


def test_the_client_builds_the_hf_backend_on_the_cpu_without_cuda(monkeypatch):
    import torch
    from lm_eval.api import registry

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(registry, "get_model", lambda name: _Recorder)
    _Recorder.seen = []
    panel = hf_panel(dtype="float32")
    client_module.JudgeClient(panel.judges[0], panel)
    assert _Recorder.seen == [{"pretrained": "/models/smollm2", "dtype": "float32", "device": "cpu"}]


def test_a_judge_that_cannot_be_loaded_leaves_its_items_unscored_not_a_traceback(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(runner_module, "JudgeClient", fail)
    runner = PanelRunner(hf_panel(), RUBRIC)
    out = runner.judge([JudgeItem("q1", "ref", "answer one"), JudgeItem("q2", "ref", "answer two")], progress=False)
    assert [sorted(v) for v in out] == [["small"], ["small"]]
    for verdicts in out:
        verdict = verdicts["small"]
        assert verdict["scores"] is None and verdict["unscored_kind"] == "transport"
        assert verdict["unscored_reason"].startswith("judge model could not be loaded (AssertionError: Torch not")


def test_a_configuration_error_while_building_still_stops(monkeypatch):
    def refuse(*args, **kwargs):
        raise MedevalDataError("judge small: unknown lm-eval backend 'hff'.")

    monkeypatch.setattr(runner_module, "JudgeClient", refuse)
    with pytest.raises(MedevalDataError, match="unknown lm-eval backend"):
        PanelRunner(hf_panel(), RUBRIC)
