"""EMSQA answer extraction: the set of option letters a model output commits to.

The rules, in order of precedence (``tasks/emsqa/README.md`` states them for users):

1. ``<think>`` blocks are reasoning, not answers (an unclosed block hides everything after it). A
   base model running on into the next ``Question:`` is read up to that point.
2. The format the prompt asked for is authoritative: the last JSON list of letters (``["a", "c"]``,
   zero-/few-shot) or ``answer`` field (``{"answer": ["b"]}`` or ``"answer": "A, C"``, CoT) wins
   over any free text around it.
3. Otherwise free text is read, strongest evidence first, the last of the strongest kind winning:
   ``\\boxed{}``, a labelled final answer (``Final answer: B``, ``**Answer:** B``, a heading
   ``### Answer`` over a letter line, a table row ``| Answer | C |``); answer sentences ("the
   correct answers are A and C", "C is the correct answer", "I'd choose B", "It's B."); bold
   letters (``**B** and **D**``); a bare reply or a letter line opening the reply; weakest, a
   closing sentence that is a letter alone ("Not B. C."). Negated or hypothetical mentions ("B is
   incorrect", "not A", "the answer would be C if ...") and option lists restated from the prompt
   (a line per option, covering every option) are not answers. A negation reaches to the end of
   its clause ("Option A is incorrect and option C is right" is C; "rule out A, B and D" negates
   all three); "not A but C" is C. A multi-answer explained option by option ("The correct answers
   are A and C. - A is correct: ...") stays the multi-answer unless a line revises it ("only C").
4. Letters are kept as written: a letter that is not one of the item's options stays in the set
   as a wrong pick (the authors' ``benchmark_LLM.py`` scores it so); ``scoring`` counts an answer
   made only of such letters as ``invalid_letter``.
5. Prose that commits to no option is ``None`` (unparseable); the extractor never guesses.

Throughout (version 4, issue 20's real small-model outputs): a list or phrase counts only where it is
framed as the answer, so a restatement of the options (all, or the first ones in prompt order each with
its own text) is no answer, and a later JSON list framed as an example or a rejection does not override
the answer; an option's text counts wherever its letter does (exact after normalisation), a letter
written with another option's text is no answer, several texts named as the answer give all of them; a
run through the alphabet or a base model's next numbered item ends the answer; curly quotes, full-width
forms and the common Chinese and Spanish answer phrases are folded to what the rules read. Outputs that
stay unreadable may go to the opt-in model fallback (``emsqa.fallback``); those the rules find commit to
no option (below: an echo, a label run, a loop, another item) do not, and ``commits_to_nothing`` says why.

Base and looping models (issue 31): a restated prompt block (the options, the instruction line, ``Answer:``)
started again and cut anywhere by the token budget is no answer, nor are bare labels through the options or
the alphabet ("A.\nB.\nC.\nD.\nAnswer:", "A: B: C: ..."); a letter written between the echoes is read. A
reply opening with a question other than this item's is another item. A statement repeated with different
letters ('The answer is "b".\nThe answer is "a".') commits to none; the same answer repeated is one answer,
and a last word revising to a letter ("B... wait, actually C") wins. One option's text asserted in a
sentence about what the question asks ("The most likely diagnosis is myocarditis.", "Diagnosis:
myocarditis", "Myocarditis is the answer.") is that option, unless another option's text appears, the text
is part of a longer word, the sentence hedges, negates or takes it back, or the question asks for what is
NOT so. A number is an option only in a reply that numbered the item's own options 1, 2, 3, ... itself
("1. pulse\n2. blood pressure ... The answer is 2"), and not with another option's text. In a list covering
every option, a verdict counts only where it opens what follows the label ("B – True").

Every pattern is linear-time (bounded repeats, no nested quantifiers over the same characters):
the hardening tests run 1 MB adversarial outputs through it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medeval_metrics.emsqa.reasoning import strip_reasoning
from medeval_metrics.emsqa.strict import COT_INSTRUCTION, LIST_INSTRUCTION, RUN_PAST_OPTIONS

# --- the requested formats -------------------------------------------------------------------------
_LETTER_IN_LIST = r"\s*[\"'`]?\s*([a-zA-Z])\s*[\"'`]?\s*"
_JSON_LIST = re.compile(r"\[((?:" + _LETTER_IN_LIST + r",){0,15}" + _LETTER_IN_LIST + r")?\]")
_ANSWER_FIELD = re.compile(
    r"[\"'](?:final[_ ])?answers?[\"']\s*:\s*(\[[^\[\]]{0,200}\]|\"[^\"\n]{0,120}\"|'[^'\n]{0,120}'"
    # the authors' RAG templates write the field as List(A, B) or List([C]); models copy that form
    r"|List\(\s*\[?[^()\[\]\n]{0,200}\]?\s*\))",
    re.IGNORECASE,
)
# the authors' format line itself, echoed: its letters are an example, not an answer
_TEMPLATE_ECHO = re.compile(r"List\(\s*A\s*,\s*B\s*\)\s*or\s+List\(\s*\[\s*C\s*\]\s*\)", re.IGNORECASE)
# complete "key": value pairs of a JSON object, up to the field being read
_PAIRS_BEFORE = re.compile(
    r'\s*(?:"[^"\n]{0,80}"\s*:\s*(?:"(?:[^"\\\n]|\\.){0,4000}"|-?[\d.]{1,20}|true|false|null)\s*,)*\s*'
)
# A base model continuing a few-shot prompt writes the next item; its answer is not this item's.
_CONTINUATION = re.compile(
    r"(?:^|\n)[ \t>#*]{0,6}(?:Question|Q)[ \t]{0,3}(?:\d{0,4}[ \t]{0,3}[:.]|\d{1,4}[ \t*]{0,3}\n)", re.IGNORECASE
)

# --- free text ---------------------------------------------------------------------------------------
_FREE_LETTERS = "abcdefgh"  # options run a-f; g and h are the letters models invent past them
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{)?([^{}\n]{1,60}?)\}?\s*\}")
_LABEL = re.compile(  # a labelled answer: "Final answer: B", "**Answer:** B", "### Answer\nC", "| Answer | C |"
    r"(?im)(?:^|(?<=[\n|]))[ \t>#*|_-]{0,8}(?:(?:my|the|final|correct|best)[ \t]+){0,2}"
    r"(?:answers?|selection|selected|choice|pick|response|verdict|correct|(?:正确|最终)?答案)(?:[ \t]*\([^()\n]{0,20}\))?[ \t*_]{0,4}"
    r"(?:[:：=|-][ \t*_|]{0,6}|\n[ \t\n*_#|>-]{0,12})"
)
_PHRASE = re.compile(  # an answer sentence: "the correct answer is", "answers are:", "I'd choose"
    r"(?i)\b(?:(?P<qual>(?:in)?correct|right|wrong|best|final|true|false|appropriate|most[ \t]+"
    r"(?:appropriate|likely|accurate|correct))[ \t]+(?:answers?|options?|choices?|responses?|letters?|ones?"
    r"|interventions?|actions?|treatments?|steps?)"
    r"|answers?)"
    r"[ \t]*(?:\([^()\n]{0,20}\)[ \t]*)?"
    r"(?P<verb>is|are|=|:|would[ \t]+be|will[ \t]+be|should[ \t]+be|must[ \t]+be|could[ \t]+be|might[ \t]+be"
    r"|seems[ \t]+to[ \t]+be|appears[ \t]+to[ \t]+be|is[ \t]+clearly|is[ \t]+therefore|therefore[ \t]+is"
    r"|here[ \t]+is|then[ \t]+is)[ \t:*]{0,4}"
    r"|\b(?:i(?:'d|’d|[ \t]+would|[ \t]+will|'ll|’ll)?|we(?:'d|[ \t]+would)?"
    r"|you(?:'d|[ \t]+should|[ \t]+must|[ \t]+would|[ \t]+need[ \t]+to|[ \t]+want[ \t]+to))"
    r"[ \t]+(?:choose|pick|select|go[ \t]+with|go[ \t]+for"
    r"|say|answer|opt[ \t]+for|mark|circle)[ \t:*]{0,4}"
    r"|\b(?:which|this|that)[ \t]+(?:is|corresponds[ \t]+to|matches)[ \t]+(?=(?:option|choice|answer)[ \t]+[\"'“*(]{0,3}[A-H]\b)"
    r"|\b(?:it(?:'s|’s|[ \t]+is|[ \t]+has[ \t]+to[ \t]+be|[ \t]+must[ \t]+be)|that(?:'s|[ \t]+is)|so)[ \t]+(?=[\"'“*(]{0,3}[A-H]\b)"
    # "Therefore, Option B." as the whole conclusion (the letters end the line or the text)
    r"|\b(?:therefore|thus|hence)[ \t]*,?[ \t]+(?=(?:options?|choices?)[ \t]+[\"'“*(]{0,3}[A-H]\b"
    r"(?:[ \t]*(?:,|and|&)[ \t]*(?:options?[ \t]+)?[A-H]\b){0,7}[ \t*\"')”]{0,3}[.!]?[ \t]*(?:\n|$))"
)
# "C is the correct answer", "Options B and C are both correct"
_LETTER_FIRST = re.compile(
    r"(?i)(?:is|are)[ \t]+(?:both[ \t]+|all[ \t]+|also[ \t]+|each[ \t]+)?(?:the[ \t]+)?(?:most[ \t]+|only[ \t]+)?"
    r"(?:correct|right|best|true|accurate|appropriate|valid|(?<=the[ \t])better"
    r"|(?<=the[ \t])one[ \t]+to[ \t]+(?:choose|pick|select)|(?<=the[ \t])answer)\b(?![ \t]+(?:if|only|when|unless)\b)"
)
_NEGATION_BEFORE = re.compile(
    r"(?i)\b(?:not|n't|never|neither|nor|none|incorrect|wrong|false|eliminat\w*|rule[sd]?[ \t]+out|ruled[ \t]+out"
    r"|exclud\w*|instead[ \t]+of|rather[ \t]+than|other[ \t]+than|except|whether|unlike|versus|vs)\b[^.!?\n]{0,40}$"
)
# The words that end a negation's reach: "A is incorrect and option C is right", "A is wrong; the
# answer is C", "Rather than C, I'd choose A". A negation governs its own clause, not the next one.
_NEGATION_WORD = re.compile(
    r"(?i)(?:\b(?:not|never|neither|nor|none|incorrect|wrong|false|eliminat\w*|rule[sd]?[ \t]+out|ruled[ \t]+out"
    r"|exclud\w*|instead[ \t]+of|rather[ \t]+than|other[ \t]+than|except|whether|unlike|versus|vs)\b|n't\b)"
)
_NEGATED_LIST = re.compile(  # "A, B, and " in "rule out A, B, and D": the list a negation governs
    r"(?:[ \t*_\"'“”(]*(?i:(?:options?|choices?)[ \t]+)?[A-Ha-h](?![A-Za-z0-9])[ \t*_\"'“”)]*"
    r"(?:,|;|&|\b(?i:and|or|nor)\b)?[ \t]*(?i:(?:and|or|nor)\b)?[ \t]*){0,8}"
)
_CLAUSE_BREAK = re.compile(r"(?i)[,;:—–]|[ \t]-[ \t]|\b(?:and|but|while|whereas)\b")
_LETTERS = r"\(?[A-H]\)?(?:[ \t]*(?:,|(?i:or|nor|and)\b)[ \t]*(?i:(?:options?|choices?)[ \t]+)?\(?[A-H]\)?){0,5}"
# "The answer is not B but A", "not A, but rather C": the pick is the letters after "but"
_NOT_BUT = re.compile(
    r"(?i:\bnot[ \t]+(?:options?[ \t]+|choices?[ \t]+)?)"
    + _LETTERS
    + r"[ \t]*[,;]?[ \t]*(?i:but[ \t]+(?:rather[ \t]+)?(?:it(?:'s|’s|[ \t]+is)[ \t]+)?)"
)
# "B is not correct, but C is.": the letters of an elliptical answer after a rejection
_ELLIPTICAL = re.compile(
    r"(?i:\b(?:not[ \t]+(?:the[ \t]+)?(?:correct|right|true|(?:best|right|correct)[ \t]+(?:answer|option|choice))"
    r"|incorrect|wrong|false)\b)[^.!?\n]{0,30}?(?:[,;][ \t]*(?i:(?:but|while|whereas)[ \t]+)?|[ \t]+(?i:but|while|whereas)[ \t]+)"
    r"(?i:(?:options?|choices?)[ \t]+)?(?P<letters>" + _LETTERS + r")[ \t]+(?i:is|are)[ \t]*(?=[.!;]|\n|$)"
)
# The reply's closing sentence is a letter alone: "Not B. C.", "B is not it. A.", "Not C, not D: B."
_CLOSING_LETTERS = re.compile(
    r"(?:^|(?<=[.!])[ \t]+|\n[ \t>*#-]*|(?P<after>[,:;—–])[ \t]*)[*_\"“(]{0,3}(?i:(?:options?|choices?)[ \t]+)?"
    r"(?P<letters>[A-H](?:[ \t]*(?:,|&|(?i:and)\b)[ \t]*[A-H]){0,5})[ \t*_\"”)]{0,3}[.!]?$"
)
# ... where a clause (not a sentence) precedes it, only after a rejected letter: "Not C, not D: B."
_REJECTED_LETTER = re.compile(
    r"(?i:\bnot[ \t]+(?:options?[ \t]+)?)[A-H][ \t]*$|[A-H][ \t]+(?i:is[ \t]+(?:not|wrong|incorrect|out))[ \t]*$"
)
# The reply's last words revise it to a letter alone: "B... wait, actually C", "A. No, wait: D."
_REVISED_AT_THE_CLOSE = re.compile(
    r"(?i:\b(?:actually|wait|correction|rather|instead|on[ \t]+second[ \t]+thought))[ \t,:;.…!-]{1,6}"
    r"(?i:(?:actually|no|it(?:'s|[ \t]+is)|the[ \t]+answer[ \t]+is|make[ \t]+(?:it|that))[ \t,:]{1,3}){0,2}"
    r"[*_\"(]{0,2}(?P<letters>[A-H](?:[ \t]*(?:,|&|(?i:and)\b)[ \t]*[A-H]){0,5})[ \t*_\")]{0,3}[.!]?[ \t]*$"
)
_ABBREVIATION = re.compile(r"(?i)\b(?:vs|e\.g|i\.e|etc|cf|approx|no|fig|dr|st)\.$")
_REVISION = re.compile(
    r"(?i)\b(?:only|actually|instead|wait|correction|rather|in[ \t]+fact|on[ \t]+second|re-?reading|changing)\b"
)
_HYPOTHETICAL = re.compile(r"(?i)\b(?:if|instead|otherwise|were|unless|had)\b")
_FORCED_CHOICE = re.compile(r"(?i)\bif[ \t]+(?:i|we)[ \t]+(?:had|have|must|were)[ \t]+to[ \t]+\w+|\bif[ \t]+forced\b")
_WEAK_VERB = re.compile(r"(?i)would|could|might|should")
_BOLD = re.compile(r"\*\*([^*\n]{1,80})\*\*")
_OPTION_LINE = re.compile(
    r"^[ \t>]{0,6}(?:[-*+][ \t]{1,3})?(?:\*\*)?[ \t]*\(?([a-hA-H])"
    r"(?:\)|\.|:|\*\*[.):]?|[ \t]+[-–—](?=[ \t]))"
    r"(?:\*\*)?(?:[ \t]|$)"
)
_LABEL_BEFORE_OPTION = re.compile(
    r"(?i)[ \t*#>]{0,6}(?:(?:the|my|final|correct|right|best)[ \t]+){0,2}"
    r"answers?(?:[ \t]+(?P<verb>is|are))?(?P<colon>[ \t*]*:)?[ \t*]*"
)
_MAY_BE_LABELLED = re.compile(r"(?i)[ \t*#>]{0,6}(?:\w+[ \t]+){0,2}answer")
# an option line the token budget cut short: "B", "C.", "C. resp" (its text a prefix of the option's own)
_CUT_OPTION_LINE = re.compile(r"[ \t>]{0,6}(?:[-*+][ \t]{1,3})?\(?([a-hA-H])(?:[.):][ \t]*([^\n]{0,300}))?")
_NUMBERED_LINE = re.compile(r"^[ \t>]{0,6}(?:\*\*)?([1-8])[.)](?:\*\*)?[ \t]+")
# The line before a partial option list that makes it the answer: "The correct answers are:", "Answer:"
_FRAMES_A_LIST = re.compile(r"(?i)(?:answers?|correct|choose|choice|pick|select\w*)\b[^\n]{0,40}:[ \t*]*$")
_POSITIVE_VERDICTS = ("correct", "true", "right", "yes", "✓", "✔", "✅")
_VERDICT = re.compile(
    r"(?i)(?<![a-z])(?:(in|not[ \t]+|un)?correct|true|false|wrong|right|yes|no"
    r"|✓|✔|✅|✗|✘|❌)(?![a-z])"
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
# a word after a lowercase letter makes it an article ("a fracture"), unless it joins the next letter ("a, b and c")
# after a capital "A" these words go on with the answer ("A because ...", "A is right"); another lowercase
# word makes it the article ("The correct answer is: A bag valve mask ...", SmolLM2 on the authors' prompt)
_LETTER_GOES_ON = re.compile(
    r"[ \t]+(?:because|since|as|is|was|are|and|or|nor|for|which|that|with|in|on|here|it|seems|would|should|could"
    r"|appears|fits|matches|best|only|also|then|so|since|due|given|from|according|based|per|again|too|"
    r"only|alone|instead|rather|either|both|if|when|while|but|though|although|option|choice|not|over|vs)\b",
    re.IGNORECASE,
)
_WORD_AFTER_LOWER = re.compile(r"[ \t]+(?!(?:and|or|nor)[ \t]+\(?[a-h](?![A-Za-z0-9'’-]))[a-z]")
# A real reply names its answer a handful of times; only the last mentions of each kind are read,
# so 1 MB of repeated answer-like text costs one regex scan, not 100,000 span readings.
_LAST_MENTIONS = 48
# Free text is read in the last 32,000 characters (replies of 1,024 tokens are about 5,000): the
# requested JSON format is still found anywhere, and the opening line is read separately.
_FREE_TEXT_WINDOW = 32_000


# --- folding: one spelling for quotes, full-width forms and the common non-English answer phrases ---------
# Curly quotes and full-width ASCII (U+FF01-FF5E, common in Chinese output) become their ASCII forms, so
# every rule below reads ［"d"］, “B” and Answer：C as it reads ["d"], "B" and Answer: C.
_FOLD = {
    **{code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)},
    0x201C: '"',
    0x201D: '"',
    0x201E: '"',
    0x2033: '"',
    0x2018: "'",
    0x2019: "'",
    0x201A: "'",
    0x2032: "'",
    0x3001: ", ",
    0x3002: ". ",
    0xFF64: ", ",
    0x3000: " ",
}
# Answer phrases in Chinese and Spanish, written the English way the rules read them. Only phrases that
# frame an answer and the separators between letters: the rest of the reply is left as written.
_FOREIGN = [
    (re.compile(r"(?:最终|正确)?答案(?:应该|应)?(?:是|为)"), " the answer is "),
    (re.compile(r"我(?:会)?(?:选择|选)|选择"), " I choose "),
    (re.compile(r"(?<=[A-Ha-h])[ \t]*(?:和|及|与|以及)[ \t]*(?=[A-Ha-h](?![A-Za-z]))"), " and "),
    (re.compile(r"(?<=[A-Ha-h])[ \t]*(?:或者|或)[ \t]*(?=[A-Ha-h](?![A-Za-z]))"), " or "),
    (
        re.compile(r"(?i)\bl(?:a|as)[ \t]+respuestas?[ \t]+(?:correctas?[ \t]+)?(?:es|son|ser[ií]a)(?:[ \t]+las?)?\b"),
        " the answer is",
    ),
    (
        re.compile(r"(?i)\bl(?:a|as)[ \t]+opci(?:ó|o)n(?:es)?[ \t]+(?:correctas?[ \t]+)?(?:es|son)(?:[ \t]+las?)?\b"),
        " the correct option is",
    ),
    (re.compile(r"(?i)\b(?:yo[ \t]+)?(?:elijo|elegir[ií]a|escojo|selecciono)(?:[ \t]+la)?\b"), " I choose"),
    (re.compile(r"(?<=(?<![A-Za-z])[A-Ha-h])[ \t]+y[ \t]+(?=[A-Ha-h](?![A-Za-z]))"), " and "),
    (re.compile(r"(?<=(?<![A-Za-z])[A-Ha-h])[ \t]+o[ \t]+(?=[A-Ha-h](?![A-Za-z]))"), " or "),
]


def _fold(text: str) -> str:
    text = text.translate(_FOLD)
    if len(text) > 2 * _FREE_TEXT_WINDOW:  # only the opening and the closing window are read as prose
        return _fold_phrases(text[:4_000]) + text[4_000:-_FREE_TEXT_WINDOW] + _fold_phrases(text[-_FREE_TEXT_WINDOW:])
    return _fold_phrases(text)


def _fold_phrases(text: str) -> str:
    if re.search(r"[\u3400-\u9fff]|respuesta|opci|elijo|elegir|escojo|selecciono", text, re.IGNORECASE):
        for pattern, english in _FOREIGN:
            text = pattern.sub(english, text)
    return text


def _last(matches: Iterable[Any]) -> list[Any]:
    kept: list[Any] = []
    for match in matches:
        kept.append(match)
        if len(kept) > 2 * _LAST_MENTIONS:
            del kept[:_LAST_MENTIONS]
    return kept[-_LAST_MENTIONS:]


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[*_`\"“”'‘’]", "", text).lower().split())


class _Span:
    """Reads an answer span ("B", "A, C", "(a) and (c)", "A) Oxygen and C) Aspirin", '"A"') from a position.

    Option texts (letter -> text), when known, let it skip a letter's restated text and read an
    answer given as the option's text alone.
    """

    _DECOR = re.compile(
        r"[ \t*_\"“”'‘’`]*(?:\n[ \t*_>#-]*){0,3}(?:(?:options?|choices?|letters?|answers?)[ \t]*[:#]?[ \t*_\"“”'‘’`]*)?",
        re.IGNORECASE,
    )
    _TOKEN = re.compile(r"\(([a-hA-H])\)|\[([a-hA-H])\]|([A-H])(?![A-Za-z0-9'’-])|([a-h])(?![A-Za-z0-9'’-])")
    _SEP = re.compile(
        r"[ \t*_\"“”'‘’`]*(?:,[ \t]*(?:and|&)?|;|&|\+|/|\band\b|\bas[ \t]+well[ \t]+as\b|\bplus\b|\bor\b)[ \t*_\"“”'‘’`]*"
        r"(?:(?:options?|choices?|both)[ \t]+)?"
        r"|[ \t*_]*\n[ \t*>-]*(?=\(?[a-hA-H](?:[.):]|\*\*))",
        re.IGNORECASE,
    )
    _AFTER = re.compile(r"[ \t]*(?:[.):]|[ \t]-|–|—)?[ \t]*")
    _NEXT_LABELLED = re.compile(r"(?:,|;|\band\b|&|\+)[ \t*]*(?=\(?[a-hA-H](?:[.)]|\*\*))", re.IGNORECASE)

    def __init__(self, options: Mapping[str, str] | None) -> None:
        self.options = {k.lower(): _normal(v) for k, v in (options or {}).items() if _normal(v)}
        self.conflicted: set[str] = set()  # letters written with another option's text ("C. aspirin", aspirin is B)

    def read(self, text: str, pos: int, limit: int = 240) -> list[str] | None:
        chunk = text[pos : pos + limit]
        letters: list[str] = []
        at = self._DECOR.match(chunk).end()
        saw_or = False
        while True:
            token = self._TOKEN.match(chunk, at)
            if token is None:
                break
            letter = next(g for g in token.groups() if g)
            after = token.end()
            if (
                token.group(4)
                and _WORD_AFTER_LOWER.match(chunk, after)
                and not self._option_text_at(chunk, after, letter)
            ):
                break  # "a fracture": an article, not a letter
            if (
                token.group(3) == "A"
                and _WORD_AFTER_LOWER.match(text, pos + after)
                and not _LETTER_GOES_ON.match(text, pos + after)
                and not self._option_text_at(text, pos + after, letter)
            ):
                break  # "The correct answer is: A bag valve mask ...": the article (read past the chunk's end)
            letters.append(letter.lower())
            at = self._skip_option_text(chunk, after, letter.lower())
            if self._other_options_text(chunk, after, letter.lower()):
                self.conflicted.add(letter.lower())
                return None  # the letter says one option, the text another: no answer
            sep = self._SEP.match(chunk, at)
            if sep is None or sep.end() == at:
                break
            if re.search(r"(?i)\bor\b", sep.group(0)):
                saw_or = True
            at = sep.end()
        if letters:
            return None if saw_or and len(set(letters)) > 1 else letters  # "B or C" commits to neither
        return self._by_option_text(chunk[self._DECOR.match(chunk).end() :])

    def _option_text_at(self, chunk: str, at: int, letter: str) -> bool:
        text = self.options.get(letter.lower())
        return bool(text) and _normal(chunk[at : at + len(text) + 20]).startswith(text[:30])

    def _other_options_text(self, chunk: str, at: int, letter: str) -> bool:
        """Whether the letter at ``at`` is followed ("C. ", "C) ", "C - ") by another option's text, not its own."""
        at = re.compile(r"[*_\"”’'`\]]*").match(chunk, at).end()
        after = self._AFTER.match(chunk, at)
        if not after.group(0).strip() or not self.options:
            return False
        rest = chunk[after.end() : after.end() + 240]
        own = _key(self.options.get(letter, ""))
        if own and _key(rest).startswith(own):
            return False
        # the rest of the sentence is exactly another option's text ("C. aspirin"); "C. Pupil response (D)
        # is not part of the scale" and "B: insulin would worsen it" start new sentences about that option
        stop = re.search(r"[.!?;](?:[ \t]|$)|\n", rest)
        said = _key(rest[: stop.start()] if stop else rest)
        if any(other != letter and said == _key(text) for other, text in self.options.items()):
            return True
        # or a text that is no option's but more like another's than its own: "A. full-thickness burns
        # covering 15% to 30% of bsa" where A is full-thickness 5% to 15% and C partial-thickness 15% to 30%
        words = set(said.split())
        if not words:
            return False
        likeness = {other: _likeness(words, _key(text)) for other, text in self.options.items()}
        best = max((score for other, score in likeness.items() if other != letter), default=0.0)
        return best >= 0.5 and best > likeness.get(letter, 0.0)

    def _skip_option_text(self, chunk: str, at: int, letter: str) -> int:
        at = re.compile(r"[*_\"”’'`\]]*").match(chunk, at).end()
        after = self._AFTER.match(chunk, at)
        start = after.end()
        delimited = after.group(0).strip() != ""
        text = self.options.get(letter)
        if text:
            window = chunk[start : start + len(text) * 2 + 20]
            if _normal(window).startswith(text):
                # consume characters until the normalised prefix covers the option text
                for end in range(len(text), len(window) + 1):
                    if len(_normal(window[:end])) >= len(text):
                        end_pos = start + end
                        close = re.match(r"[ \t*_\"“”'‘’`)]*", chunk[end_pos:])
                        return end_pos + close.end()
        paren = re.match(r"[ \t]*\([^()\n]{1,60}\)", chunk[at:])
        if paren:  # "A (Oxygen) and C (Aspirin)"
            return at + paren.end()
        if delimited:  # "A) Oxygen and C) Aspirin": jump to the next labelled letter on this line
            rest = chunk[start:]
            stop = _SENTENCE_END.search(rest)
            scope = rest[: stop.start()] if stop else rest
            nxt = self._NEXT_LABELLED.search(scope)
            if nxt:
                return start + nxt.start()
            return start + len(scope)
        return at

    def _by_option_text(self, chunk: str) -> list[str] | None:
        stop = _SENTENCE_END.search(chunk)
        sentence = _normal(chunk[: stop.start()] if stop else chunk)
        if not sentence:
            return None
        named = _texts_named(sentence, self.options)
        if named is not None:
            return named or None  # several texts joined by "or", or one text among words that name no option
        hits = [letter for letter, text in self.options.items() if _states_option(sentence, text)]
        return hits if len(hits) == 1 else None


