"""emrQL logical-form accuracy (the ``lf_acc`` of emrqa_emrql_1 and emrqa_emrql_2) as an evaluate module."""

import medeval_metrics.emrqa.evaluate_modules.inputs as emrqa_inputs
from medeval_metrics.evaluate_modules import base


class EmrqaLogicalFormAccuracy(base.PerItemMeanMetric):
    result_key = "lf_acc"
    description = (
        "emrQL logical-form accuracy: the first non-empty output line equals the gold logical form, "
        "whitespace-normalised (none next to brackets, commas or comparison signs)."
    )
    citation = emrqa_inputs.CITATION
    inputs_description = emrqa_inputs.LOGICAL_FORM_INPUTS
    features = emrqa_inputs.LOGICAL_FORM_FEATURES
    per_item = emrqa_inputs.logical_form_scorer("lf_acc")
