"""Checkers for chapter 04 (draft trees). Hand-written; the notebook imports them.

Each checker prints and returns "correct", "incorrect" (with a hint) or "not attempted", and never raises.
`REFERENCE` holds the reference solutions and `WRONG` plausible mistakes; tests/test_checks_ch04.py runs
every checker on both.
"""

from __future__ import annotations

import torch

from specdec_lib.checks._core import _ICON, NOT_ATTEMPTED, Incorrect, as_int_list, expect, verdict


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
    g = torch.Generator().manual_seed(0)
    for n in (5, 9, 14):
        out.append([int(torch.randint(-1, i, (1,), generator=g)) for i in range(n)])
    return out


def _depths(parents: list[int]) -> list[int]:
    depth = []
    for parent in parents:
        depth.append(1 if parent < 0 else depth[parent] + 1)
    return depth


def _path(parents: list[int], node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


# ------------------------------------------------------------------------ exercise 1: ancestor mask
def _ref_ancestor_mask(parents):
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]  # the parent's row is complete: parents come first
    return mask


def check_ancestor_mask(fn) -> str:
    """fn(parents) -> [N, N] bool mask, True at (i, j) when node j is node i or one of its ancestors."""

    def cases(fn):
        for parents in _trees():
            want = _ref_ancestor_mask(parents)
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


# ---------------------------------------------------------------------------- exercise 2: positions
def _ref_positions(parents, prefix_len):
    return [prefix_len] + [prefix_len + d for d in _depths(parents)]


def check_positions(fn) -> str:
    """fn(parents, prefix_len) -> position ids of the verification input [root] + nodes: the root sits at
    prefix_len (after the cached prefix) and a node at prefix_len + its depth (children of the root: 1)."""

    def cases(fn):
        for parents in _trees():
            for prefix_len in (0, 7, 30):
                want = _ref_positions(parents, prefix_len)
                got = as_int_list(fn(list(parents), prefix_len), "the positions")
                expect(
                    len(got) == len(want),
                    f"return one position for the root and one per node: {len(want)}, not {len(got)}",
                )
                expect(got[0] == prefix_len, f"the root comes right after the prefix: position {prefix_len}")
                expect(
                    got != list(range(prefix_len, prefix_len + len(want))) or got == want,
                    f"parents {parents}: positions are not the flattened index; two siblings share a "
                    "position, because they are alternatives for the same place in the text",
                )
                expect(got == want, f"parents {parents}, prefix_len {prefix_len}: expected {want}, got {got}")

    return verdict("positions", fn, cases)


# --------------------------------------------------------------------------- exercise 3: kept slots
def _ref_kept_slots(parents, accepted_node, prefix_len):
    return list(range(prefix_len + 1)) + [prefix_len + 1 + i for i in _path(parents, accepted_node)]


def check_kept_slots(fn) -> str:
    """fn(parents, accepted_node, prefix_len) -> the cache slots to keep, in order, after a round whose
    accepted path ends at `accepted_node` (-1: nothing accepted). The cache holds the prefix at slots
    0..prefix_len-1, the root at prefix_len and node i at prefix_len + 1 + i."""

    def cases(fn):
        for parents in _trees():
            for node in range(-1, len(parents)):
                for prefix_len in (0, 4):
                    want = _ref_kept_slots(parents, node, prefix_len)
                    got = as_int_list(fn(list(parents), node, prefix_len), "the kept slots")
                    expect(
                        got[: prefix_len + 1] == want[: prefix_len + 1],
                        "keep the whole prefix and the root (slots 0..prefix_len): the root is now "
                        "committed text",
                    )
                    expect(
                        got == want or got != list(range(len(want))),
                        f"parents {parents}, accepted node {node}: the path is the accepted node and its "
                        "ancestors, not the first slots after the root (that is a chain's crop)",
                    )
                    expect(
                        got == want,
                        f"parents {parents}, accepted node {node}, prefix_len {prefix_len}: expected {want}, "
                        f"got {got} (hint: walk up from the node to the root, then reverse)",
                    )

    return verdict("kept cache slots", fn, cases)


# --------------------------------------------------------------------------- exercise 4: greedy walk
def _ref_greedy_walk(tokens, parents, argmax):
    path, node = [], -1
    while True:
        want = argmax[node + 1]
        nxt = next((c for c, par in enumerate(parents) if par == node and tokens[c] == want), None)
        if nxt is None:
            return path, want
        path.append(nxt)
        node = nxt


def _greedy_cases(seed: int = 0):
    """(tokens, parents, argmax) where the target's choices follow some branch for a while."""
    g = torch.Generator().manual_seed(seed)
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
            for c in _path(parents, node):  # make the target agree along one path, often a late sibling
                argmax[parents[c] + 1] = tokens[c]
            out.append((tokens, parents, argmax))
    return out


def check_greedy_walk(fn) -> str:
    """fn(tokens, parents, argmax) -> (accepted path as a list of node indices, next token).

    argmax[0] is the target's greedy choice after the root and argmax[1 + i] its choice after node i.
    """

    def cases(fn):
        for tokens, parents, argmax in _greedy_cases():
            want_path, want_next = _ref_greedy_walk(tokens, parents, argmax)
            answer = fn(list(tokens), list(parents), list(argmax))
            try:
                path, nxt = answer
            except (TypeError, ValueError) as e:
                raise Incorrect("return a pair: (list of accepted node indices, the next token)") from e
            path = as_int_list(path, "the accepted path")
            context = f"tokens {tokens}, parents {parents}, argmax {argmax}"
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


def _ref_mss_example():
    return 0.4, 0.3, (0.0, 0.0, 2 / 3, 1 / 3)