_TEXT_JOIN = {"and", "or", "both", "plus", "either", "also", "option", "options", "the"}


def _texts_named(sentence: str, options: Mapping[str, str]) -> list[str] | None:
    """The options a phrase names by their texts, joined by commas and "and" ("aspirin and morphine",
    "red, green and yellow"), longest text first; [] where it names two or more joined by "or" or
    some of it names no option ("aspirin and nitroglycerin"); None where it is not such a list."""
    words = _key(sentence).split()
    texts = sorted(
        ((letter, _key(text).split()) for letter, text in options.items() if _key(text)), key=lambda item: -len(item[1])
    )
    letters: list[str] = []
    position, saw_or, joined = 0, False, False
    while position < len(words):
        if words[position] in _TEXT_JOIN:
            saw_or = saw_or or words[position] in ("or", "either")
            joined = joined or words[position] in ("and", "or", "plus")
            position += 1
            continue
        hit = next(((letter, text) for letter, text in texts if words[position : position + len(text)] == text), None)
        if hit is None:
            break
        letters.append(hit[0])
        position += len(hit[1])
    if position == len(words) and letters:
        if len(set(letters)) == 1:
            return letters[:1]
        return [] if saw_or else sorted(set(letters))
    if len(set(letters)) >= 2 or (letters and joined):
        return []  # several texts, or a text joined to something that is no option: unclear
    return None


