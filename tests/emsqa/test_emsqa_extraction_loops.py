"""The flexible EMSQA reader on what base and looping models write (issue 31): real-looking output in, the
letters a careful grader takes (or None) out, every expected value worked out by hand.

- A restated prompt block (the options, the instruction line, ``Answer:``) started again until the token
  budget cuts it commits to nothing, however often it restarts and wherever the cut falls; an answer the
  model wrote between the echoes is still read.
- A reply that names different answers in turn commits to nothing; the same answer repeated is one answer,
  and a single revision ("Wait, that is wrong") is read as before.
- Exactly one option's text asserted as the answer in a sentence is that option; never when another
  option's text appears too, when the text is part of a longer word, or when the sentence hedges or negates.
- A number is an option only where the reply numbered the item's own options 1-4 itself.

When unsure, no answer beats a guess: a silent change of answer (a labelled row read as another answer) is
the worst failure, counted over every labelled corpus in tests/emsqa/data (run with ``-s`` to see the count).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.emsqa import doc_to_text, doc_to_text_cot, extract_answer, normalise_record
from medeval_metrics.emsqa.extract import _INSTRUCTIONS

FOUR = ["a", "b", "c", "d"]
VITALS = ["pulse", "blood pressure", "pupil size", "skin temperature"]
QUESTION = "which vital sign is checked first in an unresponsive adult?"
# the lines the zero-shot and CoT prompts end with (checked against prompts.py below)
INSTRUCTION = (
    "One or more options may be correct. Reply with a JSON list of the lowercase letters of all correct options,"
    ' e.g. ["b"] or ["a", "c"].'
)
COT_INSTRUCTION = (
    "One or more options may be correct. Think step by step, then finish with the final answer as a JSON object"
    ' on its own line, e.g. {"answer": ["b"]} or {"answer": ["a", "c"]}.'
)
OPTIONS_BLOCK = "A. pulse\nB. blood pressure\nC. pupil size\nD. skin temperature"
BLOCK = f"{OPTIONS_BLOCK}\n{INSTRUCTION}\nAnswer:"  # what a base model repeats after the prompt's "Answer:"
BARE = "A.\nB.\nC.\nD.\nAnswer:"  # the block with the option texts left out


def read(output: str, options: list[str] = VITALS, question: str = QUESTION) -> list[str] | None:
    return extract_answer(output, FOUR, options, question)


def test_the_echoed_lines_are_the_prompts_own():
    doc = normalise_record(
        {"question": QUESTION, "choices": [f"{x}. {t}" for x, t in zip("abcd", VITALS)], "answer": "a"}, 1, "t"
    )
    assert doc_to_text(doc).endswith(f"{OPTIONS_BLOCK}\n{INSTRUCTION}\nAnswer:")
    assert doc_to_text_cot(doc).endswith(f"{OPTIONS_BLOCK}\n{COT_INSTRUCTION}\n")
    assert _INSTRUCTIONS == (INSTRUCTION, COT_INSTRUCTION)  # the lines the reader knows as the prompt's echo


@pytest.mark.parametrize(
    "output, expected",
    [
        # the model's own sentence that begins like the instruction is no echo: its list stays its answer
        ("One or more options may be correct. The correct answers are:\nA. pulse\nB. blood pressure", ["a", "b"]),
        ("One or more options may be correct. The answer is B.", ["b"]),
    ],
)
def test_only_the_prompts_own_instruction_line_is_echo(output, expected):
    assert read(output) == expected


@pytest.mark.parametrize(
    "output",
    [
        # the case: the block, then its restart cut after the first option
        f" {BLOCK}\nA. pulse\nB",
        # cut anywhere in the restart: at the label, inside a text, between lines, inside the instruction
        f" {BLOCK}\nA",
        f" {BLOCK}\nA.",
        f" {BLOCK}\nA. pu",
        f" {BLOCK}\nA. pulse",
        f" {BLOCK}\nA. pulse\nB. blood pressure\nC. pupil",
        f" {BLOCK}\n{OPTIONS_BLOCK}\nOne or more opt",
        f" {BLOCK}\n{OPTIONS_BLOCK}\nAnswer",
        # however often it restarts
        f" {BLOCK}\n{BLOCK}\n{BLOCK}\nA. pulse\nB. blo",
        # the block with bare labels, repeated ("A.\nB.\nC.\nD.\nAnswer:" was read as a)
        f"\n{BARE}\n{BARE}\nA.",
        f"\n{BARE}\n{BARE}\nA.\nB",
        # the labels through the alphabet on one line, and only the item's four ("A: B: C: ..." was read as a)
        " A: B: C: D: E: F: G: H: I: J: K: L: M:",
        " A: B: C: D:",
        "A: B: C:",
        # bare labels without their period, or with a parenthesis; the instruction's second sentence alone
        " A\nB\nC\nD\nAnswer:\nA\nB\nC\nD\nAnswer:\nA\nB",
        " A)\nB)\nC)\nD)\nAnswer:\nA)\nB)\nC",
        f" {OPTIONS_BLOCK}\nReply with a JSON list of the lowercase letters\nAnswer:\nA. pulse\nB",
        # the CoT prompt's block: options and instruction, again and again
        f"\n{OPTIONS_BLOCK}\n{COT_INSTRUCTION}\n{OPTIONS_BLOCK}\n{COT_INSTRUCTION}\nA. pulse\nB. blood",
        # the restart with a text miscopied, bulleted, lowercase; the question echoed too; the options and
        # "Answer:" alone looping (Gemma-3-270M writes these)
        f" {OPTIONS_BLOCK}\n{INSTRUCTION}\nAnswer:\nA. pulse\nB. blood presure\nC. pupil",
        f" {BLOCK}\n- A. pulse\n- B",
        " " + BLOCK.replace("A. ", "a. ").replace("B. ", "b. ") + "\na. pulse\nb",
        f"\nQuestion: {QUESTION}\n{BLOCK}\nQuestion: {QUESTION}\n{OPTIONS_BLOCK}\nAns",
        f"\n{OPTIONS_BLOCK}\nAnswer:\n{OPTIONS_BLOCK}\nAnswer:\nA. pulse\nB. blood pressure\nC. pupil size\nD. skin",
        # "Option A\nAnswer: Option B\nAnswer: Option C ..." through the alphabet (Gemma-3-270M; was read as h)
        " Option A\nAnswer: Option B\nAnswer: Option C\nAnswer: Option D\nAnswer: Option E\nAnswer: Option F"
        "\nAnswer: Option G\nAnswer: Option H\nAnswer: Option I\nAnswer: Option II\n",
        # a restated option list cut short, with no instruction (a small model echoing and stopping)
        "A. pulse\nB. blood pressure\nC. pup",
        "A. pulse\nB",
        "Answer: A. pulse\nB",
    ],
)
def test_a_restated_prompt_block_commits_to_nothing(output):
    assert read(output) is None


@pytest.mark.parametrize("restarts", [1, 2, 5])
@pytest.mark.parametrize("block", [BLOCK, BARE, f"{OPTIONS_BLOCK}\n{COT_INSTRUCTION}"], ids=["full", "bare", "cot"])
def test_the_echo_commits_to_nothing_wherever_the_budget_cuts_it(block, restarts):
    echo = f"{block}\n"
    misread = {}
    for cut in range(len(echo) + 1):
        output = " " + echo * restarts + echo[:cut]
        got = read(output)
        if got is not None:
            misread[repr(echo[:cut][-20:])] = got
    assert misread == {}


NEXT_ITEM = "Question: what is the normal adult respiratory rate?\nA. 12-20 breaths/min\nB. 30-40 breaths/min\nAnswer: "


@pytest.mark.parametrize(
    "output, expected",
    [
        # an echo, then an item of the model's own with its own answer: that answer is the other item's
        (f' {BLOCK}\n{NEXT_ITEM}["a"]', None),
        (f" {OPTIONS_BLOCK}\nAnswer:\n{NEXT_ITEM}A", None),
        (f' {BARE}\n{NEXT_ITEM}["b"]', None),
        # an answer before the next item is this item's, and stays
        (f' ["c"]\n{NEXT_ITEM}["a"]', ["c"]),
        (f" The answer is C.\n{NEXT_ITEM}A", ["c"]),
    ],
)
def test_after_an_echo_another_items_answer_is_not_this_ones(output, expected):
    assert read(output) == expected


@pytest.mark.parametrize(
    "output, expected",
    [
        # an answer written after the cue, then the echo: the answer stands
        (f" B\n{BLOCK}\nA. pulse\nB", ["b"]),
        (f" B. blood pressure\n\n{BLOCK}\nA. pu", ["b"]),
        (f' ["b"]\n{BLOCK}\nA. pulse\nB', ["b"]),
        (f"\n{BLOCK}\nB\n{BLOCK}\nA. pulse\nB", ["b"]),
        (f"\n{BLOCK} B\n{BLOCK}\nA. pulse", ["b"]),
        (f"\n{BLOCK} D. skin temperature\n{BLOCK}\nA", ["d"]),
        # the same answer after every restart is one answer ...
        (f"\n{BLOCK} D\n{BLOCK} D\n{BLOCK} D\n{BLOCK}\nA. pul", ["d"]),
        # ... also an option's line under each cue, not cut (one line is a pick, not a restart) ...
        (f"\n{OPTIONS_BLOCK}\nAnswer:\nA. pulse\nAnswer:\nA. pulse\nAnswer:", ["a"]),
        # ... different answers in turn are none
        (f"\n{BLOCK} B\n{BLOCK} C\n{BLOCK} A\n{BLOCK}\nA. pul", None),
        # the prompt's question and options restated with an answer, twice over: that answer
        (
            f"Question: {QUESTION}\n{OPTIONS_BLOCK}\nAnswer: B\n\nQuestion: {QUESTION}\n{OPTIONS_BLOCK}\nAnswer: B",
            ["b"],
        ),
        (f"\n{OPTIONS_BLOCK}\nAnswer: B\n{OPTIONS_BLOCK}\nAnswer: B\nA. pulse\nB", ["b"]),
        # the CoT block echoed, then the requested object
        (f'\n{OPTIONS_BLOCK}\n{COT_INSTRUCTION}\n{{"answer": ["a"]}}', ["a"]),
        # an option list once, then a pick: read as before (the options restated, then "Answer: A.")
        (f"{OPTIONS_BLOCK}\nAnswer: A.", ["a"]),
        (f"{OPTIONS_BLOCK}\n\nThe answer is D.", ["d"]),
        # a partial list the reply frames as its answer is still that answer
        ("The correct answers are:\nA. pulse\nB. blood pressure", ["a", "b"]),
        ("B. blood pressure\nD. skin temperature", ["b", "d"]),
        # a reply opening with a question of its own, its options true/false sentences (Gemma-3-270M CoT; was
        # read as a, c from the words "true" and "false"), against this item's question restated, then answered
        (
            'Question: What is the difference between a "true" and "false" statement?\n'
            "A. a true statement is a statement that is true.\nB. a false statement is a statement that is false.\n"
            "C. a true statement is a statement that is true.\nD. a false statement is a statement that is false.",
            None,
        ),
        (f"Question: {QUESTION}\nAnswer: B", ["b"]),
        # the same list without the question: the words "true" and "false" inside sentences are no verdicts ...
        (
            "A. a true statement is a statement that is true.\nB. a false statement is a statement that is false.\n"
            "C. a true statement is a statement that is true.\nD. a false statement is a statement that is false.",
            None,
        ),
        # ... while a verdict after each label still marks the options
        ("A - False\nB - True\nC - True\nD - False", ["b", "c"]),
        (
            "A. pulse - correct\nB. blood pressure - incorrect\nC. pupil size - incorrect\nD. skin temperature - no",
            ["a"],
        ),
        # a base model answering, then writing the next item: the answer before it
        (' ["b"]\n\nQuestion: what is the normal adult pulse?\nA. 60-100\nB', ["b"]),
    ],
)
def test_an_answer_among_the_echoes_is_still_read(output, expected):
    assert read(output) == expected


@pytest.mark.parametrize(
    "output, expected",
    [
        # names different answers in turn, to its budget: no commitment (was read as the last line's letter)
        ('The answer is "b".\nThe answer is "a".\nThe answer is "c".\nThe answer is "b".\nThe answer is', None),
        ('The answer is "b".\nThe answer is "b".\nThe answer is "a".', None),
        ('The answer is "b". The answer is "a". The answer is "c".', None),
        ('["b"]\n["a"]\n["c"]\n["a"]', None),
        ('["b"]\n["b", "c"]\n["b"]\n["b", "c"]', None),  # one letter, then two, in turn
        ("Answer: A\nAnswer: B\nAnswer: C\nAnswer: D", None),
        ('{"answer": ["b"]}\n{"answer": ["a"]}\n{"answer": ["c"]}', None),
        ("Answer: B\nAnswer: A\nAnswer: C", None),
        ("\nB\nAnswer:\nC\nAnswer:\nB\nAnswer:\nC\n", None),  # the letter under each cue
        ("B\nC\nB\nC", None),  # letters alone, coming back to one already said
        ("The answer is B. This is because the pulse is first.\nThe answer is C. This is because the pupils", None),
        ("Option A is correct.\nOption B is correct.", None),
        # the same answer repeated is one answer
        ('The answer is "b".\n' * 5, ["b"]),
        ('["d"]\n["d"]\n["d"]', ["d"]),
        ("Answer: B\nAnswer: B\nAnswer: B\nAnswer:", ["b"]),
        ("\nB\nAnswer:\nB\nAnswer:\nB\nAnswer:\nB\n", ["b"]),
        # two letters alone, apart, are no loop: the opening letter line is read (as before); a column of
        # different letters under a frame lists the answers
        ("A.\nAspirin is given first.\nC.", ["a"]),
        ("The correct answers are:\nA.\nB.\nC.", ["a", "b", "c"]),
        # a single revision is read as before
        ("The answer is B. Wait, actually the answer is C.", ["c"]),
        ('["a"]\nWait, that is wrong. ["b"]', ["b"]),
        ("The correct answers are A and B. Actually, only B is correct here.", ["b"]),
        ('["a"]\nOn second thought: ["b"]', ["b"]),
        # ... and so is one to a letter alone at the close (was read as the opening letter: a silent change)
        ("B... wait, actually C", ["c"]),
        ("Answer: B... wait, actually C.", ["c"]),
        ("A. No, wait: D.", ["d"]),
        # but not a hypothetical or a comparison
        ("B. If the child were older, actually C.", ["b"]),
        ("B. Rather than C.", ["b"]),
        # an answer stated another way after the loop settles it
        ('The answer is "b".\nThe answer is "a".\nSo the final answer is A.', ["a"]),
    ],
)
def test_a_reply_naming_different_answers_in_turn_commits_to_nothing(output, expected):
    assert read(output) == expected


DIAGNOSES = (["myocarditis", "pericarditis", "endocarditis", "cardiomyopathy"], "what is the most likely diagnosis?")
RISKS = (
    ["elevated blood pressure", "low blood sugar", "fever", "pain"],
    "what is the main risk of untreated preeclampsia?",
)
COMPLAINT = (["elevated blood pressure", "low blood sugar", "fever", "pain"], "what is the chief complaint?")
PRESSURES = (["systolic", "nothing increases", "systolic and diastolic", "diastolic"], "which pressure rises?")
SHOCK_NOT = (["tachycardia", "cool skin", "bradycardia", "anxiety"], "which is not an early sign of shock?")


@pytest.mark.parametrize(
    "output, item, expected",
    [
        # one option's text asserted as the answer (was no answer)
        ("The most likely diagnosis is myocarditis.", DIAGNOSES, ["a"]),
        (
            "Given the fever after a viral illness, the diagnosis in this patient is myocarditis, which",
            DIAGNOSES,
            ["a"],
        ),
        ("The risk of untreated preeclampsia is elevated blood pressure.", RISKS, ["a"]),
        ("The chief complaint here is pain.", COMPLAINT, ["d"]),
        ("The pressure that rises is systolic and diastolic.", PRESSURES, ["c"]),  # the longer text, not "systolic"
        # the options restated, then one asserted
        (
            "A. myocarditis\nB. pericarditis\nC. endocarditis\nD. cardiomyopathy\nThe diagnosis is endocarditis.",
            DIAGNOSES,
            ["c"],
        ),
        ("Myocarditis is the answer.", DIAGNOSES, ["a"]),
        ("Diagnosis: myocarditis", DIAGNOSES, ["a"]),
        ("B is the answer.", DIAGNOSES, ["b"]),  # the letter form of the same sentence (was no answer)
        ("B is the answer if the troponin is raised.", DIAGNOSES, None),
        ("B is not the answer.", DIAGNOSES, None),
        # a heading that is not what the question asks, or a qualifier the option lacks
        ("Note: myocarditis", DIAGNOSES, None),
        ("The most likely diagnosis in this case is acute myocarditis.", DIAGNOSES, None),
        # never with another option's text anywhere in the reply
        ("The diagnosis is myocarditis, not pericarditis.", DIAGNOSES, None),
        ("Pericarditis causes pleuritic pain. The diagnosis is myocarditis.", DIAGNOSES, None),
        ("The pressure that rises is systolic. Diastolic stays.", PRESSURES, None),
        # never where the text is part of a longer word
        ("The chief complaint is painful swallowing.", COMPLAINT, None),
        ("The chief complaint is feverish skin.", COMPLAINT, None),
        # never hedged, negated, conditional or asked
        ("The diagnosis could be myocarditis.", DIAGNOSES, None),
        ("The diagnosis is probably myocarditis.", DIAGNOSES, None),
        ("The diagnosis is not myocarditis.", DIAGNOSES, None),
        ("If the troponin were raised, the diagnosis is myocarditis.", DIAGNOSES, None),
        ("Is the diagnosis myocarditis?", DIAGNOSES, None),
        ("The diagnosis is myocarditis or something else.", DIAGNOSES, None),
        ("The diagnosis is myocarditis, which is unlikely here.", DIAGNOSES, None),  # taken back after it
        # a sentence that only mentions the text, or states a fact about something the question does not ask
        ("Myocarditis is an inflammation of the heart muscle.", DIAGNOSES, None),
        ("The usual cause here is myocarditis.", DIAGNOSES, None),
        # a question asking for the option that is NOT so: a true statement is not the pick
        ("An early sign of shock is tachycardia.", SHOCK_NOT, None),
    ],
)
def test_one_options_text_asserted_in_a_sentence_is_that_option(output, item, expected):
    options, question = item
    assert read(output, options, question) == expected


NUMBERED = "1. pulse\n2. blood pressure\n3. pupil size\n4. skin temperature\n"


@pytest.mark.parametrize(
    "output, expected",
    [
        # the reply numbered the item's own options and answers with a number (was no answer)
        (NUMBERED + "The answer is 2.", ["b"]),
        (NUMBERED + "Answer: 3", ["c"]),
        (NUMBERED + "The correct answer is option 1, because the pulse comes first.", ["a"]),
        (NUMBERED + "Answer: 2. blood pressure", ["b"]),
        # the number with another option's text: the number says one option, the text another
        (NUMBERED + "Answer: 2. pupil size", None),
        # no list of its own, another list, a partial one, another order: a number names nothing
        ("The answer is 2.", None),
        ("1. airway\n2. breathing\n3. circulation\n4. disability\nThe answer is 2.", None),
        ("1. pulse\n2. blood pressure\nThe answer is 2.", None),
        ("1. blood pressure\n2. pulse\n3. pupil size\n4. skin temperature\nThe answer is 2.", None),
        # a number that is a quantity, or past the list
        (NUMBERED + "The answer is 2 minutes.", None),
        (NUMBERED + "The answer is 5.", None),
    ],
)
def test_a_number_names_an_option_only_in_the_replys_own_numbered_list(output, expected):
    assert read(output) == expected


# --- the worst failure, counted over every labelled corpus -------------------------------------------------
DATA = Path(__file__).parent / "data"


def _labelled(path: Path) -> list[tuple[str, str, dict, list[str] | None, str]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "expected" in row:
            label = row["expected"]
        elif "label" in row:
            label = row["label"]
        else:
            continue  # a recorded row not yet labelled
        if label is not None and not isinstance(label, list):
            continue  # a label that is a note (an ambiguous row), not letters
        doc = normalise_record({"question": row["question"], "choices": row["choices"], "answer": "a"}, number, path)
        rows.append((path.name, row["id"], doc, None if label is None else sorted(label), row["output"]))
    return rows


def test_no_labelled_output_is_read_as_a_different_answer():
    """A silent change of answer: an output labelled with letters read as other letters. Every corpus in
    tests/emsqa/data (misses read as no answer are each corpus test's business, and printed here)."""
    silent, invented, missed, total = [], [], [], 0
    for path in sorted(DATA.glob("*.jsonl")):
        for corpus, row_id, doc, label, output in _labelled(path):
            got = extract_answer(output, doc["letters"], doc["options"], doc["question"])
            got = None if got is None else sorted(got)
            total += 1
            if got is not None and label is not None and got != label:
                silent.append(f"{corpus} {row_id}: label {label}, read {got}")
            elif got is not None and label is None:
                invented.append(f"{corpus} {row_id}: no answer, read {got}")
            elif got is None and label is not None:
                missed.append(f"{corpus} {row_id}")
    print(
        f"\nEMSQA flexible reader, {total} labelled outputs: {len(silent)} silent changes of answer, "
        f"{len(invented)} answers read where none is, {len(missed)} answers missed"
    )
    assert total > 600
    assert silent == [], "\n".join(silent)


@pytest.mark.parametrize("restarts", [1, 2])
def test_an_echo_after_any_labelled_output_leaves_its_reading(restarts):
    """Every labelled output of every corpus, followed by its item's prompt block echoed and restarted into
    the budget, reads as it reads alone: the echo adds no answer and takes none away."""
    changed, total = [], 0
    for path in sorted(DATA.glob("*.jsonl")):
        for corpus, row_id, doc, _, output in _labelled(path):
            options = "\n".join(f"{letter.upper()}. {text}" for letter, text in zip(doc["letters"], doc["options"]))
            echo = f"\n{options}\n{INSTRUCTION}\nAnswer:" * restarts + f"\nA. {doc['options'][0]}\nB"
            alone = extract_answer(output, doc["letters"], doc["options"], doc["question"])
            echoed = extract_answer(output + echo, doc["letters"], doc["options"], doc["question"])
            total += 1
            if echoed != alone:
                changed.append(f"{corpus} {row_id}: alone {alone}, with the echo {echoed}")
    assert total > 600
    assert changed == [], "\n".join(changed)


def test_any_labelled_output_repeated_reads_as_it_reads_once():
    """A model looping on its own reply: every labelled output that commits to an answer, written three times
    over, reads as it reads once (the same answer repeated is one answer, and nothing in a repeat is taken
    for an echo or a cycle)."""
    changed, total = [], 0
    for path in sorted(DATA.glob("*.jsonl")):
        for corpus, row_id, doc, label, output in _labelled(path):
            if label is None:
                continue
            once = extract_answer(output, doc["letters"], doc["options"], doc["question"])
            thrice = extract_answer((output.strip() + "\n\n") * 3, doc["letters"], doc["options"], doc["question"])
            total += 1
            if thrice != once:
                changed.append(f"{corpus} {row_id}: once {once}, three times {thrice}")
    assert total > 500
    assert changed == [], "\n".join(changed)
