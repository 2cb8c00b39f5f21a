"""Answer extraction for EMSQA: real-looking model outputs in, the letter set (or None) out."""

import pytest

from medeval_metrics.emsqa import ExtractAnswerFilter, extract_answer, strip_reasoning

FOUR = ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "output, expected",
    [
        # The requested format: a JSON list of lowercase letters.
        ('["b"]', ["b"]),
        ('["a", "c"]', ["a", "c"]),
        ("['C', 'A']", ["a", "c"]),
        ("[a, d]", ["a", "d"]),
        ('```json\n["b"]\n```', ["b"]),
        ('Answer: ["d"]', ["d"]),
        # A JSON object with an answer field (the CoT format).
        ('{"answer": ["a", "d"]}', ["a", "d"]),
        ('{"answer": "c"}', ["c"]),
        ('Reasoning: shock lowers perfusion.\n{"answer": ["a","b","d"]}', ["a", "b", "d"]),
        # the authors' CoT object: the answer field's list wins over letters named in the reasoning field,
        # and over a later list of rejected options
        ('{"step_by_step_thinking": "A and D are wrong", "answer": ["b", "c"]}', ["b", "c"]),
        ('{"answer": ["b"], "rejected": ["a"]}', ["b"]),
        # Phrases.
        ("The answer is (B).", ["b"]),
        ("The correct answer is option C.", ["c"]),
        ("The correct options are A and C.", ["a", "c"]),
        ("The Answer Is A AND C", ["a", "c"]),
        ("The answer is A, C, and D.", ["a", "c", "d"]),
        ("Answer: B, D", ["b", "d"]),
        ("answers: a & c", ["a", "c"]),
        ("answer: (a) and (c)", ["a", "c"]),
        ("the answer is a.", ["a"]),
        # Bold and boxed letters.
        ("**B**", ["b"]),
        ("I pick **(D)** here", ["d"]),
        ("The final answer is $\\boxed{A}$", ["a"]),
        ("\\boxed{A, C}", ["a", "c"]),
        # Bare replies.
        ("B", ["b"]),
        ("B.", ["b"]),
        ("(c)", ["c"]),
        ("A and C", ["a", "c"]),
        ("b. oxygen therapy", ["b"]),
        ("**A. Oxygen**", ["a"]),
        # Reasoning blocks are ignored; an unclosed block hides everything after it.
        ("<think>The answer is A</think> The answer is C", ["c"]),
        ('<think>maybe ["a"]... no, ["b"]</think>', None),
        ("<think>still thinking, the answer is A", None),
        ('reasoning the template opened</think>\n["d"]', ["d"]),
        # The last answer wins over earlier drafts.
        ('first I think ["a"] but actually ["b"]', ["b"]),
        ("Option B is wrong. The best answer is D", ["d"]),
        ('The answer is A.\nWait, re-reading: {"answer": ["c"]}', ["c"]),
        # Letters outside the item's range are kept as wrong picks (the authors' benchmark_LLM.py
        # compares the parsed list with the gold set as it is); the last JSON list wins.
        ('["e"]', ["e"]),
        ('["a", "f"]', ["a", "f"]),
        ('["b"] and later ["z"]', ["z"]),
        # An explicit empty list is an (empty) answer, not "unparseable".
        ("[]", []),
        ('{"answer": []}', []),
        # No answer at all.
        ("I am not sure", None),
        ("The answer is a fracture of the femur", None),
        ("A patient who is choking needs help", None),
        ("", None),
        ("   ", None),
    ],
)
def test_extract_answer(output, expected):
    assert extract_answer(output, FOUR) == expected


@pytest.mark.parametrize(
    "output, answer_format, expected",
    [
        # the rows above, read strictly (strict-match): only the requested format, the rest is no answer
        ('["a", "c"]', "list", ["a", "c"]),
        ("['C', 'A']", "list", None),  # not JSON
        ("[a, d]", "list", None),
        ('```json\n["b"]\n```', "list", ["b"]),
        ('Answer: ["d"]', "list", None),  # prose before the list
        ('{"answer": ["a", "d"]}', "object", ["a", "d"]),
        ('{"answer": "c"}', "object", ["c"]),
        ('Reasoning: shock lowers perfusion.\n{"answer": ["a","b","d"]}', "object", ["a", "b", "d"]),
        # the authors' CoT object reads the same strictly: the answer field, never the reasoning or rejected list
        ('{"step_by_step_thinking": "A and D are wrong", "answer": ["b", "c"]}', "object", ["b", "c"]),
        ('{"answer": ["b"], "rejected": ["a"]}', "object", ["b"]),
        ('The answer is A.\nWait, re-reading: {"answer": ["c"]}', "object", None),  # not on its own line
        ("The answer is (B).", "list", None),
    ],
)
def test_the_strict_reading_of_the_same_rows(output, answer_format, expected):
    from medeval_metrics.emsqa.strict import read_strict

    assert read_strict(output, answer_format, FOUR) == expected