def _likeness(words: set[str], text: str) -> float:
    """Shared words over all words (Jaccard) between what was said and an option's text."""
    theirs = set(text.split())
    return len(words & theirs) / len(words | theirs) if theirs else 0.0


def _starts_with_words(text: str, words: str) -> bool:
    return bool(words) and (text == words or text.startswith(words + " "))


def _states_option(sentence: str, text: str) -> bool:
    """Whether a reply's first sentence states this option: it is the option's text, or begins with it
    and goes on as a statement of it (see ``_STATES_THE_OPTION``)."""
    if sentence == text:
        return True
    if not sentence.startswith(text):
        return False
    rest = sentence[len(text) :]
    states = _STATES_THE_OPTION.match(rest)
    if states is None or _UNSURE_OR_NEGATED.search(rest):
        return False
    return bool(states.group("mark")) or len(rest) < 12  # "Yes, because ...": any length; "Yes it is": short


# After an option's text at the start of a reply, what keeps it a statement of that option ("Yes,
# because", "False: the ...", "Brachial artery is correct") rather than another phrase that happens
# to begin with the same word ("No idea", "No problem", "Yes or no?", "True or false?").
_STATES_THE_OPTION = re.compile(
    r"(?P<mark>[ \t]*[,;:(—–-])|[ \t]+(?:is|are|was|would|because|since|as|it|its|it's"
    r"|they|that|this|statement|indeed|definitely|correct|right)\b",
    re.IGNORECASE,
)
_UNSURE_OR_NEGATED = re.compile(r"\b(?:not|isn't|aren't|don't|dont|unsure|idea|cannot|can't|cant)\b", re.IGNORECASE)


class _NoAnswer(Exception):
    """The requested format was written but says nothing readable ("["a. aspirin"]", a = ibuprofen)."""


