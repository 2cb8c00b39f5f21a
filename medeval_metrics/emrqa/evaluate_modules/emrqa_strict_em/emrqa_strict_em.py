"""emrQA evidence strict exact match (the ``strict_em`` of the evidence tasks) as an evaluate module."""

import medeval_metrics.emrqa.evaluate_modules.inputs as emrqa_inputs
from medeval_metrics.evaluate_modules import base


class EmrqaStrictEm(base.PerItemMeanMetric):
    result_key = "strict_em"
    description = (
        "emrQA strict EM: a predicted line, or run of adjacent lines, equals the gold evidence (lower-cased, "
        "whitespace collapsed); averaged over a question's gold answers, then over questions."
    )
    citation = emrqa_inputs.CITATION
    inputs_description = emrqa_inputs.EVIDENCE_INPUTS
    features = emrqa_inputs.EVIDENCE_FEATURES
    encode_reference = staticmethod(emrqa_inputs.encode_gold_answers)
    per_item = emrqa_inputs.evidence_scorer("strict_em")
