"""Every patch of lm-eval internals the pack needs, each self-contained, with why and for which versions.

Each function here has a test (``tests/test_lm_eval_compat*.py``) that fails when lm-eval's
behaviour changes so that the patch is no longer needed or no longer works.
"""

from __future__ import annotations

from typing import Any


def set_api_request_headers(lm: Any, headers: dict[str, str]) -> None:
    """Make an lm-eval API backend send exactly ``headers`` (``{}``: no Authorization header at all).

    Why: lm-eval's ``TemplateAPI.header`` is a ``cached_property`` returning the ``header`` model arg
    or ``{"Authorization": f"Bearer {self.api_key}"}``, and the OpenAI-style backends' ``api_key``
    falls back to ``$OPENAI_API_KEY``: a judge (or any API model) configured without a key would
    send the user's OpenAI key to whatever host it talks to. Passing the key through the ``header``
    model arg instead would copy it into lm-eval's model-args logging and results JSON. Setting the
    cached value on the instance, after construction and before the first request, bypasses both.

    Needed for lm-eval 0.4.x up to at least 0.4.13 (``lm_eval.models.api_models.TemplateAPI.header``
    and ``lm_eval.models.openai_completions.LocalCompletionsAPI.api_key``).
    """
    lm.__dict__["header"] = dict(headers)  # the cached_property's slot: read by every requests.post
    lm.__dict__["_header"] = dict(headers)


def post_api_request(lm: Any, session: Any, messages: Any, gen_kwargs: dict[str, Any]) -> Any:
    """One generation request of an lm-eval API backend over a caller-owned ``requests.Session``.

    Why: ``TemplateAPI.model_call`` posts with ``requests.post``, a new TCP connection per request
    (3-5 ms of client CPU each in the judge benchmark), and on an HTTP error logs the response body,
    which can quote the request. This sends the same request, built by the backend's own
    ``create_message``/``_create_payload`` with its ``header``, ``verify_certificate`` and ``timeout``,
    through a keep-alive session, and raises ``requests.HTTPError`` without logging the body.

    Mirrors ``model_call`` of lm-eval 0.4.x up to at least 0.4.13; the test compares the two requests.
    """
    import copy

    payload = lm._create_payload(
        lm.create_message(messages), generate=True, gen_kwargs=copy.deepcopy(gen_kwargs),
        seed=lm._seed, eos=lm.eos_string,
    )
    response = session.post(lm.base_url, json=payload, headers=lm.header, verify=lm.verify_certificate,
                            timeout=lm.timeout)
    response.raise_for_status()
    return response.json()