def _resolve(element: str, keys: Mapping[str, str]) -> str | None:
    """One JSON list element as an option letter: "b", "B. aspirin", or an option's text ("aspirin",
    "Pharmacokinetics.") exact after normalisation; None if it names no option or several. Raises
    _NoAnswer where a letter comes with another option's text."""
    element = element.strip(" \t\"'`*")
    whole = re.fullmatch(r"\(?([A-Za-z])\)?\.?", element)
    if whole:
        return whole.group(1).lower()
    labelled = re.fullmatch(r"(?:(?i:option|choice)[ \t]+)?\(?([A-Ha-h])(?:[.):]|[ \t]+[-–—])[ \t]*(.+)", element)
    if labelled:
        letter, said = labelled.group(1).lower(), _key(labelled.group(2))
        if keys.get(letter) and said.startswith(keys[letter]):
            return letter
        words = set(said.split())
        likeness = {other: _likeness(words, text) for other, text in keys.items()}
        best = max((score for other, score in likeness.items() if other != letter), default=0.0)
        if best == 1.0 or (best >= 0.5 and best > likeness.get(letter, 0.0)):
            raise _NoAnswer  # another option's text, or one more like another's than its own
        return letter if letter in keys else None
    said = re.sub(r"^(?:(?:the|an?|option|choice)[ \t]+)+", "", _key(element))
    hits = [letter for letter, text in keys.items() if text and said == text]
    return hits[0] if len(hits) == 1 else None


# A list that the words around it make an example, a rejection or a hypothetical, not the answer:
# 'e.g. ["a", "c"]', 'Incorrect: ["d"]', '["b"] is correct, not ["d"]', 'Options ["a"] are wrong'.
_LIST_AS_EXAMPLE = re.compile(
    r"(?i)\b(?:e\.g|i\.e|for[ \t]+(?:example|instance)|such[ \t]+as|like|format(?:ted)?"
    r"|example|template|would[ \t]+(?:write|be[ \t]+written|look)|if)\b"
)
_LIST_REJECTED_AFTER = re.compile(
    r"(?i)[ \t*]*(?:is|are|would[ \t]+be|seems?|seem)?[ \t]*(?:also[ \t]+)?"
    r"(?:not\b|n't|incorrect|wrong|false|ruled|eliminated|excluded)"
)
_REJECTING_LABEL = re.compile(
    r"(?i)\b(?:incorrect|wrong|false|eliminated|excluded|ruled[ \t]+out|not)\b"
    r"[^:\n]{0,30}:[ \t*]*$"
)
_QUOTED_TEXT_LIST = re.compile(
    r"\[[ \t]*(?:\"[^\"\n\[\]]{1,200}\"|'[^'\n\[\]]{1,200}')"
    r"(?:[ \t]*,[ \t]*(?:\"[^\"\n\[\]]{1,200}\"|'[^'\n\[\]]{1,200}')){0,15}[ \t]*,?[ \t]*\]"
)


def _framed_as_no_answer(body: str, start: int, end: int) -> bool:
    line = body[max(body.rfind("\n", 0, start) + 1, start - 160) : start]
    # the clause before the list, across "e.g." but not across a sentence end ("Wait, that is wrong. ["b"]")
    clause = re.split(r"(?<!\b[eE]\.[gG])(?<!\b[iI]\.[eE])[.!?](?:[ \t]+|$)", line)[-1]
    if (
        _LIST_AS_EXAMPLE.search(_FORCED_CHOICE.sub("", clause))
        or _negation_reaches(clause, letter=True)
        or _REJECTING_LABEL.search(clause)
    ):
        return True
    return bool(_LIST_REJECTED_AFTER.match(body, end))


def _list_letters(inner: str, keys: Mapping[str, str]) -> list[str] | None:
    """The letters a list's elements name; None if any element names no option (not an answer list)."""
    elements = re.findall(r"\"([^\"\n]*)\"|'([^'\n]*)'", inner)
    letters = []
    for double, single in elements:
        letter = _resolve(double or single, keys)
        if letter is None:
            return None
        letters.append(letter)
    return letters


def _structured(body: str, valid: set[str] | None = None, keys: Mapping[str, str] | None = None) -> list[str] | None:
    """The answer in the requested format; None if there is none (raises _NoAnswer if it is unreadable).

    An ``answer`` field (the CoT format) is authoritative: its last usable occurrence wins, and no
    JSON list elsewhere overrides it (``{"answer": ["c"], "eliminated": ["a", "b"]}``). Without one,
    the last JSON list of quoted letters (the zero-shot format, ``["b"]``) wins, unless the words
    around it make it an example or a rejection; a bare bracketed letter (``[a]``, a citation or a
    footnote) counts only where no quoted list exists. An option's text counts wherever its letter
    does (``["pull on the legs to deliver"]``); the options restated in order are no answer.
    """
    keys = keys or {}
    if "List(" in body or "list(" in body:
        body = _TEMPLATE_ECHO.sub(lambda m: " " * len(m.group()), body)
    for match in reversed(_last(_ANSWER_FIELD.finditer(body))):
        # a later field of a JSON object: the words framing it are those before the object, not the
        # earlier fields' values ({"step_by_step_thinking": "like the template says", "answer": ["c"]})
        brace = body.rfind("{", max(0, match.start() - 4000), match.start())
        framed_at = brace if brace >= 0 and _PAIRS_BEFORE.fullmatch(body, brace + 1, match.start()) else match.start()
        if _framed_as_no_answer(body, framed_at, match.end()):
            continue  # the instruction's own example echoed ('e.g. {"answer": ["b"]} or {"answer": ["a", "c"]}')
        inner = match.group(1)
        if inner[:5].lower() == "list(":
            inner = "[" + inner[5:-1].strip().strip("[]") + "]"
        if inner.startswith("["):
            named = _list_letters(inner, keys) if keys and re.search(r"[\"'][^\"'\n]{2,}[\"']", inner) else None
            if named:
                return named
            letters = [m.lower() for m in re.findall(r"(?<![A-Za-z])([a-zA-Z])(?![A-Za-z])", inner)]
            if letters or not re.search(r"[A-Za-z]", inner):
                return letters
        else:
            letters = _Span(None).read(inner[1:-1], 0) or []
            whole = re.fullmatch(r"[ \t]*\(?([a-zA-Z])\)?[.]?[ \t]*", inner[1:-1])
            if whole:
                letters = [whole.group(1).lower()]
            if not letters and keys:
                named_one = _resolve(inner[1:-1], keys)
                letters = [named_one] if named_one else []
            if letters:
                return letters
    candidates = [(m.start(), m.end(), m.group(1) or "", False) for m in _last(_JSON_LIST.finditer(body))]
    if keys:
        candidates += [(m.start(), m.end(), m.group(0)[1:-1], True) for m in _last(_QUOTED_TEXT_LIST.finditer(body))]
    bare: list[str] | None = None
    for start, end, inner, texts in sorted(candidates, reverse=True):
        if texts:
            letters = _list_letters(inner, keys)
            if letters is None or re.fullmatch(r"[\"'][ \t]*\(?[A-Za-z]\)?\.?[ \t]*[\"']", inner.strip()):
                continue  # not a list of options, or a one-letter list the letter reader has
            if len(letters) >= 2 and letters == sorted(keys)[: len(letters)] and len(letters) == len(keys):
                continue  # every option, in prompt order: the prompt echoed
        else:
            letters = [m.lower() for m in re.findall(r"([a-zA-Z])", inner)]
        if _framed_as_no_answer(body, start, end):
            continue
        if texts or not inner.strip() or re.search(r"[\"'`]", inner):
            return letters  # quoted letters, an option's text, or an explicit empty list: the requested format
        if bare is None:
            bare = letters
    return bare


_APOSTROPHE = re.compile(r"['’`]")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


@functools.lru_cache(maxsize=4096)  # option texts are keyed again for every line and list that might restate them
def _key(text: str) -> str:
    """An option text for comparison: lowercase words and digits only ("Pharmacokinetics." -> "pharmacokinetics")."""
    return " ".join(_NOT_WORD.sub(" ", _APOSTROPHE.sub("", text.lower())).split())


def _option_lines(lines: list[str], valid: set[str], keys: Mapping[str, str]) -> list[tuple[str, str, str] | None]:
    """Per line: (letter, what follows the option's own text) where the line is an option line ("B. aspirin",
    "B – True", "2. aspirin" numbering the options, "aspirin" alone), else None. The text after the label is
    kept whole when it does not restate the option ("B. flat nose and face" on another option's text).
    The reply's last line, cut by the token budget inside an option line ("B", "C. resp"), restates that option."""
    order = sorted(valid)
    by_text = {text: letter for letter, text in reversed(list(keys.items())) if text}
    found: list[tuple[str, str, str] | None] = []
    last = max((number for number, line in enumerate(lines) if line.strip()), default=-1)
    for number, line in enumerate(lines):
        if number == last:
            cut = _CUT_OPTION_LINE.fullmatch(line)
            if (
                cut
                and cut.group(1).lower() in valid
                and keys.get(cut.group(1).lower(), "").startswith(_key(cut.group(2) or ""))
            ):
                found.append((cut.group(1).lower(), "\x00", ""))
                continue
        match = _OPTION_LINE.match(line)
        labelled = ""
        if match is None and _MAY_BE_LABELLED.match(line):
            # "Answer: A. narrow airways" opening a list that goes on "B. rounded cheeks": the label is
            # part of the restatement (the prompt ends in "Answer:"), so the line is option a's.
            # "The correct answer is A. ..." over the other options too, but only where they are all there.
            label = _LABEL_BEFORE_OPTION.match(line)
            if label and (label.group("colon") or label.group("verb")):
                match = _OPTION_LINE.match(line[label.end() :])
            if match and match.group(1).lower() == order[0]:  # only the first option opens such a list
                labelled = "colon" if label.group("colon") else "phrase"
                line = line[label.end() :]
            else:
                match = None
        letter, rest = None, ""
        if match:
            letter, rest = match.group(1).lower(), line[match.end() :]
        else:
            numbered = _NUMBERED_LINE.match(line)
            if numbered and 0 < int(numbered.group(1)) <= len(order):
                candidate = order[int(numbered.group(1)) - 1]
                if keys.get(candidate) and _key(line[numbered.end() :]).startswith(keys[candidate]):
                    letter, rest = candidate, line[numbered.end() :]
            elif line.strip():
                letter = by_text.get(_key(line))
                rest = line.strip() if letter else ""
        if letter is None:
            found.append(None)
            continue
        own = keys.get(letter, "")
        rest_key = _key(rest)
        if own and rest_key.startswith(own):
            # drop the option's own text, so a verdict is read from what follows it ("B. aspirin - correct")
            words = len(own.split())
            tail = re.match(rf"[^0-9A-Za-z]*(?:[0-9A-Za-z]+[^0-9A-Za-z]+){{{words}}}", rest + " ")
            found.append((letter, "\x00" + (rest[tail.end() :] if tail else ""), labelled))
        elif labelled:  # "Answer: A." after a list is that answer, not a restatement's first line
            found.append(None)
        else:
            found.append((letter, rest, labelled))
    return found


