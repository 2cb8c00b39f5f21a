"""emrQL template accuracy (the ``template_acc`` of emrqa_emrql_1 and emrqa_emrql_2) as an evaluate module."""

import medeval_metrics.emrqa.evaluate_modules.inputs as emrqa_inputs
from medeval_metrics.evaluate_modules import base


class EmrqaTemplateAccuracy(base.PerItemMeanMetric):
    result_key = "template_acc"
    description = (
        "emrQL template accuracy: the first non-empty output line has the structure of the gold logical-form "
        "template with any slot values (a slot value holds no brackets), or equals the gold logical form."
    )
    citation = emrqa_inputs.CITATION
    inputs_description = emrqa_inputs.TEMPLATE_INPUTS
    features = emrqa_inputs.TEMPLATE_FEATURES
    per_item = emrqa_inputs.logical_form_scorer("template_acc")
