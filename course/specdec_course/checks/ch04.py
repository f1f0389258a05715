"""Checkers for chapter 04 (draft trees). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
The expected answers come from the teacher's reference solutions through `_expected` (see `_core`).
"""

from __future__ import annotations

import torch

from specdec_course.checks._core import (
    NOT_ATTEMPTED,
    Answers,
    Incorrect,
    as_float,
    as_int_list,
    expect,
    seed,
    unanswered,
    verdict,
)

_expected = Answers("ch04")


# ------------------------------------------------------------------------------------------ helpers
def _trees() -> list[list[int]]:
    """Parent lists (-1 = the root), parents before children: small shapes, a chain, a star, random ones."""
    out = [
        [-1],
        [-1, -1],
        [-1, 0, 1, 2],  # a chain
        [-1, -1, -1, -1],  # a star: four children of the root
        [-1, -1, 0, 0, 1, 2],
        [-1, 0, -1, 2, 1, 0, 3],  # not ordered by depth: siblings interleaved
    ]
    g = torch.Generator().manual_seed(seed(0))
    for n in (5, 9, 14):
        out.append([int(torch.randint(-1, i, (1,), generator=g)) for i in range(n)])
    return out


# ------------------------------------------------------------------------ exercise 1: ancestor mask
def check_ancestor_mask(fn) -> str:
    """fn(parents) -> [N, N] bool mask, True at (i, j) when node j is node i or one of its ancestors."""

    def cases(fn):
        for parents in _trees():
            want = _expected.ancestor_mask(parents)
            answer = fn(list(parents))
            try:
                got = torch.as_tensor(answer).bool()
            except (TypeError, ValueError, RuntimeError) as e:
                raise Incorrect("return a tensor (or nested list) of booleans of shape [N, N]") from e
            n = len(parents)
            expect(got.shape == (n, n), f"for {n} nodes the mask is [{n}, {n}], not {list(got.shape)}")
            expect(bool(got.diagonal().all()), "every node must attend to itself (the diagonal is True)")
            expect(
                not bool((got & ~want).any()),
                f"parents {parents}: your mask lets a node see a node outside its own root path "
                "(a sibling, a cousin or a descendant)",
            )
            expect(
                bool((got == want).all()),
                f"parents {parents}: row i must be True exactly on node i and ALL its ancestors "
                "(the parent, the parent's parent, ...), not just the parent",
            )

    return verdict("ancestor mask", fn, cases)


# ------------------------------------------------------------- exercise 2: misplaced positions (debug)
def check_misplaced_nodes(fn) -> str:
    """fn(parents) -> the sorted indices of the nodes that get a wrong position when a flatten gives node i
    the position prefix_len + 1 + i (its place in the flattened input, as for a chain) instead of
    prefix_len + its depth."""

    def cases(fn):
        for parents in _trees():
            want = _expected.misplaced_nodes(parents)
            got = sorted(as_int_list(fn(list(parents)), "the misplaced nodes"))
            expect(
                all(0 <= i < len(parents) for i in got),
                f"parents {parents}: return node indices 0..{len(parents) - 1} (the root is never misplaced)",
            )
            expect(
                got == want,
                f"parents {parents}: the misplaced nodes are {want}, you returned {got} (hint: compare each "
                "node's flattened index + 1 with its depth, for every node: its parent being its index neighbour is not enough)",
            )

    return verdict("misplaced positions", fn, cases)


# ------------------------------------------------------------------ exercise 3: when a crop is enough
def check_crop_is_right(fn) -> str:
    """fn(parents, accepted_node) -> True when cropping the cache after the root and the first m nodes (a
    chain's crop, m = the accepted path's length) keeps exactly the accepted path's slots; -1: nothing
    accepted."""

    def cases(fn):
        for parents in _trees():
            for node in range(-1, len(parents)):
                want = bool(_expected.crop_is_right(parents, node))
                got = fn(list(parents), node)
                expect(
                    isinstance(got, bool) or got in (0, 1),
                    f"return True or False, not {got!r}",
                )
                expect(
                    bool(got) == want,
                    f"parents {parents}, accepted node {node}: a crop is {'right' if want else 'wrong'} here, "
                    f"you said {bool(got)} (hint: which slots does the crop keep, and which does the path need?)",
                )

    return verdict("when a crop is enough", fn, cases)


# --------------------------------------------------------------------------- exercise 4: greedy walk
def _greedy_cases(s: int = 0):
    """(tokens, parents, argmax) where the target's choices follow some branch for a while."""
    g = torch.Generator().manual_seed(seed(s))
    out = []
    for parents in _trees():
        for _ in range(6):
            tokens = [0] * len(parents)  # siblings get distinct tokens, as top-k children do
            for parent in set(parents):
                kids = [c for c, par in enumerate(parents) if par == parent]
                for c, t in zip(kids, torch.randperm(7, generator=g).tolist()):
                    tokens[c] = t
            argmax = torch.randint(0, 7, (len(parents) + 1,), generator=g).tolist()
            node = int(torch.randint(-1, len(parents), (1,), generator=g))
            while node >= 0:  # make the target agree along one path up to the root, often a late sibling
                argmax[parents[node] + 1] = tokens[node]
                node = parents[node]
            out.append((tokens, parents, argmax))
    return out