_BARE_LABELS = re.compile(r"[ \t>*-]{0,6}(?:\(?[A-Ha-h][.:)][ \t]*){2,8}")


def _restated_on_one_line(line: str, order: list[str], keys: Mapping[str, str]) -> bool:
    """ "A. red B. green C. black D. yellow": two or more options, from the first on, each with its own text;
    or the labels alone ("A: B: C:", a base model writing the form it was shown; "A. B. C. D." all of them)."""
    bare = _BARE_LABELS.fullmatch(line)
    if bare:
        found = [letter.lower() for letter in re.findall(r"[A-Ha-h]", line)]
        if found == order[: len(found)] and (len(found) == len(order) or ":" in line):
            return True
    labels = list(re.finditer(r"(?<![A-Za-z0-9])\(?([A-Ha-h])[.)][ \t]+", line))
    if len(labels) < 2 or line[: labels[0].start()].strip(" \t*>-"):
        return False
    for position, label in enumerate(labels):
        if position >= len(order) or label.group(1).lower() != order[position]:
            return False
        stop = labels[position + 1].start() if position + 1 < len(labels) else len(line)
        if _key(line[label.end() : stop]) != keys.get(order[position]):
            return False
    return True


def _mask_option_lists(
    body: str, valid: set[str], keys: Mapping[str, str] | None = None
) -> tuple[str, list[str] | None]:
    """Blank out option lists restated from the prompt; returns the text and, where such a list marks
    options correct/incorrect line by line, the letters marked correct.

    A restatement is no answer: consecutive option lines covering every option (any labels, numbered,
    or the texts alone), or the first options in prompt order each restating its own text ("A. narrow
    airways\nB. rounded cheeks", a small model echoing the prompt and stopping), or the options on one
    line. A partial list after a line that frames it as the answer ("The correct answers are:") stays."""
    keys = keys or {}
    order = sorted(valid)
    lines = body.split("\n")
    parsed = _option_lines(lines, valid, keys) if len(lines) < 20_000 else [None] * len(lines)
    runs: list[list[int]] = []
    current: list[int] = []
    for number, entry in enumerate(parsed):
        if entry is not None and not (current and (entry[0] == parsed[current[-1]][0] or entry[2])):
            current.append(number)
        elif entry is not None:  # the same letter again, or an answer label, starts a new list
            runs.append(current)
            current = [number]
        elif lines[number].strip() and current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    marked: list[str] | None = None
    for run in runs:
        letters = [parsed[number][0] for number in run]
        restating = all(parsed[number][1].startswith("\x00") or not parsed[number][1].strip(" \t*_") for number in run)
        if len(run) >= 2 and valid and valid <= set(letters):
            verdicts = []
            for number in run:
                found = list(_VERDICT.finditer(parsed[number][1]))
                # the verdict opens what follows the label ("B – True", "B. aspirin - correct"); "A. a true
                # statement is ..." is a sentence of the model's own list, no verdict
                if found and re.fullmatch(r"[\x00 \t*_:|()\-–—,.=>]*", parsed[number][1][: found[0].start()]):
                    verdicts.append((parsed[number][0], re.sub(r"[ \t]", "", found[-1].group(0).lower())))
                lines[number] = " " * len(lines[number])
            if len(verdicts) == len(run):
                positive = sorted({letter for letter, word in verdicts if word in _POSITIVE_VERDICTS})
                marked = positive or marked
        elif len(run) >= 2 and restating and letters == order[: len(letters)] and parsed[run[0]][2] != "phrase":
            before = next((lines[n] for n in range(run[0] - 1, -1, -1) if lines[n].strip()), "")
            if not _FRAMES_A_LIST.search(before):
                for number in run:
                    lines[number] = " " * len(lines[number])
    for number, line in enumerate(lines):
        if _restated_on_one_line(line, order, keys):
            lines[number] = " " * len(line)
    return "\n".join(lines), marked


# The prompt's own tail, echoed by a base model: the instruction line of the zero-shot and the CoT prompts
# (prompts.py; the loops test checks these against it) and the bare "Answer:" cue the zero-shot prompt ends with.
_INSTRUCTIONS = (LIST_INSTRUCTION, COT_INSTRUCTION)
_INSTRUCTION_KEYS = tuple(_key(text) for text in _INSTRUCTIONS)
# ... echoed whole, from its first sentence on, or from its second ("Reply with a JSON list ...")
_INSTRUCTION_STARTS = tuple(
    start for text in _INSTRUCTION_KEYS for start in (text, text[len("one or more options may be correct ") :])
)


def _echoes_instruction(line: str, cut: bool) -> bool:
    """Whether a line is the prompt's instruction line (or its second sentence) as the prompt words it; a
    line the budget cut (``cut``) may stop anywhere, another must run at least through the first sentence."""
    said = _key(line)
    if not said:
        return False
    return any(start.startswith(said) for start in _INSTRUCTION_STARTS) and (
        cut or len(said) >= len("one or more options may be correct")
    )


_ANSWER_CUE = re.compile(r"(?i)[ \t>*#_]{0,6}answer[ \t*_]{0,4}:[ \t*_]{0,4}")


def _mask_prompt_echo(body: str, valid: set[str], keys: Mapping[str, str]) -> str:
    """Blank out a restated prompt block: a base model repeating the options, the instruction line and
    "Answer:", then starting the block again until its token budget cuts it ("...\nAnswer:\nA. pulse\nB").

    Once the reply has echoed the prompt's tail (the instruction line, or the whole option list followed
    by "Answer:" or the instruction), an option list restarted from the first option (each line its own
    text or the bare label) is echo where it is the whole list, runs to the end of the reply, or runs into
    another echo; an "Answer:" cue over nothing but echo is the prompt's, not the model's. What is left
    (a letter the model wrote after a cue, "Answer:\nB") is read as usual."""
    if "\n" not in body or not valid:
        return body
    if len(body) > 2 * _FREE_TEXT_WINDOW:  # bounded work: only the opening and the closing window are read as prose
        head_end = body.find("\n", 4_000)
        tail_start = body.rfind("\n", 0, len(body) - _FREE_TEXT_WINDOW)
        if 0 <= head_end < tail_start:
            return (
                _mask_prompt_echo(body[:head_end], valid, keys)
                + body[head_end:tail_start]
                + _mask_prompt_echo(body[tail_start:], valid, keys)
            )
    lines = body.split("\n")
    if len(lines) >= 20_000:
        return body
    order = sorted(valid)
    parsed = _option_lines(lines, valid, keys)
    last = max((number for number, line in enumerate(lines) if line.strip()), default=-1)
    kinds: list[str] = []
    for number, line in enumerate(lines):
        said = _normal(line)
        entry = parsed[number]
        if not said:
            kinds.append("blank" if not line.strip() else "other")
        elif _echoes_instruction(line, cut=False):
            kinds.append("instruction")
        elif number == last and len(said) >= 3 and _echoes_instruction(line, cut=True):
            kinds.append("cut")  # the instruction line cut short: echo, but no evidence of echoing by itself
        elif _ANSWER_CUE.fullmatch(line):
            kinds.append("cue")
        elif (
            entry
            and not entry[2]
            and not entry[1].lstrip("\x00").strip(" \t*_")
            and (_OPTION_LINE.match(line) or _CUT_OPTION_LINE.fullmatch(line))
        ):  # lettered as the prompt letters them: a list the reply numbers itself is its own
            kinds.append("option " + entry[0])
        elif re.fullmatch(r"[ \t]{0,6}\(?[A-Ha-h]\)?[ \t]*", line):  # a label alone, its period dropped ("C")
            kinds.append("option " + line.strip(" \t()").lower())
        elif _OPTION_LINE.match(line):  # an option's label over other words ("B. blood presure")
            kinds.append("label " + _OPTION_LINE.match(line).group(1).lower())
        else:
            kinds.append("other")

    def next_kind(number: int) -> str:
        return next((kind for kind in kinds[number:] if kind != "blank"), "end")

    runs: list[tuple[int, int, bool, bool]] = []  # option lists from the first option, in prompt order
    number = 0
    while number < len(lines):
        if kinds[number] not in ("option " + order[0], "label " + order[0]):
            number += 1
            continue
        end, count = number, 0
        while (
            end < len(lines)
            and count < len(order)
            and kinds[end] in ("option " + order[count], "label " + order[count])
        ):
            end, count = end + 1, count + 1
        exact = all(kind.startswith("option") for kind in kinds[number:end])
        runs.append((number, end, count == len(order), exact))
        number = end
    echoing = "instruction" in kinds or any(
        whole and exact and next_kind(end) in ("cue", "instruction") for _, end, whole, exact in runs
    )
    if not echoing:
        return body
    masked = {number for number, kind in enumerate(kinds) if kind in ("instruction", "cut")}
    for start, end, whole, exact in runs:
        # two lines or more from the first option in prompt order, once the reply echoes, are the block again
        # (whole, or cut by the budget or by the next echo), also with a text miscopied ("B. blood presure");
        # a whole list over other words is the model's own (one verdict per option: "A - False\nB - True ...").
        # One exact line is echo only at the end or before the instruction: before a cue or another restart
        # it may be the model's pick ("A. pulse\nAnswer:\nA. pulse")
        if end - start >= 2:
            echo = exact or not whole
        else:
            echo = exact and (whole or next_kind(end) in ("end", "instruction", "cut"))
        if echo:
            masked.update(range(start, end))
    for number in range(len(lines) - 1, -1, -1):  # a cue over echo, another cue or the end answers nothing
        if kinds[number] == "cue":
            following = next((n for n in range(number + 1, len(lines)) if kinds[n] != "blank"), None)
            if following is None or following in masked or kinds[following] == "cue":
                masked.add(number)
    return "\n".join(" " * len(line) if number in masked else line for number, line in enumerate(lines))


def _sentence_before(text: str, pos: int) -> str:
    """The current sentence up to ``pos`` (at most 200 characters: bounded work per mention)."""
    low = max(0, pos - 200)
    start = max(
        text.rfind("\n", low, pos), text.rfind(". ", low, pos), text.rfind("? ", low, pos), text.rfind("! ", low, pos)
    )
    return text[max(start + 1, low) : pos]


def _sentence_around(text: str, pos: int) -> str:
    stop = _SENTENCE_END.search(text, pos, min(len(text), pos + 240))
    return _sentence_before(text, pos) + text[pos : stop.start() if stop else min(len(text), pos + 240)]