def test_range_depends_on_the_item():
    assert extract_answer('["e"]', ["a", "b", "c", "d", "e"]) == ["e"]
    assert extract_answer("F", ["a", "b", "c", "d", "e", "f"]) == ["f"]
    # A letter past the options is still the model's (wrong) pick, not "no answer".
    assert extract_answer("C", ["a", "b"]) == ["c"]


def test_non_string_output_is_unparseable():
    assert extract_answer(None, FOUR) is None  # type: ignore[arg-type]


def test_strip_reasoning_keeps_text_outside_blocks():
    assert strip_reasoning("x <think>y</think> z").split() == ["x", "z"]


def test_filter_maps_every_response_of_every_doc():
    docs = [{"letters": FOUR}, {"letters": ["a", "b"]}]
    resps = [['["a"]', "no idea"], ["C"]]
    assert ExtractAnswerFilter().apply(resps, docs) == [[["a"], None], [["c"]]]


@pytest.mark.parametrize(
    "output, expected",
    [
        # A negation governs its own clause: the pick after it counts ...
        ("Excluding A and B, the answer is C.", ["c"]),
        ("It's not A but rather C.", ["c"]),
        ("Not A or B, but C.", ["c"]),
        ("Option B is incorrect; options C and D are.", ["c", "d"]),
        ("Rule out **A**, **B**, and **D**. The answer is **C**.", ["c"]),
        # ... but letters that go on the negated list stay negated
        ("We can eliminate **A**, **B** and **D**.", None),
        ("Not **A**, **B** or **D**.", None),
        ("B is wrong, C is not.", None),
        ("Not B. Not C.", None),
        ("If the patient were a child, the answer would be not C but B.", None),
        # A closing letter alone is read only where nothing else answers ...
        ("Aspirin first.\nB.", ["b"]),
        ("A.\nAspirin is given first.\nC.", ["a"]),  # the opening letter line is stronger evidence
        ("Answer: B\nNot A. C.", ["b"]),
        # ... and never after a label naming rejects, in a column of letters, a question or a comparison
        ("Eliminated: A.", None),
        ("Incorrect options: A, B.", None),
        ("The options are:\nA\nB\nC", None),
        ("Which is right, A or C?", None),
        ("Compare A vs. C", None),
        # a base model's next item: its closing letter is that item's answer, not this one's
        ("Aspirin is indicated.\n\nQ: what is the adult dose?\nA.", None),
        ("I think B.", None),  # a tentative pick without an answer phrase stays unread (corpus format-ignoring-388)
    ],
)
def test_negation_scope_and_closing_letters(output, expected):
    assert extract_answer(output, FOUR) == expected


@pytest.mark.parametrize(
    "output, options, expected",
    [
        # Two-option items (the public set has 19 true/false and 1 yes/no item): a reply that begins
        # with an option's word is that option only when it states it ...
        ("No.", ["Yes", "No"], ["b"]),
        ("No", ["Yes", "No"], ["b"]),
        ("Answer: No", ["Yes", "No"], ["b"]),
        ("The answer is no.", ["Yes", "No"], ["b"]),
        ("True.", ["True", "False"], ["a"]),
        ("False", ["True", "False"], ["b"]),
        ("Yes it is.", ["Yes", "No"], ["a"]),
        ("Yes, because the airway is patent.", ["Yes", "No"], ["a"]),
        ("Yes; first line.", ["Yes", "No"], ["a"]),
        ("True statement.", ["True", "False"], ["a"]),
        ("False: the statement is wrong.", ["True", "False"], ["b"]),
        # ... not when the word starts another phrase or the reply is unsure (a user review found item 419 scored right from "no idea")
        ("no idea", ["Yes", "No"], None),
        ("No problem! Let me think.", ["Yes", "No"], None),
        ("No answer.", ["Yes", "No"], None),
        ("yes or no?", ["Yes", "No"], None),
        ("true or false?", ["True", "False"], None),
        ("Sign up for the course first.", ["Sign", "Symptom"], None),
        ("No, I don't know.", ["Yes", "No"], None),
        ("Nothing is certain.", ["Yes", "No"], None),
    ],
)
def test_a_two_option_reply_that_only_begins_with_an_options_word(output, options, expected):
    assert extract_answer(output, ["a", "b"], options, "Is it?") == expected


MASK = ["narrow airways", "rounded cheeks", "smaller head", "flat nose and face"]
DRUGS = ["ibuprofen", "aspirin", "acetaminophen", "morphine"]
BURNS = [
    "full-thickness burns involving 5% to 15% of body surface area (bsa)",
    "full-thickness burns involving 2% to 10% of bsa (excluding hands, feet, face, genitalia, and upper airway)",
    "partial-thickness burns covering 15% to 30% of bsa",
    "superficial burns covering more than 50% of bsa",
]


