"""Chapter 07's checkers beyond the shared contract in tests/test_checks_common.py."""

import json
import re
from pathlib import Path

import torch

from specdec_course.checks import ch07
from specdec_course.checks._core import letter_of, lettered
from specdec_teacher import ch07 as teacher

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "07_eagle.ipynb"
RIGHT_LETTER, REF_FN = teacher.REFERENCE["check_feature_uncertainty"]


def test_feature_uncertainty_question():
    assert ch07.check_feature_uncertainty(RIGHT_LETTER, REF_FN) == "correct"
    assert ch07.check_feature_uncertainty(f" ({RIGHT_LETTER.upper()}) ", REF_FN) == "correct"
    for answer in teacher.WRONG["check_feature_uncertainty"]:
        assert ch07.check_feature_uncertainty(*answer) == "incorrect", answer
    assert ch07.check_feature_uncertainty() == "not attempted"
    assert ch07.check_feature_uncertainty(RIGHT_LETTER) == "not attempted"
    assert (
        ch07.check_feature_uncertainty(..., REF_FN) == "not attempted"
    )  # the student stub `my_answer = ...`

    def stub(f, p):
        raise NotImplementedError

    assert ch07.check_feature_uncertainty(RIGHT_LETTER, stub) == "not attempted"
    assert ch07.check_feature_uncertainty(2, REF_FN) == "incorrect"
    assert ch07.check_feature_uncertainty("z", REF_FN) == "incorrect"
    assert ch07.check_feature_uncertainty(RIGHT_LETTER, lambda f, p: "junk") == "incorrect"


def test_each_near_miss_option_gets_its_own_hint(capsys):
    options = ch07.UNCERTAINTY_OPTIONS
    for text, hint in teacher.UNCERTAINTY_WRONG.items():
        letter = letter_of(options, text)
        assert ch07.check_feature_uncertainty(letter, REF_FN) == "incorrect"
        out = capsys.readouterr().out
        assert f"({letter}) is not it" in out and hint in out, out


def test_options_are_shuffled_balanced_and_the_right_one_not_the_longest():
    options = ch07.UNCERTAINTY_OPTIONS
    assert sorted(options.values()) == sorted([teacher.UNCERTAINTY_RIGHT, *teacher.UNCERTAINTY_WRONG])
    assert options == lettered("ch07-ex2", teacher.UNCERTAINTY_RIGHT, list(teacher.UNCERTAINTY_WRONG))
    lengths = [len(t) for t in options.values()]
    assert max(lengths) <= 1.15 * min(lengths), lengths
    assert len(teacher.UNCERTAINTY_RIGHT) < max(lengths), "the right option must not be the longest"
    assert RIGHT_LETTER == letter_of(options, teacher.UNCERTAINTY_RIGHT)


def test_the_notebooks_solution_picks_the_right_letter():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    (cell,) = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "ch07-ex2"]
    letters = re.findall(r"^my_answer = ['\"](\w)['\"]", "".join(cell["source"]), re.M)
    assert letters == [RIGHT_LETTER], "update the notebook's reference letter (the order comes from a hash)"


def test_drafter_cache_reference_matches_the_proposer():
    """The exercise's rule is what EagleProposer does: crop to n, then the catch-up feeds n .. n + accepted."""
    from conftest import tiny_model

    import specdec_lib as sd
    from specdec_lib.eagle import EagleDrafter, EagleProposer
    from specdec_lib.speculative import Verdict

    target = tiny_model(vocab=8, seed=0)
    prop = EagleProposer(EagleDrafter(target), [(0,), (0, 0), (0, 0, 0)])
    d = target.config.hidden_size
    for n in (2, 5):
        for accepted in (0, 1, 3):
            tokens = torch.arange(n + 1) % 8
            prop.start(target, tokens, sd.SamplingParams(0.0), None, {-1: torch.zeros(n, d)})
            tree = prop.propose(tokens, 3)
            assert tree is not None
            new = [0] * (accepted + 1)
            verdict = Verdict(tree, list(range(accepted)), new, None, {-1: torch.zeros(accepted + 1, d)}, n)
            tokens = torch.cat([tokens, torch.tensor(new)])
            prop.update(tokens, verdict)
            kept, fed = teacher.REFERENCE["check_drafter_cache"](n, accepted)
            assert len(prop.cache) == kept and len(prop.unfed) == len(fed)
