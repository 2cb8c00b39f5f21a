"""emrQA evidence relaxed exact match by position (the ``relaxed_em`` of the evidence tasks) as an evaluate module."""

import medeval_metrics.emrqa.evaluate_modules.inputs as emrqa_inputs
from medeval_metrics.evaluate_modules import base


class EmrqaRelaxedEm(base.PerItemMeanMetric):
    result_key = "relaxed_em"
    description = (
        "emrQA relaxed EM: a predicted evidence line counts if it contains the gold answer entities, or if it is "
        "found in the note with start and end within 20 characters of the gold evidence; averaged over a "
        "question's gold answers, then over questions."
    )
    citation = emrqa_inputs.CITATION
    inputs_description = emrqa_inputs.EVIDENCE_INPUTS
    features = emrqa_inputs.EVIDENCE_FEATURES
    encode_reference = staticmethod(emrqa_inputs.encode_gold_answers)
    per_item = emrqa_inputs.evidence_scorer("relaxed_em")
