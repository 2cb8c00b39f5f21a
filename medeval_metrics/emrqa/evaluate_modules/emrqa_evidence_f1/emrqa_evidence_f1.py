"""emrQA evidence token F1 (the ``f1`` of the evidence tasks) as an evaluate module."""

import medeval_metrics.emrqa.evaluate_modules.inputs as emrqa_inputs
from medeval_metrics.evaluate_modules import base


class EmrqaEvidenceF1(base.PerItemMeanMetric):
    result_key = "f1"
    description = (
        "emrQA evidence F1: SQuAD-style token F1 (token counts, lower-cased, no punctuation or articles) of the "
        "best predicted line, or run of adjacent lines, per gold answer; averaged over gold answers, then questions."
    )
    citation = emrqa_inputs.CITATION
    inputs_description = emrqa_inputs.EVIDENCE_INPUTS
    features = emrqa_inputs.EVIDENCE_FEATURES
    encode_reference = staticmethod(emrqa_inputs.encode_gold_answers)
    per_item = emrqa_inputs.evidence_scorer("f1")