def _negation_reaches(before: str, letter: bool = False) -> bool:
    """Whether a negation in ``before`` (the sentence up to a mention) still governs the mention:
    one within 40 characters, with no clause break between the last negation and the mention.

    ``letter``: the mention is a letter, which may go on the negated list ("eliminate **A**, **B**"),
    rather than an answer phrase, which starts a clause of its own ("Rather than C, I'd choose A").
    """
    if not _NEGATION_BEFORE.search(before):
        return False
    last = None
    for last in _NEGATION_WORD.finditer(before, max(0, len(before) - 80)):
        pass
    if last is None:
        return True
    rest = before[last.end() :]
    if letter:
        rest = rest[_NEGATED_LIST.match(rest).end() :]
        if not rest.strip(" \t*_\"'“”()"):
            return True
    return not _CLAUSE_BREAK.search(rest)


def _negated(text: str, start: int, end: int) -> bool:
    """A letter mention negated by the words before it, or judged wrong by the words after it."""
    before = _sentence_before(text, start)
    if _negation_reaches(before, letter=True):
        return True
    after = text[end : end + 40]
    return bool(
        re.match(
            r"(?i)[ \t*)]*(?:is|are|seems|appears|would[ \t]+be)?[ \t]*(?:not\b|n't|incorrect|wrong|false"
            r"|inappropriate|unlikely|less|also[ \t]+(?:incorrect|wrong)|eliminated|ruled)",
            after,
        )
    )


def _free_text(
    body: str,
    valid: set[str],
    options: Mapping[str, str] | None,
    closing_letters: bool = True,
    question: str | None = None,
) -> list[str] | None:
    span = _Span(options)
    keys = {k: _key(v) for k, v in span.options.items()}
    head = body[:4_000] if len(body) > _FREE_TEXT_WINDOW else body
    opening = _mask_option_lists(head, valid, keys)[0].strip()[:400]
    first_line = opening.split("\n", 1)[0].strip()
    if len(body) > _FREE_TEXT_WINDOW:  # a reply's closing answer is near its end; bounded work on 1 MB
        body = body[-_FREE_TEXT_WINDOW:]
    numbering = _own_numbering(body, valid, keys)
    body, marked_correct = _mask_option_lists(body, valid, keys)
    tiers: dict[int, tuple[int, list[str]]] = {}

    def offer(tier: int, pos: int, letters: list[str] | None) -> None:
        if letters and (tier not in tiers or pos >= tiers[tier][0]):
            tiers[tier] = (pos, letters)

    for match in _last(_BOXED.finditer(body)):
        offer(5, match.start(), span.read(match.group(1), 0))
    for match in _last(_LABEL.finditer(body)):
        line_start = body.rfind("\n", 0, match.start()) + 1
        if _negation_reaches(body[line_start : match.start()]):
            continue
        letters = span.read(body, match.end()) or _numbered_pick(body, match.end(), numbering, keys)
        offer(4, match.start(), letters)
    for match in _last(_PHRASE.finditer(body)):
        phrase = match.group(0)
        qual = (match.group("qual") or "").lower()
        if qual in ("incorrect", "wrong", "false"):
            continue
        sentence = _sentence_around(body, match.start())
        if _negation_reaches(_sentence_before(body, match.start())) and not re.search(r"(?i)\bbut\b", sentence):
            continue
        if _WEAK_VERB.search(phrase) and _HYPOTHETICAL.search(_FORCED_CHOICE.sub("", sentence)):
            continue
        verb = (match.group("verb") or "").lower()
        letters = span.read(body, match.end())
        if verb in (":", "=", "is", "are") and re.match(
            r"(?i)[ \t*]*(?:not\b|n't)", body[match.end() : match.end() + 8]
        ):
            continue
        letters = letters or _numbered_pick(body, match.end(), numbering, keys)
        offer(3 if not re.search(r"(?i)could|might", phrase) else 1, match.start(), letters)
    for match in _last(_LETTER_FIRST.finditer(body)):
        # walk back over "Options B and C" / "C" / "**B**" to the start of the letter list
        head = body[max(0, match.start() - 80) : match.start()]
        found = re.search(
            r"(?:(?:options?|choices?|answers?)[ \t]+)?(?:\*\*|[\"“'(])?[a-hA-H](?:\*\*|[\"”')])?(?:[ \t]*\([^()\n]{1,40}\))?"
            r"(?:[ \t]*(?:,|and|&|,[ \t]*and)[ \t]*(?:\*\*|[\"“'(])?[a-hA-H](?:\*\*|[\"”')])?(?:[ \t]*\([^()\n]{1,40}\))?){0,6}"
            r"[ \t]*$",
            head,
            re.IGNORECASE,
        )
        start = match.start() - len(head) + found.start() if found else 0
        if not found or (start > 0 and re.match(r"[A-Za-z0-9'’]", body[start - 1])):
            # "Both aspirin and morphine are correct": the options named by their texts
            clause = re.split(r"[.!?](?:[ \t]|$)|[;:\n]", _sentence_before(body, match.start()))[-1]
            named = _texts_named(_normal(clause), span.options) if span.options and clause.strip() else None
            if named and not _negation_reaches(clause):
                offer(3, match.start() - len(clause), named)
            continue
        if _negation_reaches(_sentence_before(body, start), letter=True):
            continue
        letters = span.read(body, start, limit=found.end() - found.start() + 1)
        if letters and len(set(letters)) < len(letters):
            # "Between A and C, C is the better choice": a repeated letter starts a new list
            last = list(re.finditer(r"(?<![A-Za-z])[a-hA-H](?![A-Za-z])", found.group(0)))[-1]
            start = match.start() - len(head) + found.start() + last.start()
            letters = span.read(body, start, limit=found.end() - found.start() - last.start() + 1)
        if (
            letters
            and 3 in tiers
            and tiers[3][0] < start
            and set(letters) < set(tiers[3][1])
            and not re.search(r"(?i)\bthe\b", match.group(0))
            and not _REVISION.search(_sentence_around(body, start))
        ):
            # "The correct answers are A and C. - Option A (...) is correct because ...": one part explained,
            # not a revision (which says "only", "actually", or "C is the correct answer")
            continue
        offer(3, start, letters)
    for match in _last(_NOT_BUT.finditer(body)):
        if _HYPOTHETICAL.search(_sentence_before(body, match.start())):
            continue
        offer(3, match.start(), span.read(body, match.end()))
    for match in _last(_ELLIPTICAL.finditer(body)):
        offer(3, match.start("letters"), span.read(body, match.start("letters")))
    revised = _REVISED_AT_THE_CLOSE.search(body, max(0, len(body) - 120)) if closing_letters else None
    if revised and not _HYPOTHETICAL.search(_sentence_before(body, revised.start())):
        offer(4, revised.start("letters"), span.read(revised.group("letters"), 0))  # "B... wait, actually C"
    closing = _closing_letters(body) if closing_letters else None
    if closing:
        offer(-1, *closing)  # the weakest evidence: read only where nothing else is
    bold_letters: list[tuple[int, int, list[str]]] = []
    for match in _last(_BOLD.finditer(body)):
        content = match.group(1)
        if not re.match(
            r"[ \t]*(?:(?:options?|choices?)[ \t]+)?\(?[a-hA-H](?:[ \t]*$|[.):,]|[ \t]+(?:and\b|&))", content
        ):
            continue
        letters = span.read(content, 0)
        if not letters or _negated(body, match.start(), match.end()):
            continue
        rest = body[match.end() : match.end() + 3]
        line_start = body.rfind("\n", 0, match.start()) + 1
        if rest.startswith(":") and not body[line_start : match.start()].strip():
            continue  # "**A. Oxygen**: ..." heads a discussion of that option
        bold_letters.append((match.start(), match.end(), letters))
    if bold_letters and not valid <= {letter for _, _, letters in bold_letters for letter in letters}:
        group: list[str] = []
        group_start = bold_letters[0][0]
        previous_end = -1
        for start, end, letters in bold_letters:
            if previous_end >= 0 and re.fullmatch(
                r"(?i)[ \t]*(?:,|,?[ \t]*and|&|;|\+|as[ \t]+well[ \t]+as)[ \t]*", body[previous_end:start]
            ):
                group = group + letters
            else:
                if group:
                    offer(2, group_start, group)
                group, group_start = list(letters), start
            previous_end = end
        offer(2, group_start, group)
    for pos, cell in _last(_table_answers(body)):
        offer(4, pos, span.read(cell, 0))
    all_mentions = sorted(((m.start(), m.end(), letter) for letter, m in _option_text_mentions(body, span.options)))
    mentions = [
        (start, letter) for start, end, letter in all_mentions[-_LAST_MENTIONS:] if not _negated(body, start, end)
    ]
    if len({letter for _, letter in mentions}) == 1:
        offer(1, mentions[-1][0], [mentions[-1][1]])
    asserted = _asserted_option_text(body, span.options, question)
    if asserted:
        offer(1, *asserted)
    if len(first_line) <= 300:
        offer(0, 0, span._by_option_text(first_line))
    if len(first_line) <= 300:
        lead = re.match(
            # "e.g." opening a reply is no letter e
            r"[ \t*#>]{0,6}(?:(?:option|choice)[ \t]+)?(?![eE]\.[gG](?![A-Za-z0-9]))(?=\(?[a-hA-H](?:[ \t]*$|[.):,;/]|[ \t]+(?:and\b|&)"
            r"|[ \t]*[-–—]|[ \t]+\())",
            first_line,
            re.IGNORECASE,
        )
        if lead:
            letters = span.read(opening, lead.end())  # may go on over option lines: "A. x\nB. y"
            if letters and not _negated(first_line, 0, lead.end() + 1):
                offer(0, 0, letters)
    if marked_correct:
        offer(0, len(body), marked_correct)
    if not tiers:
        return None
    answer = sorted(set(tiers[max(tiers)][1]))
    if span.conflicted & set(answer):
        return None  # the same letter was also written with another option's text: unsure
    return answer


def _own_numbering(body: str, valid: set[str], keys: Mapping[str, str]) -> dict[str, str]:
    """Number -> letter where the reply lists the item's options itself as 1, 2, 3, ... (every option, in
    order, each with its own text), so that "The answer is 2" names the second; empty otherwise."""
    order = sorted(valid)
    if not keys or len(keys) != len(order) or not re.search(r"(?m)^[ \t>*]{0,6}1[.)]", body):
        return {}
    numbered: dict[str, str] = {}
    for line in body.split("\n"):
        found = _NUMBERED_LINE.match(line)
        if not found:
            continue
        number = int(found.group(1))
        if number == 1:
            numbered = {}  # a list starts again: only a complete one counts
        if (
            number == len(numbered) + 1
            and number <= len(order)
            and _key(line[found.end() :]) == keys[order[number - 1]]
        ):
            numbered[found.group(1)] = order[number - 1]
            if len(numbered) == len(order):
                return numbered
    return {}