def _colleague_walk(tokens, parents, argmax):
    """The notebook's `colleague_greedy_walk`, bug included (it is shown to the learner)."""
    path, node = [], -1
    while True:
        children = [c for c, par in enumerate(parents) if par == node]
        child = next((c for c in children if tokens[c] == argmax[c + 1]), None)
        if child is None:
            return path, argmax[node + 1]
        path.append(child)
        node = child


def check_greedy_walk(fn) -> str:
    """fn(tokens, parents, argmax) -> (accepted path as a list of node indices, next token).

    argmax[0] is the target's greedy choice after the root and argmax[1 + i] its choice after node i.
    """

    def cases(fn):
        for tokens, parents, argmax in _greedy_cases():
            want_path, want_next = _expected.greedy_walk(tokens, parents, argmax)
            answer = fn(list(tokens), list(parents), list(argmax))
            try:
                path, nxt = answer
            except (TypeError, ValueError) as e:
                raise Incorrect("return a pair: (list of accepted node indices, the next token)") from e
            path = as_int_list(path, "the accepted path")
            context = f"tokens {tokens}, parents {parents}, argmax {argmax}"
            expect(
                (path, int(nxt)) == (want_path, want_next)
                or (path, int(nxt)) != _colleague_walk(tokens, parents, argmax),
                f"{context}: that is the colleague's answer: a child is accepted when its token is the target's "
                "choice after its PARENT (argmax[parent + 1]), the row that scored the child's position",
            )
            expect(
                path == want_path,
                f"{context}: accepted path {want_path}, you returned {path} (hint: at each node look for the "
                "child whose token is the argmax of THAT node's row, among all its children)",
            )
            expect(
                int(nxt) == want_next,
                f"{context}: the next token is the argmax after the last accepted node, {want_next}; "
                f"you returned {nxt}",
            )

    return verdict("greedy walk", fn, cases)


# ------------------------------------------------------------------ exercise 5: MSS by hand (numbers)
MSS_P = (0.4, 0.3, 0.2, 0.1)  # the target over tokens A, B, C, D; the siblings are A then B (top-2 picks)


def check_mss_example(accept_a=..., accept_b=..., correction=...) -> str:
    """Your numbers for p = (0.4, 0.3, 0.2, 0.1) and two deterministic siblings A then B: the probability
    that A is accepted, the probability that B is accepted (A tried first), and the distribution of the
    correction token when both are rejected. Leave any as `...` while not attempted."""
    answers = (accept_a, accept_b, correction)
    if unanswered("MSS by hand", answers, "set the three answers"):
        return NOT_ATTEMPTED

    def cases(answer):
        a, b, r = answer
        try:
            a, b = float(a), float(b)
            r = torch.as_tensor(r, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError) as e:
            raise Incorrect("give two numbers and a list of four numbers") from e
        expect(
            _expected.right("mss.a", a),
            "a point-mass sibling x is accepted with probability min(1, P(x)/1)",
        )
        expect(
            _expected.right("mss.b", b), _expected.hint("mss.b", b) or f"P(B accepted) = {b:.3f} is not right"
        )
        expect(r.numel() == 4, "the correction distribution has four entries, one per token")
        r = tuple(r.tolist())
        if not _expected.right("mss.correction", r):
            hint = _expected.hint("mss.correction", r)
            expect(hint is None, hint)
            expect(abs(sum(r) - 1) < 1e-3, "the correction distribution should sum to 1 (normalise it)")
            expect(False, "check the correction")

    return verdict("MSS by hand", answers, cases)


# ------------------------------------------------------- exercise 6: picks or samples (numbers)
SIBLINGS_Q = (
    0.5,
    0.1,
    0.3,
    0.1,
)  # the draft over A, B, C, D; the target is MSS_P, and the node gets 2 children


def check_sibling_acceptance(picks=..., samples=...) -> str:
    """Your two numbers for p = (0.4, 0.3, 0.2, 0.1), q = (0.5, 0.1, 0.3, 0.1) and k = 2 children: the
    probability that the round accepts one of the children when they are the draft's top-2 picks, and when
    they are two samples drawn without replacement (each verified with the q it was drawn from). Leave
    either as `...` while not attempted."""
    answers = (picks, samples)
    if unanswered("picks or samples", answers, "set both answers"):
        return NOT_ATTEMPTED

    def cases(answer):
        a, b = as_float(answer[0], "picks"), as_float(answer[1], "samples")
        expect(
            _expected.right("siblings.picks", a),
            _expected.hint("siblings.picks", a)
            or "the picks are the draft's top 2; section 6 derives what a round accepts with deterministic picks",
        )
        expect(
            _expected.right("siblings.samples", b),
            _expected.hint("siblings.samples", b)
            or "the first sample is accepted with sum_x min(p(x), q(x)); then add, for each token x1 with "
            "q(x1) > p(x1), (q(x1) - p(x1)) times the chance that the second sample (from q without x1, "
            "renormalised) is accepted against the residual norm(max(0, p - q))",
        )

    return verdict("picks or samples", answers, cases)
