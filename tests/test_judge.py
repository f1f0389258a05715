"""The judge (`specdec_teacher.judge`) decides outside the student's process exactly what the checkers
decide inside it: for every exercise of every chapter, the reference recorded and judged is correct, and
every planted mistake recorded and judged gets the verdict the checker gives it on the hidden cases."""

import contextlib
import io
import json

import pytest
import torch

import specdec_teacher
from specdec_course.checks._record import decode_answer, encode_answer, record
from specdec_teacher import judge

CHECKERS = [(ch, name) for ch in specdec_teacher.CHAPTERS for name in specdec_teacher.module(ch).REFERENCE]


def _judged(plan, args):
    """Record in one place, judge from JSON alone (what crosses between the two processes)."""
    with contextlib.redirect_stdout(io.StringIO()):
        rec = json.loads(json.dumps(record("x", json.loads(json.dumps(plan)), *args)))
        return judge.judge(json.loads(json.dumps(plan)), rec)


@pytest.mark.parametrize("chapter,checker", CHECKERS)
def test_the_judge_agrees_with_the_checker(chapter, checker):
    module = f"specdec_course.checks.{chapter}"
    plan = judge.plan(module, checker)
    assert _judged(plan, specdec_teacher.reference_args(chapter, checker))["verdict"] == "correct"
    for wrong in specdec_teacher.module(chapter).WRONG.get(checker, []):
        args = wrong if isinstance(wrong, tuple) else (wrong,)
        with contextlib.redirect_stdout(io.StringIO()):
            in_process = specdec_teacher.hidden_check(module, checker, *args)
        got = _judged(plan, args)
        assert got["verdict"] == in_process, (wrong, got)


def test_a_record_of_other_inputs_or_too_few_calls_is_not_correct():
    plan = judge.plan("specdec_course.checks.ch06", "check_expected_tau")
    ref = specdec_teacher.reference_args("ch06", "check_expected_tau")[0]
    rec = record("x", plan, ref)
    short = json.loads(json.dumps(rec))
    short["answers"]["fn"]["results"]["hidden"] = short["answers"]["fn"]["results"]["hidden"][:-1]
    assert judge.judge(plan, short)["verdict"] == "incorrect"
    other = json.loads(json.dumps(plan))  # the record was made for other inputs than the judge's
    for call in other["calls"]["hidden"]:
        call[1] = [[0.5 for _ in call[1][0]]]
    rec = record("x", other, ref)
    assert judge.judge(plan, rec)["verdict"] == "incorrect"
    assert judge.judge(plan, None)["detail"] == "no answer was recorded"


def test_the_course_secret_moves_the_hidden_cases():
    plain = judge.plan("specdec_course.checks.ch06", "check_kept_positions")
    secret = judge.plan("specdec_course.checks.ch06", "check_kept_positions", secret="our course, 2027")
    assert plain["calls"]["public"] == secret["calls"]["public"]
    assert plain["calls"]["hidden"] != secret["calls"]["hidden"]
    ref = specdec_teacher.reference_args("ch06", "check_kept_positions")
    assert judge.judge(secret, record("x", secret, *ref), secret="our course, 2027")["verdict"] == "correct"
    # a record made on the public package's hidden inputs does not answer the course's
    assert judge.judge(secret, record("x", plain, *ref), secret="our course, 2027")["verdict"] == "incorrect"


@pytest.mark.parametrize(
    "value",
    [None, ..., True, 3, 0.25, "b", [1, (2, 3)], {1: [0.5], (0, 1): "x"}, {2, 1}, (), [[1.0, 2.0]]],
)
def test_answers_cross_as_json(value):
    assert decode_answer(json.loads(json.dumps(encode_answer(value)))) == value


def test_an_object_json_cannot_hold_is_no_answer():
    got = decode_answer(json.loads(json.dumps(encode_answer(iter([1, 2])))))
    assert repr(got) == "<a list_iterator object>" and got != [1, 2]


def test_a_plan_whose_json_keys_were_sorted_still_judges():
    """nbgrader writes notebooks (and the plan kept in a cell's metadata) with sorted keys."""
    plan = judge.plan("specdec_course.checks.ch01", "check_temperature_softmax")
    resorted = json.loads(json.dumps(plan, sort_keys=True))
    ref = specdec_teacher.reference_args("ch01", "check_temperature_softmax")
    assert judge.judge(resorted, json.loads(json.dumps(record("x", resorted, *ref))))["verdict"] == "correct"


def _zeroes_its_input(logits, temperature):
    out = torch.softmax(logits / max(temperature, 1e-9), -1) if temperature else None
    if out is None:
        out = torch.zeros_like(logits)
        out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    logits.zero_()  # right answer, but the caller's logits are gone
    return out


def _pops_its_inputs(draft, target):
    n = 0
    while draft and draft[0] == target[0]:
        draft.pop(0)
        target.pop(0)
        n += 1
    return n, target[0]


@pytest.mark.parametrize(
    "chapter,checker,fn",
    [
        ("ch01", "check_temperature_softmax", _zeroes_its_input),
        ("ch02", "check_greedy_accept", _pops_its_inputs),
    ],
)
def test_a_function_that_changes_its_inputs_is_judged_as_the_checker_judges_it(chapter, checker, fn):
    """The record keeps what a call did to its arguments, and the judge does the same to the checker's."""
    module = f"specdec_course.checks.{chapter}"
    with contextlib.redirect_stdout(io.StringIO()):
        in_process = specdec_teacher.hidden_check(module, checker, fn)
    got = _judged(judge.plan(module, checker), (fn,))
    assert in_process == "incorrect" and got["verdict"] == "incorrect", got