# "The answer is 2", "Answer: option 3.": a number standing alone where a letter would
_NUMBER_PICK = re.compile(
    r"[ \t*_\"'(]{0,4}(?i:(?:option|choice|number|no\.?|#)[ \t]*)?([1-8])[ \t*_\"')]{0,4}(?:[.!]?[ \t]*(?:\n|$)|[.!,;][ \t])"
)


def _numbered_pick(body: str, pos: int, numbering: Mapping[str, str], keys: Mapping[str, str]) -> list[str] | None:
    found = _NUMBER_PICK.match(body, pos) if numbering else None
    if not found or found.group(1) not in numbering:
        return None
    letter = numbering[found.group(1)]
    line_end = body.find("\n", found.end())
    said = _key(body[found.end() : line_end if line_end >= 0 else len(body)])
    if any(said.startswith(text) for other, text in keys.items() if other != letter and text):
        return None  # "Answer: 2. 13%" where 13% is the third: the number says one option, the text another
    return [letter]


# Where an option's text is asserted as the answer: "The risk ... is elevated blood pressure.", "Diagnosis:
# myocarditis". The verb (or a short heading's colon) right before the text
# and the sentence ending after it (or going on "which ...", "because ..."); a hedge or negation before it
# in its sentence ("may be", "is not", "if"), or a question, is no answer.
# ("has" is left out: "The answer is: A small child has narrow airways" restates the question's premise)
_ASSERTING_VERB = re.compile(r"(?i)\b(?:is|are|was|were)[ \t]+|(?<=[A-Za-z])[ \t]*:[ \t]*")
_ASSERTED_TEXT_ENDS = re.compile(r"[.!?](?:\s|$)|\n|,[ \t]+(?:which|because|as|since|so)\b|$")
_HEDGE = re.compile(
    r"(?i)\b(?:may|might|could|would|should|possibly|perhaps|probably|maybe|unlikely|if|whether|unless|either"
    r"|not|n't|never|no|nor|neither|instead|rather|except|or|than)\b|n't\b|\?"
)
_TAKEN_BACK = re.compile(
    r"(?i)\b(?:not|never|unlikely|incorrect|wrong|false|ruled[ \t]+out|excluded|doubtful)\b|n't\b|\?"
)
_NEGATIVE_STEM = re.compile(r"(?i)\b(?:not|except|least|false|incorrect|never|contraindicated)\b|n't\b")
# words a sentence shares with any question: not evidence that it answers this one
_COMMON_WORDS = frozenset(
    re.findall(
        r"\w+",
        "what which when where who whom whose why how that this these those there their they with from into onto "
        "following does have been being should would could most best first patient patients",
    )
)


def _asserted_option_text(body: str, options: Mapping[str, str], question: str | None) -> tuple[int, list[str]] | None:
    """A sentence asserting exactly one option's text ("... is myocarditis."): what follows "is" to the end of
    the sentence names that option alone (``_texts_named``), and no other option's text appears anywhere in
    the reply (whole words: option "pain" is not in "painful"). Where the question is known, the sentence
    must be about what it asks (a content word of the question before the verb), and a question asking for
    the option that is NOT so has none: there "a sign of shock is tachycardia" states a fact, not the pick."""
    asked = set(_key(question or "").split()) - _COMMON_WORDS
    if not options or (question is not None and (_NEGATIVE_STEM.search(question) or not asked)):
        return None
    present: set[str] | None = None
    for verb in reversed(_last(_ASSERTING_VERB.finditer(body))):
        stop = _ASSERTED_TEXT_ENDS.search(body, verb.end(), min(len(body), verb.end() + 300))
        said = body[verb.end() : stop.start() if stop else verb.end()]
        if not said.strip() or (stop and stop.group(0).startswith("?")):
            continue
        named = _texts_named(_normal(re.sub(r"^(?i:an?|the)[ \t]+", "", said)), options)
        if not named or len(named) != 1:
            continue
        before = _sentence_before(body, verb.start())
        if verb.group(0).strip() == ":" and len(before.split()) > 3:
            continue  # a heading naming what the question asks ("Diagnosis: myocarditis"), not any label
        about = question is None or any(
            word in asked or word.rstrip("s") in asked for word in _key(before).split() if len(word) >= 4
        )
        # and what goes on after the text in its sentence does not take it back ("..., which is unlikely")
        going_on = _sentence_around(body, stop.start())[len(_sentence_before(body, stop.start())) :] if stop else ""
        if about and not _HEDGE.search(before) and not _TAKEN_BACK.search(going_on):
            present = _texts_in(body, options) if present is None else present
            if present == set(named):
                return verb.end(), named
    return None


def _texts_in(body: str, options: Mapping[str, str]) -> set[str]:
    """The options whose texts appear in the reply as whole words; a text inside a longer option's text
    ("systolic" in "systolic and diastolic") counts as the longer option only."""
    found: list[tuple[int, int, str]] = []
    for letter, text in options.items():
        words = _key(text).split()
        if words and words[0] in body.lower():
            pattern = r"(?<![A-Za-z0-9])" + r"[^A-Za-z0-9\n]{1,3}".join(map(re.escape, words[:16])) + r"(?![A-Za-z0-9])"
            found.extend((m.start(), m.end(), letter) for m in _last(re.finditer(pattern, body, re.IGNORECASE)))
    return {
        letter
        for start, end, letter in found
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in found)
    }


def _closing_letters(body: str) -> tuple[int, list[str]] | None:
    """A closing sentence that is a letter alone ("... Not B. C."), with its position."""
    text = body.rstrip()
    tail_start = max(0, len(text) - 200)
    match = _CLOSING_LETTERS.search(text, tail_start)
    if match is None or text.endswith("?"):
        return None
    before = text[: match.start()]
    if match.group("after") and not _REJECTED_LETTER.search(before):
        return None  # "Eliminated: A" or "Incorrect options: B" is no pick
    if _ABBREVIATION.search(before.rstrip()) or before.rstrip().endswith(":"):
        return None  # "A vs. C", and "Answer:" is read as a label
    if match.group(0).startswith("\n") and _CLOSING_LETTERS.fullmatch(before.rstrip().rsplit("\n", 1)[-1].strip()):
        return None  # a column of letter lines ("A\nB\nC") lists options, it picks none
    letters = [letter.lower() for letter in re.findall(r"[A-H]", match.group("letters"))]
    return match.start("letters"), letters


def _table_answers(body: str) -> Iterable[tuple[int, str]]:
    """Cells of a Markdown table's "Answer" column (``| Question | Answer |`` over ``| ... | C |``)."""
    column: int | None = None
    position = 0
    for line in body.split("\n"):
        stripped = line.strip()
        if not stripped.startswith("|"):
            column = None
        else:
            cells = [cell.strip() for cell in stripped.strip("|").split("|")]
            if column is None:
                column = next(
                    (
                        i
                        for i, cell in enumerate(cells)
                        if re.fullmatch(r"(?i)[*_ ]*(?:final[ \t]+|correct[ \t]+)?answers?[*_ ]*", cell)
                    ),
                    None,
                )
                if column is None:
                    column = -1
            elif column >= 0 and column < len(cells) and not re.fullmatch(r"[-: ]*", cells[column]):
                yield position, cells[column]
        position += len(line) + 1


def _option_text_mentions(body: str, options: Mapping[str, str]) -> Iterable[tuple[str, re.Match[str]]]:
    """An option's text followed by its own letter: "Brachial artery (B)", "**Signs and symptoms** (A)"."""
    lowered = body.lower()
    for letter, text in options.items():
        words = [re.escape(word) for word in text.split()][:12]
        if not words or f"{letter})" not in lowered or text.split()[0] not in lowered:
            continue  # cheap test first: most replies name no option this way
        pattern = re.compile(
            r"(?<![A-Za-z])"
            + r"[ \t]+".join(words)
            + r"[*_\"”’' \t]{0,6}\((?:option[ \t]+|choice[ \t]+)?"
            + letter
            + r"\)",
            re.IGNORECASE,
        )
        for match in pattern.finditer(body):
            yield letter, match


def extract_answer(
    text: str,
    valid_letters: Sequence[str],
    options: Mapping[str, str] | Sequence[str] | None = None,
    question: str | None = None,
) -> list[str] | None:
    """The sorted set of option letters a model output commits to; ``None`` if it gives no answer.

        ``valid_letters`` are the item's option letters; ``options`` optionally their texts (a mapping
        letter -> text, or texts in letter order), used to read "A) Oxygen and C) Aspirin" and an answer
        given as an option's text; ``question``, when known, tells a restated question from a base model's
    next item. Letters outside ``valid_letters`` are kept (wrong picks). An explicit
        empty JSON list is an answer (the empty set), distinct from ``None``. See the module docstring
        for the precedence of the rules.
    """
    found = _extract(text, valid_letters, options, question)
    return found if isinstance(found, list) else None


def commits_to_nothing(
    text: str,
    valid_letters: Sequence[str],
    options: Mapping[str, str] | Sequence[str] | None = None,
    question: str | None = None,
) -> str | None:
    """Why ``extract_answer`` (same arguments) reads no answer where it found that the reply commits to none
    (``RESTATES_PROMPT``, ``COUNTS_ALPHABET``, ``NAMES_ANSWERS_IN_TURN``, ``ANOTHER_ITEM``); ``None`` where it
    reads an answer or merely cannot read the reply. The opt-in model fallback asks a model only about the
    latter: about the former it could only guess (pick one of a loop's answers, or an echoed example)."""
    found = _extract(text, valid_letters, options, question)
    return found.reason if isinstance(found, _Nothing) else None


RESTATES_PROMPT = "it restates the prompt (its options, instruction or Answer: cue) and nothing more"
COUNTS_ALPHABET = "it runs through the option labels or the alphabet"
NAMES_ANSWERS_IN_TURN = "it names different answers in turn"
ANOTHER_ITEM = "it opens with another item's question"


@dataclass(frozen=True)
class _Nothing:
    """The reader's finding that a reply commits to no option (``reason``): ``extract_answer`` gives ``None``
    for it as for a reply it cannot read; ``commits_to_nothing`` tells the two apart."""

    reason: str


def _extract(
    text: str,
    valid_letters: Sequence[str],
    options: Mapping[str, str] | Sequence[str] | None,
    question: str | None,
) -> list[str] | _Nothing | None:
    if not isinstance(text, str) or not text:
        return None
    valid = {letter.lower() for letter in valid_letters}
    if options is not None and not isinstance(options, Mapping):
        options = dict(zip(sorted(valid), options))
    body = strip_reasoning(_fold(text))
    before_run = _before_alphabet_run(body, valid)
    found = _extract_from(before_run, valid, options, question)
    if found is None and len(before_run) < len(body) and _says_nothing(before_run):
        return _Nothing(COUNTS_ALPHABET)  # nothing but a cue before the run: "Answer: A: B: C: ... G:"
    return found