def check_mss_example(accept_a=..., accept_b=..., correction=...) -> str:
    """Your numbers for p = (0.4, 0.3, 0.2, 0.1) and two deterministic siblings A then B: the probability
    that A is accepted, the probability that B is accepted (A tried first), and the distribution of the
    correction token when both are rejected. Leave any as `...` while not attempted."""
    answers = (accept_a, accept_b, correction)
    if any(a is ... or a is None for a in answers):
        status = NOT_ATTEMPTED
        print(f"{_ICON[status]} MSS by hand: {status} — set the three answers")
        return status

    def cases(answer):
        a, b, r = answer
        try:
            a, b = float(a), float(b)
            r = torch.as_tensor(r, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError) as e:
            raise Incorrect("give two numbers and a list of four numbers") from e
        want_a, want_b, want_r = _ref_mss_example()
        expect(abs(a - want_a) < 1e-3, "a point-mass sibling x is accepted with probability min(1, P(x)/1)")
        expect(
            abs(b - 0.3 / 0.6) > 1e-3,
            "0.5 is the chance B is accepted once A has been rejected; multiply by the chance of that rejection",
        )
        expect(
            abs(b - 0.6 * 0.3) > 1e-3,
            "after rejecting A, P is updated to the residual norm(max(0, P - point mass on A)) before B is tried",
        )
        expect(abs(b - want_b) < 1e-3, f"P(B accepted) = {b:.3f} is not right")
        expect(r.numel() == 4, "the correction distribution has four entries, one per token")
        expect(
            not torch.allclose(r, torch.tensor(MSS_P, dtype=torch.float64), atol=1e-3),
            "the correction is drawn from the updated P, not from the original p",
        )
        expect(abs(float(r.sum()) - 1) < 1e-3, "the correction distribution should sum to 1 (normalise it)")
        expect(
            torch.allclose(r, torch.tensor(want_r, dtype=torch.float64), atol=1e-3), "check the correction"
        )

    return verdict("MSS by hand", answers, cases)


REFERENCE = {
    "check_ancestor_mask": _ref_ancestor_mask,
    "check_positions": _ref_positions,
    "check_kept_slots": _ref_kept_slots,
    "check_greedy_walk": _ref_greedy_walk,
    "check_mss_example": _ref_mss_example(),  # values, not a function: check_mss_example(*answer)
}


def _parent_only_mask(parents):
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i, parent] = True
    return mask


def _first_child_walk(tokens, parents, argmax):
    path, node = [], -1
    while True:
        kids = [c for c, par in enumerate(parents) if par == node]
        if not kids or tokens[kids[0]] != argmax[node + 1]:
            return path, argmax[node + 1]
        path.append(kids[0])
        node = kids[0]


def _flat_index_walk(tokens, parents, argmax):  # chain thinking: compare node i with row i
    a = 0
    while a < len(tokens) and tokens[a] == argmax[a]:
        a += 1
    return list(range(a)), argmax[a]


def _root_row_walk(tokens, parents, argmax):  # always compares with the root's argmax
    path, node = [], -1
    while True:
        nxt = next((c for c, par in enumerate(parents) if par == node and tokens[c] == argmax[0]), None)
        if nxt is None:
            return path, argmax[node + 1]
        path.append(nxt)
        node = nxt


WRONG = {
    "check_ancestor_mask": [
        _parent_only_mask,  # only the parent, not the grandparents
        lambda parents: _ref_ancestor_mask(parents).T,  # descendants instead of ancestors
        lambda parents: torch.ones(len(parents), len(parents)).tril().bool(),  # plain causal
        lambda parents: _ref_ancestor_mask(parents) & ~torch.eye(len(parents), dtype=torch.bool),  # no self
        lambda parents: _ref_ancestor_mask(parents) | _ref_ancestor_mask(parents).T,  # symmetric
    ],
    "check_positions": [
        lambda parents, L: list(range(L, L + len(parents) + 1)),  # the flattened index
        lambda parents, L: [L + d for d in _depths(parents)],  # forgets the root
        lambda parents, L: [L] + [L + d + 1 for d in _depths(parents)],  # off by one
        lambda parents, L: [0] + _depths(parents),  # forgets the prefix
    ],
    "check_kept_slots": [
        lambda parents, node, L: list(range(L + 1 + len(_path(parents, node)))),  # a chain's crop
        lambda parents, node, L: list(range(L)) + [L + 1 + i for i in _path(parents, node)],  # drops the root
        lambda parents, node, L: list(range(L + 1)) + [L + i for i in _path(parents, node)],  # off by one
        lambda parents, node, L: list(range(L + 1)) + [L + 1 + i for i in _path(parents, node)][::-1],
        lambda parents, node, L: list(range(L + 1)) + ([L + 1 + node] if node >= 0 else []),  # no ancestors
    ],
    "check_greedy_walk": [
        _first_child_walk,
        _flat_index_walk,
        _root_row_walk,
        lambda tokens, parents, argmax: ([], argmax[0]),  # never accepts
    ],
    "check_mss_example": [
        (0.4, 0.5, (0.0, 0.0, 2 / 3, 1 / 3)),  # conditional instead of joint
        (0.4, 0.18, (0.0, 0.0, 2 / 3, 1 / 3)),  # no residual update
        (0.4, 0.3, (0.0, 0.0, 0.2, 0.1)),  # correction not normalised
        (0.4, 0.3, MSS_P),  # correction from the original p
        (0.6, 0.3, (0.0, 0.0, 2 / 3, 1 / 3)),  # rejection probability for A
        ("0.4?", 0.3, (0.0, 0.0, 2 / 3, 1 / 3)),  # not a number
    ],
}
