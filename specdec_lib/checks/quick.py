"""Quick-checks: one short conceptual question per chapter, multiple choice or a number. Hand-written;
each chapter's exercise section shows its question with `quick_question(n)` and checks the answer with
`check_quick(n, answer)`, which prints and returns "correct", "incorrect" (with a hint) or
"not attempted", and never raises."""

from __future__ import annotations

from specdec_lib.checks._core import _ICON, NOT_ATTEMPTED, as_float, expect, verdict

QUICK = {
    1: {
        "question": "A 7B model in fp16 decodes at batch 1 on a GPU, far below its ridge point. One forward "
        "pass scores 1 token. About how long does one pass take if it scores 4 tokens instead?",
        "options": {
            "a": "about 4 times as long: four times the arithmetic",
            "b": "about as long: the time is spent reading the weights, once per pass either way",
            "c": "about a quarter as long: the work is spread over four tokens",
            "d": "about twice as long: attention grows with the square of the tokens",
        },
        "answer": "b",
        "hint": "what does the GPU spend a batch-1 pass waiting for? (section 7)",
    },
    2: {
        "question": "Each drafted token is accepted with probability 0.8, independently of the others, and "
        "a round stops at the first rejection. With k = 4 drafted tokens, what is the expected number of "
        "tokens one round commits (tau)? Answer with a number.",
        "answer": (1 - 0.8**5) / (1 - 0.8),
        "traps": {
            (1 - 0.8**5) / (1 - 0.8) - 1: "the target always adds one token of its own (the bonus or the "
            "correction): count it",
            0.8 * 4 + 1: "the round stops at the first rejection: depth d is reached only if depths "
            "1..d-1 were all accepted",
            0.8 * 4: "the round stops at the first rejection, and the target adds one token of its own",
        },
        "hint": "sum the probabilities that depth d is accepted, d = 1..k, then add the target's token",
    },
    3: {
        "question": "Target p = (0.6, 0.3, 0.1) and draft q = (0.3, 0.3, 0.4) over three tokens. What is "
        "the probability that a token drafted from q is accepted? Answer with a number.",
        "answer": 0.7,
        "traps": {
            0.3: "that is the total variation distance, the probability of a REJECTION",
            0.6: "average over the draft's choice: sum over x of q(x) min(1, p(x) / q(x))",
        },
        "hint": "beta = sum over x of min(p(x), q(x))",
    },
    4: {
        "question": "What does a draft tree buy over a chain of the same depth, and what does it cost?",
        "options": {
            "a": "more accepted tokens per target pass, paid for by more positions in the one "
            "verification pass (cheap only while the hardware has spare compute)",
            "b": "fewer target passes at no cost at all",
            "c": "exactness under sampling, which a chain does not have",
            "d": "a smaller KV cache, paid for by a longer prefill",
        },
        "answer": "a",
        "hint": "a chain stops at the first rejection even when the draft's second guess was right; "
        "what does the target's pass have to score to try that second guess too?",
    },
    5: {
        "question": "Medusa's typical acceptance can be faster than exact verification. What do you give up?",
        "options": {
            "a": "nothing: it accepts the same tokens, only faster",
            "b": "greedy equality: greedy outputs change",
            "c": "exactness under sampling: sampled outputs no longer follow the target's distribution "
            "(under greedy decoding there is no difference)",
            "d": "the KV cache: it has to recompute the prefix every round",
        },
        "answer": "c",
        "hint": "typical acceptance accepts a token whose probability is merely high enough; compare what "
        "it keeps with min(1, p / q) (section on typical acceptance)",
    },
    6: {
        "question": "What does a sequential (DeepSeek-V3) MTP module at depth k read that an independent "
        "head at depth k does not?",
        "options": {
            "a": "the target's logits at depth k",
            "b": "the previous depth's hidden state and the embedding of the token one step further "
            "ahead: a causal chain, so depth k knows which token depth k - 1 stands for",
            "c": "a larger share of the target's layers",
            "d": "nothing: they differ only in how they are trained",
        },
        "answer": "b",
        "hint": "why does the independent heads' acceptance fall faster with depth? what can't a head know?",
    },
    7: {
        "question": "Which LM head turns EAGLE's guessed feature into draft tokens, and why that one?",
        "options": {
            "a": "a head trained with the drafter, because the target's head is too large",
            "b": "the target's own frozen head: the guess is trained to BE the target's next feature, "
            "so the target's head reads it as the target would",
            "c": "the draft model's head from chapter 02",
            "d": "no head: EAGLE compares features with the target's directly",
        },
        "answer": "b",
        "hint": "what space does the drafter's output live in, and what reads that space in the target?",
    },
    8: {
        "question": "EAGLE-2 grows its tree where the drafter is confident. Why is the drafter's confidence "
        "a usable stand-in for the acceptance rate?",
        "options": {
            "a": "the target tells the drafter its probabilities during drafting",
            "b": "trained on the target's soft labels, the drafter is calibrated: a token it gives "
            "probability c is accepted about a fraction c of the time (after a temperature fit for greedy)",
            "c": "confidence and acceptance are equal by definition",
            "d": "the tree is verified twice, once per confidence",
        },
        "answer": "b",
        "hint": "look at the reliability diagrams of section 1: which curve lies on the diagonal?",
    },
    9: {
        "question": "EAGLE-3's drafter can only propose its 2048 most frequent tokens. What does that cost?",
        "options": {
            "a": "exactness under sampling: the other tokens can never be emitted",
            "b": "some acceptance (a token it cannot propose cannot be accepted), never exactness: the "
            "target's own draws still supply every token",
            "c": "nothing at all",
            "d": "greedy equality with plain decoding",
        },
        "answer": "b",
        "hint": "who writes the token when every drafted candidate is rejected? (section 3)",
    },
    10: {
        "question": "A DFlash block's rows see the target's features of every position BEFORE the anchor, but "
        "not the anchor's own. Why?",
        "options": {
            "a": "to save memory in the drafter's cache",
            "b": "the anchor is the pending token: the target has not run on it yet, so at inference its "
            "feature does not exist, and training must not show what inference cannot have",
            "c": "the anchor's feature would make the drafter lossy",
            "d": "bidirectional attention cannot read the anchor's position",
        },
        "answer": "b",
        "hint": "which target pass would have produced the anchor's feature, and has it happened yet? "
        "(section 4)",
    },
    11: {
        "question": "Under sampling, DFlash 2's walk draws row t from q_t, whose candidate scores S_t depend on the "
        "token the walk drew for row t - 1, and hands q_t to verification. Why is that still exactly lossless?",
        "options": {
            "a": "it is not: the selector is a lossy option, like Medusa's typical acceptance",
            "b": "row t is judged only after rows 1 .. t - 1 were accepted, and q_t was computed from exactly "
            "those tokens and the context, never from a later row: it is the distribution x_t was drawn from",
            "c": "because the candidates are the drafter's top 16, which always contain the target's token",
            "d": "because sampling is done greedily inside the walk, so q_t is a point mass",
        },
        "answer": "b",
        "hint": "what must p_t and q_t be conditioned on in chapter 03's rule, and what has the walk seen when "
        "it draws row t? (section 3)",
    },
    12: {
        "question": "A DFlash model card measures 3.5x over plain decoding with one request at a time, but 1.8x "
        "with 32 requests decoded together, on the same GPU and the same drafter. What changed most?",
        "options": {
            "a": "the drafter's acceptance: batched requests are harder to predict",
            "b": "the target's pass is no longer memory-bound at 32 x 16 tokens: the spare compute that made "
            "verifying a block almost free is now spent on the batch itself, so verification costs real time",
            "c": "rejection sampling is only exact for one request at a time",
            "d": "the KV cache of the drafter no longer fits in memory",
        },
        "answer": "b",
        "hint": "what does a pass cost as tokens per pass grow, and where on that curve are 32 x 16 tokens? "
        "(section 7)",
    },
}


