"""The pack's error for bad input (re-exported by ``medeval_metrics.data``, its old home)."""


class MedevalDataError(ValueError):
    """Bad or missing input data; the message says which file, which record and the fix."""
