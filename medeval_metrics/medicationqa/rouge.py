"""ROUGE-L F-measure with exactly rouge-score's scores (``RougeScorer(["rougeL"], use_stemmer=True)``), faster.

rouge-score lowercases, keeps runs of ``[a-z0-9]``, Porter-stems tokens longer than three
characters (NLTK's stemmer), and fills an m x n LCS table in Python: about 6 ms per MedicationQA
item, nearly all of it the table and the stemmer. Here each distinct token is stemmed once (same
NLTK stemmer, so the same stems), and the LCS length comes from the bit-parallel algorithm of
Allison and Dix (1986, in the form given by Hyyrö 2004): one row of the table is one Python int,
updated with four big-int operations per token of the shorter text. The F-measure is computed with
rouge-score's operations in its order, so the floats are bit-identical (tested on all 690
MedicationQA references against rouge-score itself; ``scripts/bench_rouge.py`` measures the speed).
"""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN_RUN = re.compile(r"[a-z0-9]+")  # rouge-score: replace [^a-z0-9]+ by spaces, split on spaces
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
_STEM_CACHE_LIMIT = 200_000  # distinct tokens; the cache is emptied when it grows past this
_stems: dict[str, str | None] = {}


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import porter  # what rouge-score's DefaultTokenizer(use_stemmer=True) uses

    return porter.PorterStemmer()


def _stem(token: str) -> str | None:
    """rouge-score's treatment of one token: stemmed when longer than 3 characters; None if invalid."""
    stem = _stemmer().stem(token) if len(token) > 3 else token
    return stem if _VALID_TOKEN.match(stem) else None


@lru_cache(maxsize=4096)
def tokens(text: str) -> tuple[str, ...]:
    """rouge-score's tokens of ``text`` (lowercase, alphanumeric runs, Porter stems)."""
    if len(_stems) > _STEM_CACHE_LIMIT:
        _stems.clear()
    out = []
    for token in _TOKEN_RUN.findall(text.lower()):
        stem = _stems.get(token, "")
        if stem == "":
            stem = _stems[token] = _stem(token)
        if stem is not None:
            out.append(stem)
    return tuple(out)


def lcs_length(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Length of the longest common subsequence of two token sequences (bit-parallel)."""
    if len(a) < len(b):
        a, b = b, a  # bits over the longer sequence, one step per token of the shorter
    positions: dict[str, int] = {}
    bit = 1
    for token in a:
        positions[token] = positions.get(token, 0) | bit
        bit <<= 1
    all_ones = bit - 1
    row = all_ones  # a 0 bit marks where the LCS grows along ``a``
    for token in b:
        match = positions.get(token)
        if match:
            hits = row & match
            row = ((row + hits) | (row - hits)) & all_ones
    return len(a) - row.bit_count()


def rouge_l_f(target: str, prediction: str) -> float:
    """ROUGE-L F-measure of ``prediction`` against ``target``: rouge-score's ``score(target, prediction)["rougeL"].fmeasure``."""
    target_tokens = tokens(target)
    prediction_tokens = tokens(prediction)
    if not target_tokens or not prediction_tokens:
        return 0.0
    lcs = lcs_length(target_tokens, prediction_tokens)
    precision = lcs / len(prediction_tokens)
    recall = lcs / len(target_tokens)
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0