def _extract_from(
    body: str, valid: set[str], options: Mapping[str, str] | None, question: str | None
) -> list[str] | _Nothing | None:
    markers = list(_CONTINUATION.finditer(body, 0)) if "uestion" in body or "Q" in body else []
    markers = sorted(markers + _next_numbered_items(body, options), key=lambda m: m.start())
    if markers and not body[: markers[0].start()].strip():
        # The output opens with a question: this item restated, or (a base model) the next item.
        if question is not None and not _normal(body[markers[0].end() : markers[0].end() + 400]).startswith(
            _normal(question)[:40]
        ):
            return _Nothing(ANOTHER_ITEM)
        markers = markers[1:]
    if markers:
        found = _read(body[: markers[0].start()], valid, options, question=question)
        if isinstance(found, (list, _Nothing)) or markers[0].re is _NEXT_ITEM:
            # a numbered next item with its options ends the answer: nothing past it is read; nor past a question
            # after a reply that committed to nothing (an echo, then another item's own "Answer: [...]")
            return found
        # past a question the closing line may be the next item's answer ("Q: ...\nA."): not read
        whole = _read(body, valid, options, closing_letters=False, question=question)
        return found if whole is None else whole  # an echo, then another item: still nothing
    return _read(body, valid, options, question=question)


# A base model running on into the next numbered item: "12. A 45-year-old man ...?" over its own "A." and
# "B." lines. The options must differ from this item's (a reply may number its steps over this item's options).
_NEXT_ITEM = re.compile(
    r"(?:^|\n)[ \t>#*]{0,6}\d{1,4}[.)][ \t]+(?=[^\n]{8,300}[?:_][ \t*]*\n(?:[ \t]*\n)?"
    r"[ \t]*\(?[Aa][.)][ \t]*(?P<first>[^\n]{0,200})\n[ \t]*\(?[Bb][.)])"
)


def _next_numbered_items(body: str, options: Mapping[str, str] | None) -> list[re.Match[str]]:
    if "\n" not in body or not re.search(r"\n[ \t]*\(?[Aa][.)]", body):
        return []
    own = _key((options or {}).get("a", ""))
    return [m for m in _last(_NEXT_ITEM.finditer(body)) if not own or _key(m.group("first")) != own][:1]


def _before_alphabet_run(body: str, valid: set[str]) -> str:
    """The reply up to a run through the alphabet past the options (``["A"] ["B"] ... ["Z"]``, "A\nB\n...G",
    ``["a", ..., "j"]``): a model counting, not choosing, and what follows is no answer either."""
    match = _alphabet_run(len(valid) + RUN_PAST_OPTIONS).search(body)
    if match is None:
        return body
    line_start = body.rfind("\n", 0, match.start()) + 1
    return body[:line_start] if re.fullmatch(r"[\s\[\"']*", body[line_start : match.start()]) else body[: match.start()]


@functools.lru_cache(maxsize=16)
def _alphabet_run(length: int) -> re.Pattern[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"[: max(3, min(length, 26))]
    gap = r"[\s\[\]\"',.:)(]{1,8}"  # also bare labels through the alphabet: "A: B: C: ...", "A.\nB.\n..."
    return re.compile(gap.join(f"(?<![A-Za-z0-9])[{c}{c.upper()}](?![A-Za-z0-9])" for c in letters))


def _read(
    body: str,
    valid: set[str],
    options: Mapping[str, str] | None,
    closing_letters: bool = True,
    alone: bool = False,
    question: str | None = None,
) -> list[str] | _Nothing | None:
    keys = {letter: _key(text) for letter, text in (options or {}).items() if _key(text)}
    said, body = body, _mask_prompt_echo(body, valid, keys)
    try:
        structured = _structured(body, valid, keys)
    except _NoAnswer:
        return None
    answer = (
        sorted(set(structured))
        if structured is not None
        else _free_text(body, valid, options, closing_letters, question)
    )
    if answer is not None and not alone and _cycles(body, valid, options):
        return _Nothing(NAMES_ANSWERS_IN_TURN)
    if answer is None and not alone and _only_restates(said, body, valid, keys, question):
        return _Nothing(RESTATES_PROMPT)
    return answer


def _says_nothing(text: str) -> bool:
    """No words or numbers left once "Answer:" cues are taken out."""
    return not re.search(r"[A-Za-z0-9]", _ANSWER_CUE.sub("", text))


_QUESTION_LABEL = re.compile(r"(?i)[ \t>#*]{0,6}(?:(?:question|q)[ \t]{0,3}\d{0,4}[ \t]{0,3}[:.][ \t*]*)?")


def _cut_label(line: str) -> bool:
    """A line the budget cut inside "Answer:" (from "An") or "Question:" (from "Q")."""
    said = line.strip(" \t>*#_").lower()
    return bool(said) and (("answer".startswith(said) and len(said) >= 2) or "question".startswith(said))


def _only_restates(said: str, echo_masked: str, valid: set[str], keys: Mapping[str, str], question: str | None) -> bool:
    """Whether a reply read as no answer is the prompt restated and nothing more: each line masked as the
    prompt's echo, an option list restating the options with nothing after their texts ("A. pulse", "A."),
    the item's own question, or a bare "Answer:" cue. A list that goes on with the model's own words
    ("A. pulse - likely") is a reply the rules cannot read, not an echo."""
    if len(said) > 2 * _FREE_TEXT_WINDOW or not valid:
        return False  # bounded work: a reply this long is left to whoever reads what the rules cannot
    left = _mask_option_lists(echo_masked, valid, keys)[0]
    lines, echoed, kept = said.split("\n"), echo_masked.split("\n"), left.split("\n")
    if not len(lines) == len(echoed) == len(kept):
        return False
    parsed = _option_lines(lines, valid, keys)
    own_question = _normal(question or "")
    last = max((number for number, line in enumerate(lines) if line.strip()), default=-1)
    restated = False
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        if _ANSWER_CUE.fullmatch(line):
            restated = True  # the prompt's closing cue, over nothing (unmasked where no other echo came)
            continue
        if kept[number].strip() and _says_nothing(kept[number]):
            continue  # a cue the echo rule left over, or punctuation alone
        asked = _normal(line[_QUESTION_LABEL.match(line).end() :])
        if not asked:
            continue  # a bare "Question:" label
        if own_question and (asked == own_question or (number == last and own_question.startswith(asked))):
            restated = True  # this item's question restated (a block restarted from its top), or cut there
            continue
        if number == last and restated and (_echoes_instruction(line, cut=True) or _cut_label(line)):
            continue  # the instruction, the cue or the next block's label, cut by the budget ("...\nOne", "Ques")
        if kept[number].strip():
            return False  # the model's own words
        restated = True
        if echoed[number].strip() and not (
            _restated_on_one_line(line, sorted(valid), keys)
            or (parsed[number] is not None and not parsed[number][1].lstrip("\x00").strip(" \t*_.:"))
        ):
            return False  # an option list over the model's own words, which only the option-list rule masked
    return restated


# A statement's form with its letters taken out: 'The answer is "b".' and 'The answer is "a".' share one.
_STATEMENT_LETTER = re.compile(r"(?<![A-Za-z0-9'’])[A-Ha-h](?![A-Za-z0-9'’])")
_STATEMENT_END = re.compile(r"\n|(?<=[.!?])[ \t]+")
_LETTER_RUN = re.compile(r"\x01(?:[\"'`]?[ \t]*(?:,|&|\band\b|\bor\b)[ \t]*[\"'`]?\x01){1,7}")
_CUE_OVER_LINE = re.compile(r"(?im)^([ \t>*#_]{0,6}answer[ \t*_]{0,4}:)[ \t]*\n(?=[ \t]*\S)")
_STATEMENT_WORDS = re.compile(r"[A-Za-z]{3}|[\[{]")


def _form(statement: str) -> str:
    """A statement with its letters taken out, a list of them as one: '["b", "c"]' and '["a"]' share a form."""
    return _LETTER_RUN.sub("\x01", _STATEMENT_LETTER.sub("\x01", statement))


def _cycles(body: str, valid: set[str], options: Mapping[str, str] | None) -> bool:
    """Whether the reply's last answer is one of a statement repeated with different letters ('The answer
    is "b".\nThe answer is "a".\nThe answer is "c".', a model looping to its budget): it names different
    answers in turn and commits to none. The same answer repeated is one answer; a revision ("Wait, that is
    wrong. ["b"]") or an answer stated another way after the loop ("So the final answer is B") is read as usual.
    Letters alone on their lines loop only in a row that comes back to a letter ("B\nC\nB"): "The correct
    answers are:\nA.\nB.\nC." lists three, and "A.\nAspirin is given first.\nC." names two, not a loop."""
    text = _CUE_OVER_LINE.sub(r"\1 ", body[-_FREE_TEXT_WINDOW:])  # "Answer:\nC" is one statement
    statements = [part.strip() for part in _STATEMENT_END.split(text)[-400:] if part.strip()]
    if len({_form(statement) for statement in statements}) == len(statements):
        return False  # no statement repeated: the common case, decided without reading
    keys = {letter: _key(option) for letter, option in (options or {}).items() if _key(option)}
    text = _mask_option_lists(text, valid, keys)[0]  # an option list marked line by line is no loop
    statements = [part.strip() for part in _STATEMENT_END.split(text)[-400:] if part.strip()]
    forms = [_form(statement) for statement in statements]
    for last in range(len(statements) - 1, max(-1, len(statements) - 51), -1):  # the last statement that answers
        form = forms[last]
        bare = "\x01" in form and not _STATEMENT_WORDS.search(form)
        if "\x01" not in form or not isinstance(_read(statements[last], valid, options, alone=True), list):
            continue
        said = [tuple(_STATEMENT_LETTER.findall(statements[last].lower()))]
        gap = 0
        for number in range(last - 1, -1, -1):  # back through the loop: the same form, a few statements apart
            if forms[number] == form:
                said.append(tuple(_STATEMENT_LETTER.findall(statements[number].lower())))
                gap = 0
            elif bare or _REVISION.search(statements[number]) or _NEGATION_WORD.search(statements[number]) or gap == 3:
                break
            else:
                gap += 1
        # letters alone must come back to one already said ("B\nC\nB"): "A.\nB.\nC." under a frame lists answers
        return len(set(said)) > 1 and (not bare or len(set(said)) < len(said))
    return False


def is_invalid_letter_answer(predicted: Sequence[str] | None, valid_letters: Iterable[str]) -> bool:
    """An answer made only of letters that are not options (``["e"]`` on a four-option item)."""
    valid = set(valid_letters)
    return bool(predicted) and not (set(predicted) & valid)
