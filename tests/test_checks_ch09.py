"""Chapter 09's checkers beyond the shared contract in tests/test_checks_common.py."""

import json
from pathlib import Path

import torch

from specdec_course.checks import ch09
from specdec_teacher import ch09 as teacher

CARD = Path(__file__).resolve().parents[1] / "specdec_lib" / "models" / "tiny-code" / "eagle3" / "card.json"


def test_teacher_forcing_question(capsys):
    check = ch09.check_teacher_forcing
    assert check(*teacher.REFERENCE["check_teacher_forcing"]) == "correct"
    capsys.readouterr()
    for answer in teacher.WRONG["check_teacher_forcing"]:
        assert check(*answer) == "incorrect", answer
        out = capsys.readouterr().out
        assert len(out.split("incorrect — ", 1)[1].strip()) > 10, out
    assert check() == "not attempted" and check(2) == "not attempted" and check(None, "a") == "not attempted"
    assert check("two", teacher.REFERENCE["check_teacher_forcing"][1]) == "incorrect"
    assert check(2.5, teacher.REFERENCE["check_teacher_forcing"][1]) == "incorrect"


def test_the_options_are_balanced():
    right = ch09.TF_OPTIONS[teacher.REFERENCE["check_teacher_forcing"][1]]
    assert right == teacher.TF_RIGHT
    assert len(right) < max(len(t) for t in ch09.TF_OPTIONS.values()), "the right option is the longest"
    assert set(ch09.TF_OPTIONS.values()) == {teacher.TF_RIGHT, *teacher.TF_WRONG}


def test_the_card_shows_the_collapse_the_exercise_predicts():
    """The prediction exercise's answer (depth 2) is what the zoo's ablation measured."""
    exp = json.loads(CARD.read_text())["experiments"]
    res, units = exp["results"], exp["ablation_units"]
    eagle3 = [row[0] for row in res[f"eagle3:{units}"]["acc"]]
    forced = [row[0] for row in res[f"eagle3-teacher-forced:{units}"]["acc"]]
    assert abs(forced[0] - eagle3[0]) < 0.1  # depth 1: as good
    assert all(f < e / 2 for f, e in zip(forced[1:], eagle3[1:]))  # from depth 2 on: collapsed


def test_visible_keys_are_what_the_library_attends_to():
    """The reference answer is read off the library's own training-time test: every value is replaced by
    a one-hot code of its (step, position), so each step's attention output shows which keys it mixed."""
    from conftest import tiny_model

    from specdec_lib.eagle3 import Eagle3Drafter, ttt_outputs

    target = tiny_model(vocab=16, hidden=64, layers=4, seed=1)
    drafter = Eagle3Drafter(target).eval()
    T, steps = 6, 4
    head_dim = drafter.self_attn.head_dim
    assert steps * T <= head_dim
    qkv, finish, seen = drafter.qkv, drafter.finish, []

    def coded_qkv(g, ahead, positions):
        q, k, v = qkv(g, ahead, positions)
        t, m = int(positions[0]), v.shape[-2]  # step t sits at RoPE positions t .. t + m - 1
        code = torch.zeros_like(v)
        code[..., torch.arange(m), t * T + torch.arange(m)] = 1.0
        return q, k, code

    def recording_finish(g, attended):
        seen.append(attended.detach())
        return finish(g, attended)

    drafter.qkv, drafter.finish = coded_qkv, recording_finish
    g = torch.randn(1, T, target.config.hidden_size)
    ids = torch.randint(0, 16, (1, T))
    with torch.no_grad():
        ttt_outputs(drafter, g, ids, steps)
    assert len(seen) == steps
    for s, attended in enumerate(seen):
        for j in range(attended.shape[-2]):
            weights = attended[0, 0, j]
            got = {(int(c) // T, int(c) % T) for c in (weights > 1e-7).nonzero().flatten()}
            assert got == set(teacher.REFERENCE["check_visible_keys"](s, j)), (s, j, sorted(got))


def test_the_inverse_map_inverts_the_library_vocabulary():
    from specdec_lib.eagle3 import draft_vocabulary

    g = torch.Generator().manual_seed(0)
    for V, N in ((10, 4), (50, 17), (30, 30)):
        counts = torch.randint(0, 9, (V,), generator=g)
        d2t, t2d = draft_vocabulary(counts, N)
        for v in range(V):
            i = teacher.REFERENCE["check_draft_id"](d2t.tolist(), v)
            assert (i is not None) == bool(t2d[v])
            assert i is None or i + int(d2t[i]) == v


def test_the_notebook_reference_letter_is_the_right_option():
    """The chapter's reference solution names the right option by letter: it must follow the options' order."""
    import re

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "09_eagle3.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    refs = [s for s in sources if "### BEGIN SOLUTION" in s and "check_teacher_forcing(" in s]
    assert refs
    for src in refs:
        assert (
            re.search(r'^my_choice = "(\w)"', src, re.M).group(1)
            == teacher.REFERENCE["check_teacher_forcing"][1]
        )