def quick_question(chapter: int) -> None:
    """Print chapter `chapter`'s quick-check question (and its options)."""
    q = QUICK[chapter]
    print(q["question"])
    for letter, text in q.get("options", {}).items():
        print(f"  ({letter}) {text}")


def check_quick(chapter: int, answer=...) -> str:
    """answer: the letter of an option, or a number, for chapter `chapter`'s quick-check question."""
    q, name = QUICK[chapter], f"quick-check {chapter:02d}"
    if answer is ... or answer is None:
        print(f"{_ICON[NOT_ATTEMPTED]} {name}: {NOT_ATTEMPTED} — set your answer and run the cell again")
        return NOT_ATTEMPTED

    def cases(_):
        if "options" in q:
            letters = sorted(q["options"])
            expect(isinstance(answer, str), f"answer with one letter among {letters}")
            letter = answer.strip().lower().strip("()")
            expect(letter in letters, f"answer with one letter among {letters}")
            expect(letter == q["answer"], f"({letter}) is not it — {q['hint']}")
        else:
            got = as_float(answer, "the answer")
            for value, trap in q.get("traps", {}).items():
                expect(abs(got - value) > 1e-3, trap)
            expect(abs(got - q["answer"]) <= 1e-3, f"{got:g} is not it — {q['hint']}")

    return verdict(name, answer, cases)


REFERENCE = {chapter: q["answer"] for chapter, q in QUICK.items()}
