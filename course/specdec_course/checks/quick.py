"""Quick-checks: one short conceptual question per chapter, multiple choice or a number. Hand-written;
each chapter's exercise section shows its question with `quick_question(n)` and checks the answer with
`check_quick(n, answer)`, which prints and returns "correct", "incorrect" (with a hint) or
"not attempted", and never raises. The options are listed in the order of their letters (`options_of`
orders them by a hash); the right answers, and the known wrong numbers with their hints, are in the
teacher's package (answers.json has their digests)."""

from __future__ import annotations

from specdec_course.checks._core import (
    _ICON,
    NOT_ATTEMPTED,
    Answers,
    as_float,
    expect,
    expect_choice,
    options_of,
    show_options,
    verdict,
)

_expected = Answers("quick")

QUICK = {
    1: {
        "question": "A 7B model in fp16 decodes at batch 1 on a GPU, far below its ridge point. One forward pass "
        "scores 1 token. About how long does one pass take if it scores 4 tokens instead?",
        "options": options_of(
            "quick-01",
            [
                "about as long, but only because the KV cache makes the three extra tokens free to score",
                "about as long: the pass waits on reading the weights, once per pass however many tokens",
                "about 4 times as long: four tokens need four times the arithmetic, and arithmetic is the cost",
                "about twice as long: attention over the new tokens grows with the square of their number",
            ],
        ),
        "hint": "what does the GPU spend a batch-1 pass waiting for? (section 7)",
    },
    2: {
        "question": "Each drafted token is accepted with probability 0.8, independently of the others, and a round "
        "stops at the first rejection. With k = 4 drafted tokens, what is the expected number of tokens "
        "one round commits (tau)? Answer with a number.",
        "hint": "sum the probabilities that depth d is accepted, d = 1..k, then add the target's token",
    },
    3: {
        "question": "A draft that knows nothing proposes every token with the same probability: q is uniform over "
        "the 4 tokens of a target p = (0.7, 0.1, 0.1, 0.1). What is the probability that its token is accepted? "
        "Answer with a number.",
        "hint": "beta = sum over x of min(p(x), q(x)), with q(x) = 1/4 for every token",
    },
    4: {
        "question": "What does a draft tree buy over a chain of the same depth, and what does it cost?",
        "options": options_of(
            "quick-04",
            [
                "more accepted tokens per pass, paid for by scoring more positions in the one pass",
                "fewer draft-model passes, since siblings share the draft's computation",
                "exactness under sampling, which a chain of point masses does not have",
                "more accepted tokens per pass, paid for by one extra target pass per branch of the tree",
            ],
        ),
        "hint": "a chain stops at the first rejection even when the draft's second guess was right; what does "
        "the target's pass have to score to try that second guess too?",
    },
    5: {
        "question": "Medusa's typical acceptance can be faster than exact verification. What do you give up?",
        "options": options_of(
            "quick-05",
            [
                "the KV cache: typical acceptance must recompute the whole prefix every round",
                "greedy equality: at T = 0 the output differs from plain greedy decoding",
                "the target's exact distribution when sampling (greedy outputs stay the same)",
                "nothing: it accepts exactly the tokens rejection sampling would, only sooner",
            ],
        ),
        "hint": "typical acceptance accepts a token whose probability is merely high enough; compare what it "
        "keeps with min(1, p / q) (section on typical acceptance)",
    },
    6: {
        "question": "What does a sequential (DeepSeek-V3) MTP module at depth k read that an independent head at "
        "depth k does not?",
        "options": options_of(
            "quick-06",
            [
                "the previous depth's hidden state and the embedding of the token it stands for",
                "the previous depth's hidden state only, without any token embedding",
                "the target's own logits at depth k, which the verification pass computes anyway",
                "a larger share of the target's layers, run again for every depth",
            ],
        ),
        "hint": "why does the independent heads' acceptance fall faster with depth? what can't a head know?",
    },
    7: {
        "question": "Which LM head turns EAGLE's guessed feature into draft tokens, and why that one?",
        "options": options_of(
            "quick-07",
            [
                "the target's frozen head, because a head trained with the drafter would be lossy",
                "the target's frozen head: the guess is trained to be the target's next feature",
                "the draft model's head from chapter 02, which already maps features to tokens",
                "a head trained with the drafter, because the target's own head is too costly to run",
            ],
        ),
        "hint": "what space does the drafter's output live in, and what reads that space in the target?",
    },
    8: {
        "question": "EAGLE-2 grows its tree where the drafter is confident. Why is the drafter's confidence a usable "
        "stand-in for the acceptance rate?",
        "options": options_of(
            "quick-08",
            [
                "the target sends the drafter its own probabilities while it drafts, so the two are equal",
                "a confident drafter is always right at T = 0, and EAGLE-2 only grows greedy trees",
                "the drafter is trained to maximise confidence, so confident tokens are the right ones",
                "the drafter is calibrated: what it gives probability c is accepted about c of the time",
            ],
        ),
        "hint": "look at the reliability diagrams of section 1: which curve lies on the diagonal?",
    },
    9: {
        "question": "EAGLE-3's drafter can only propose its 2048 most frequent tokens. What does that cost?",
        "options": options_of(
            "quick-09",
            [
                "a little acceptance: a rare token is never drafted, yet the target can still emit it",
                "exactness under sampling: a token outside the 2048 can never be emitted by the engine",
                "greedy equality: the greedy output can differ when the argmax is a rare token",
                "nothing at all: a rare token is never the one the target picks",
            ],
        ),
        "hint": "who writes the token when every drafted candidate is rejected? (section 3)",
    },
    10: {
        "question": "A DFlash block's rows see the target's features of every position BEFORE the anchor, but not "
        "the anchor's own. Why?",
        "options": options_of(
            "quick-10",
            [
                "the target has not yet run on the anchor, so at inference its feature does not exist",
                "bidirectional attention inside a block cannot read the block's first position",
                "to save memory: the anchor's feature would double the drafter's cache",
                "the anchor's feature would let the drafter copy the answer, so training would be too easy",
            ],
        ),
        "hint": "which target pass would have produced the anchor's feature, and has it happened yet? (section "
        "4)",
    },
    11: {
        "question": "Under sampling, DFlash 2's walk draws row t from q_t, whose candidate scores S_t depend on the "
        "token the walk drew for row t - 1, and hands q_t to verification. Why is that still exactly "
        "lossless?",
        "options": options_of(
            "quick-11",
            [
                "q_t is renormalised over the candidates, which makes any proposal distribution exact",
                "the 16 candidates always contain the target's token, so nothing is ever rejected",
                "it is not exact: like Medusa's typical acceptance, the selector is a lossy option",
                "q_t depends only on the context and rows 1..t-1, exactly what row t is judged after",
            ],
        ),
        "hint": "what must p_t and q_t be conditioned on in chapter 03's rule, and what has the walk seen when "
        "it draws row t? (section 3)",
    },
    12: {
        "question": "A drafter gives 3.5x over plain decoding with one request at a time, but 1.8x with 32 requests "
        "decoded together, on the same GPU. What changed most?",
        "options": options_of(
            "quick-12",
            [
                "the target's pass is still memory-bound, but the drafter's passes grow with the batch",
                "the drafter's acceptance: requests decoded in a batch are harder to predict",
                "rejection sampling is exact only for one request at a time, so batches verify less",
                "at 32 x 16 tokens the target's pass is compute-bound, so verifying a block costs time",
            ],
        ),
        "hint": "what does a pass cost as tokens per pass grow, and where on that curve are 32 x 16 tokens? "
        "(section 7)",
    },
}


def quick_question(chapter: int) -> None:
    """Print chapter `chapter`'s quick-check question (and its options)."""
    q = QUICK[chapter]
    print(q["question"])
    show_options(q.get("options", {}))


def check_quick(chapter: int, answer=...) -> str:
    """answer: the letter of an option, or a number, for chapter `chapter`'s quick-check question."""
    q, name = QUICK[chapter], f"quick-check {chapter:02d}"
    if answer is ... or answer is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — set your answer and run the cell again")
        return NOT_ATTEMPTED
    key = f"q{chapter:02d}"

    def cases(_):
        if "options" in q:
            expect_choice(answer, q["options"], _expected, key, q["hint"])
        else:
            got = as_float(answer, "the answer")
            expect(_expected.right(key, got), _expected.hint(key, got) or f"{got:g} is not it — {q['hint']}")

    return verdict(name, answer, cases)
