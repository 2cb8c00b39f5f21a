"""BERTScore-F1 against the reference answer (Zhang et al., ICLR 2020), opt-in.

HELM reports it for MedicationQA with ``distilbert-base-uncased``, layer 5, no idf weighting and no
baseline rescaling (crfm-helm 0.5.16 ``medhelm_run_specs``); that is the default here. Turned on
with ``--metadata '{"medicationqa_bertscore_model": NAME_OR_PATH}'`` (or
``MEDEVAL_MEDICATIONQA_BERTSCORE_MODEL``); the data loader hands the choice to ``process_results``
in each document's ``bertscore_model`` field: a Hub model name as it is, a local folder by a key that
names it (``doc_value``; a document never carries a path). Computed with ``transformers`` directly: contextual
embeddings of one hidden layer, each word token matched greedily to its most similar token on the
other side by cosine similarity (special tokens can be matched but are not averaged over); precision over the answer's tokens, recall over
the reference's, F1 their harmonic mean.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.settings import env_var, setting

METADATA_KEY = "medicationqa_bertscore_model"
ENV_VAR = env_var(METADATA_KEY)
DOC_FIELD = "bertscore_model"
HELM_MODEL = "distilbert-base-uncased"
# hidden layer per model, as the BERTScore authors tuned them (facts from their published table)
LAYERS = {"distilbert-base-uncased": 5, "bert-base-uncased": 9, "roberta-large": 17, "microsoft/deberta-large-mnli": 40}


def model_from_metadata(metadata: dict[str, Any]) -> str | None:
    value = setting(metadata, METADATA_KEY)
    if value in (True, "true", "1", "helm"):
        return HELM_MODEL
    return str(value) if value else None


_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_KEY_PREFIX = "local-model:"  # ":" is in no Hub model name
_LOCAL: dict[str, str] = {}  # key -> the local model folder it names, for this process's process_results


def _key(model: str) -> str:
    return _KEY_PREFIX + hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]


def doc_value(model: str) -> str:
    """What the documents carry for ``model``: a Hub model name as it is; anything else (a local folder) a
    key naming it, kept in this process for ``model_of_doc``."""
    if _HUB_NAME.match(model) and ".." not in model and not Path(model).expanduser().exists():
        return model
    _LOCAL[_key(model)] = model
    return _key(model)


def model_of_doc(doc: dict[str, Any]) -> str:
    """The model a document's ``bertscore_model`` names (``doc_value``). A key this process did not make is
    the environment's model when that is the one it names (``medeval judge`` on a run's logged samples),
    else a clear error."""
    value = str(doc[DOC_FIELD])
    if not value.startswith(_KEY_PREFIX):
        return value
    model = _LOCAL.get(value)
    if model is None:
        current = model_from_metadata({})
        if current and _key(current) == value:
            return current
        raise MedevalDataError(
            f"MedicationQA: the documents name a local BERTScore model by the key {value!r}, which this process "
            f"did not load. Set {ENV_VAR} to the model folder the run used (documents carry no path)."
        )
    return model


@lru_cache(maxsize=2)
def _load(model: str):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    encoder = AutoModel.from_pretrained(model)
    encoder.eval()
    layers = encoder.config.num_hidden_layers
    layer = LAYERS.get(model, layers)
    return tokenizer, encoder, min(layer, layers), torch


def _embed(text: str, model: str):
    """Unit-length token embeddings, and which tokens are words (not [CLS]/[SEP])."""
    tokenizer, encoder, layer, torch = _load(model)
    encoded = tokenizer(
        text.strip(),
        return_tensors="pt",
        truncation=True,
        max_length=min(getattr(tokenizer, "model_max_length", 512), 512),
        return_special_tokens_mask=True,
    )
    words = ~encoded.pop("special_tokens_mask")[0].bool()
    with torch.no_grad():
        hidden = encoder(**encoded, output_hidden_states=True).hidden_states[layer][0]
    return torch.nn.functional.normalize(hidden, dim=-1), words


def bertscore_f1(answer: str, reference: str, model: str = HELM_MODEL) -> float:
    """BERTScore F1 of ``answer`` against ``reference``; 0.0 when either has no tokens."""
    if not answer.strip() or not reference.strip():
        return 0.0
    (candidate, candidate_words), (gold, gold_words) = _embed(answer, model), _embed(reference, model)
    if not candidate_words.any() or not gold_words.any():
        return 0.0
    # as the BERTScore authors' code does: special tokens may be matched, but are not averaged over
    similarity = candidate @ gold.T
    precision = similarity.max(dim=1).values[candidate_words].mean().item()
    recall = similarity.max(dim=0).values[gold_words].mean().item()
    if precision + recall <= 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)