@pytest.mark.parametrize(
    "output, options, expected",
    [
        # A restatement of the options singles none out (issue 20: 61 of 120 real SmolLM2 outputs) ...
        ("A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face", MASK, None),
        ("A. narrow airways\nB. rounded cheeks", MASK, None),
        ("1. narrow airways\n2. rounded cheeks\n3. smaller head\n4. flat nose and face", MASK, None),
        ("narrow airways\nrounded cheeks\nsmaller head\nflat nose and face", MASK, None),
        ("A. narrow airways B. rounded cheeks C. smaller head D. flat nose and face", MASK, None),
        # ... also where the first option line carries an answer label (the prompt ends in "Answer:")
        ("Answer: A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face", MASK, None),
        (
            "A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face\n\nAnswer: A. narrow airways\n"
            "B. rounded cheeks",
            MASK,
            None,
        ),
        ("Answer: A. narrow airways\nC. smaller head", MASK, ["a", "c"]),
        (
            "The correct answer is A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face",
            MASK,
            None,
        ),
        ("The correct answers are A. narrow airways\nB. rounded cheeks", MASK, ["a", "b"]),
        ("A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face\nAnswer: A.", MASK, ["a"]),
        # ... while a partial list framed as the answer, a list not from the first option, or a pick after it is read
        ("The correct answers are:\nA. narrow airways\nB. rounded cheeks", MASK, ["a", "b"]),
        ("B. rounded cheeks\nD. flat nose and face", MASK, ["b", "d"]),
        (
            "A. narrow airways\nB. rounded cheeks\nC. smaller head\nD. flat nose and face\n\nThe answer is D.",
            MASK,
            ["d"],
        ),
        (
            "1. Consider the options:\nA. narrow airways\nB. rounded cheeks\n2. A child's face is flat.\nThe answer is D.",
            MASK,
            ["d"],
        ),
        # A letter with another option's text is a conflict; with its own text, or a sentence about another, it is read
        ("C. aspirin", DRUGS, None),
        ('["a. aspirin"]', DRUGS, None),
        ("B. aspirin", DRUGS, ["b"]),
        # ... and so is one whose text is no option's but more like another's (SmolLM2, zero_shot-chat-000)
        ("A. full-thickness burns covering 15% to 30% of bsa", BURNS, None),
        ('["a. full-thickness burns covering 15% to 30% of bsa"]', BURNS, None),
        ("A. full-thickness burns, 5 to 15% of bsa", BURNS, ["a"]),
        ("The answer is B. Morphine (D) is not first line.", DRUGS, ["b"]),
        # An option's text counts where a letter does, exact after normalisation; a fragment of several does not
        ('["Aspirin."]', DRUGS, ["b"]),
        ('{"answer": ["aspirin", "morphine"]}', DRUGS, ["b", "d"]),
        ('["aspir"]', DRUGS, None),
        ("The correct answers are aspirin and morphine.", DRUGS, ["b", "d"]),
        ("The answer is aspirin or morphine.", DRUGS, None),
        # A later list that is an example or a rejection does not override the answer; a revision does
        ('["b"]\nFor example, ["a", "c"] would mean two answers.', DRUGS, ["b"]),
        ('["b"]\nNot ["d"].', DRUGS, ["b"]),
        ('["a"]\nOn second thought: ["b"]', DRUGS, ["b"]),
        # A run through the alphabet ends the answer
        ('["d"]\n["a"] ["b"] ["c"] ["d"] ["e"] ["f"] ["g"]', DRUGS, ["d"]),
        ("A, B, C, D, E, F, G, H", DRUGS, None),
        # Folding: curly and full-width forms, Chinese and Spanish answer phrases
        ("［“b”］", DRUGS, ["b"]),
        ("答案是B和D", DRUGS, ["b", "d"]),
        ("La respuesta correcta es B y D.", DRUGS, ["b", "d"]),
        ("You should choose option B.", DRUGS, ["b"]),
    ],
)
def test_issue_20_principles(output, options, expected):
    assert extract_answer(output, FOUR, options, "what is given?") == expected


FIVE = ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    "output, expected",
    [
        # "e.g." opening a reply is no letter e (it was read as E), in either case
        ("e.g. the airway comes first", None),
        ("E.G. airway first", None),
        ("e.g, the airway comes first", None),
        ("E.g: airway", None),
        ("E.g", None),
        ("E.Glucagon", ["e"]),  # the letter, then the option's word run on
        # a list right after "e.g." is an example of the format, whatever the case of "E.g."
        ('e.g. {"answer": ["b"]}', None),
        ('E.g. {"answer": ["b"]}', None),
        ('E.g., ["b", "c"]', None),
        ('e.g. ["a"] is the format. My answer: ["c"]', ["c"]),
        ("e.g. ems\nThe answer is D.", ["d"]),
        # the letter e itself still reads
        ("E. Epinephrine", ["e"]),
        ("e.", ["e"]),
        ("E", ["e"]),
        ("e, because epinephrine", ["e"]),
        ("i.e. the answer is E.", ["e"]),
    ],
)
def test_e_g_is_an_abbreviation_not_the_letter_e(output, expected):
    assert extract_answer(output, FIVE) == expected
