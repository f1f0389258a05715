"""The method registry: one entry per speculative-decoding method (hand-written support code).

    make_proposer("chain:4", target, draft)      # a fresh proposer for one generation
    make_proposer("tree:3-2-1", target, draft)
    make_proposer("medusa:16", target)           # loads the zoo's trained heads for this target
    make_proposer("mtp-sequential:2", target, weights="random")   # untrained, for any target (tests)
    make_proposer("eagle2:24", target)           # EAGLE-2's dynamic tree of 24 nodes (depth 8)
    make_proposer("eagle2:24+topk", target)      # the same with top-k children (point masses) at T > 0
    make_proposer("eagle3:12-4", target)         # EAGLE-3 in a tree of 12 nodes, at most 4 deep
    make_proposer("ngram:8", target)             # prompt lookup: no model, copies what followed before
    make_proposer("eagle3", target)              # EAGLE-3's drafter in EAGLE-2's tree (16 nodes)

A spec is `NAME[:ARG]`. Every method the course builds is one `register(...)` call below, and the entry
carries everything the rest of the library reads about it: the contract test runs on every entry (its
flags `branches`, `reranks` and `samples` pick the checks that need them) and checks its drafts against
the proposer's own fresh reference, the `fresh_draft` method beside its class (chapter 02's Proposer);
the zoo trainer's `--stage` choices and its check that every shipped weight has a trainer come from
`zoo_stage`; the benchmark's default methods from `bench`; the zoo's messages from `zoo_weights`. So a new
method is its proposer class and one `register(...)` call, here or in a file of its own that is imported
(tests/test_registry.py adds a toy method that way). Builders import their chapter lazily, so a half-finished chapter never breaks the
methods of the chapters before it.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specdec_lib import hf, zoo

WEIGHTS = ("zoo", "random")


@dataclass(frozen=True)
class Method:
    """One registered method. `build(arg, target, draft, weights)` returns a fresh proposer (with its
    contract reference, a `fresh_draft` method: chapter 02's Proposer); `arg` is the text after the colon
    ("" when absent)."""

    name: str
    build: Callable
    chapter: int
    summary: str
    example: str  # a spec that the contract test uses
    needs_draft: bool = False  # a separate draft model (chain, tree)
    zoo_weights: str | None = None  # the trained weights it loads from the zoo (None: no weights)
    zoo_stage: str | None = None  # the `zoo_train --stage` that trains them
    bench: tuple[str, ...] = ()  # the specs `python -m specdec_lib.bench` runs by default
    modes: tuple[str, ...] = ()  # suffixes "+MODE" naming its other modes; the contract test runs each
    law_example: str | None = None  # a spec small enough to enumerate every random draw (None: example)
    branches: bool = False  # its trees have siblings, drawn together from one distribution when sampling
    reranks: bool = False  # it grows a dynamic tree and keeps its best nodes (EAGLE-2's re-rank)
    samples: bool = False  # sampling, its drafts are draws reported with their q (not point masses)

    @property
    def examples(self) -> tuple[str, ...]:
        """The specs the greedy contract runs: the example, then the example in each named mode."""
        return (self.example, *(f"{self.example}+{mode}" for mode in self.modes))

    @property
    def law_examples(self) -> tuple[str, ...]:
        """The specs the exact sampling law runs: every random draw is enumerated, and a tree that draws
        k of 8 tokens without replacement at each of n nodes has up to (8!/(8-k)!)^n outcomes, so trees
        use small ones here (the same code, fewer slots)."""
        spec = self.law_example or self.example
        return (spec, *(f"{spec}+{mode}" for mode in self.modes))


METHODS: dict[str, Method] = {}


def register(
    name: str,
    build: Callable,
    *,
    chapter: int,
    summary: str,
    example: str | None = None,
    needs_draft: bool = False,
    zoo_weights: str | None = None,
    zoo_stage: str | None = None,
    bench: tuple[str, ...] = (),
    modes: tuple[str, ...] = (),
    law_example: str | None = None,
    branches: bool = False,
    reranks: bool = False,
    samples: bool = False,
) -> Method:
    """Add a method (or replace one of the same name) and return its entry.

    build(arg, target, draft, weights) -> a fresh proposer, whose method fresh_draft(target, tokens, tree)
    -> [(logits, rank)] per node is the contract test's reference (chapter 02's Proposer); zoo_weights
    and zoo_stage: the zoo weights it loads and the zoo_train stage that trains them (both or neither);
    bench: the specs the benchmark runs by default (none: only when asked); modes: the "+MODE" suffixes
    its specs accept (e.g. "topk" for "eagle2:16+topk"), each covered by the contract test; law_example: a
    smaller spec for the exact enumeration of the sampling law (default: example); branches: its trees
    have siblings (the contract checks their q is conditioned on the elder siblings); reranks: it keeps
    the best of a grown tree's nodes (the contract checks that a re-rank of the drawn tokens is caught);
    samples: when sampling, its drafts carry q, the distribution each was drawn from (the contract checks
    that a proposer lying about q is caught, and that the flag says what the proposer does)."""
    if not name or ":" in name:
        raise ValueError(f"a method name is a non-empty word without ':', got {name!r}")
    if not callable(build):
        raise ValueError(f"{name}: build must be a callable")
    if (zoo_weights is None) != (zoo_stage is None):
        raise ValueError(f"{name}: zoo weights need the zoo_train stage that trains them, and only they")
    if reranks and not branches:
        raise ValueError(f"{name}: a re-ranked tree has siblings (branches=True)")
    if law_example is not None and law_example.partition(":")[0] != name:
        raise ValueError(f"{name}: its law_example must be its own spec, got {law_example!r}")
    bench = tuple(bench)
    if any(spec.partition(":")[0] != name for spec in bench):
        raise ValueError(f"{name}: its bench specs must be its own ({name} or {name}:ARG), got {bench}")
    METHODS[name] = Method(
        name,
        build,
        chapter,
        summary,
        example or name,
        needs_draft,
        zoo_weights,
        zoo_stage,
        bench,
        tuple(modes),
        law_example,
        branches,
        reranks,
        samples,
    )
    return METHODS[name]


def bench_defaults() -> list[str]:
    """The specs the benchmark runs when no --methods are given, in registry order."""
    return [spec for m in METHODS.values() for spec in m.bench]


def zoo_stages() -> dict[str, list[str]]:
    """{zoo_train stage: the zoo weights its registered methods load}, in registry order."""
    stages: dict[str, list[str]] = {}
    for m in METHODS.values():
        if m.zoo_stage is not None and m.zoo_weights not in stages.setdefault(m.zoo_stage, []):
            stages[m.zoo_stage].append(m.zoo_weights)
    return stages


def make_proposer(
    spec: str,
    target,
    draft=None,
    weights: str = "zoo",
    static_caches: int | None = None,
    compile: bool = False,
):
    """A fresh proposer for `spec` ("NAME" or "NAME:ARG", e.g. "chain:4", "tree:3-2-1", "medusa:16").

    weights="zoo" loads the zoo's trained weights for `target` (once per target; later calls reuse
    them); weights="random" builds the method's modules untrained, for any target (tests, training).
    static_caches=N preallocates the drafter's caches for N positions (they grow if a text needs more):
    the fast path's fixed shapes (issue 50). Methods with no drafter cache (prompt lookup, Medusa) refuse it.
    compile=True compiles the drafting passes: a draft model's through `hf.CompiledRunner` (fixed shapes),
    a feature drafter's forward and logits with dynamic shapes (its passes change length every tree level);
    the proposer's own loop stays eager Python. Compile the target with `generate(..., compile=True)`."""
    if not isinstance(spec, str):
        raise ValueError(f"a method spec is a string such as 'chain:4', got {spec!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    name, _, arg = spec.partition(":")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r} in spec {spec!r}; registered: {', '.join(METHODS)}")
    method = METHODS[name]
    if method.needs_draft and draft is None:
        raise ValueError(f"method {name!r} needs a draft model: make_proposer({spec!r}, target, draft)")
    try:
        proposer = method.build(arg, target, draft, weights)
    except zoo.ZooUnavailableError as e:  # missing weights: name the stage that trains them
        stage = _stage_of(e.weights)
        if stage is None:  # not missing weights (an unavailable preset), or weights no method names
            raise
        raise zoo.ZooUnavailableError(
            f"{e}; {e.weights!r} is trained by `python -m specdec_lib.zoo_train --stage {stage}`", e.weights
        ) from e
    if static_caches is not None:
        if isinstance(static_caches, bool) or not isinstance(static_caches, int) or static_caches < 1:
            raise ValueError(f"static_caches is a number of positions (an int >= 1), got {static_caches!r}")
        if not hasattr(proposer, "cache_capacity"):
            raise ValueError(f"method {name!r} keeps no drafter cache to preallocate (static_caches)")
        proposer.cache_capacity = static_caches
    if compile:
        _compile_drafting(proposer, name)
    return proposer


def _stage_of(weights: str | None) -> str | None:
    """The `zoo_train` stage that trains the zoo's `weights` (None: no registered method loads them). The
    registry is where that is known, so the zoo's own error for missing weights (the zoo imports no method)
    gets its stage here."""
    return next((st for st, names in zoo_stages().items() if weights in names), None)


COMPILED_CALLS = ("forward", "logits")  # a feature drafter's per-level calls


def _compile_drafting(proposer, name: str) -> None:
    if hasattr(proposer, "compiled"):  # a draft model: its runner pads to fixed shapes
        proposer.compiled = True
    elif isinstance(getattr(proposer, "drafter", None), torch.nn.Module):
        # A shallow copy shares the weights: the zoo's cached drafter itself stays eager for other proposers.
        drafter = copy.copy(proposer.drafter)
        for call in COMPILED_CALLS:
            setattr(drafter, call, hf.torch_compile(getattr(drafter, call), dynamic=True))
        proposer.drafter = drafter
    else:
        raise ValueError(f"method {name!r} has no draft model or feature drafter to compile (compile=True)")


# Trained modules loaded from the zoo, per target object (dropped with the target).
_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _zoo_module(target, name: str, load: Callable):
    """`load(target, preset)` -> (module, card), once per target and name: the weights trained for the
    preset `target` was loaded from (zoo.preset_of; a model from elsewhere: the tiny zoo's)."""
    per_target = _LOADED.setdefault(target, {})
    if name not in per_target:
        per_target[name] = load(target, zoo.preset_of(target) or "tiny-code")
    return per_target[name]


def _sibling_mode(arg: str, name: str) -> tuple[str, str]:
    """Split "ARG+topk" into (ARG, mode): a tree method's children are drawn from the drafter's
    distribution when sampling ("without_replacement", the default) or are its top-k picks ("+topk",
    point masses: the original papers' rule). Greedy decoding takes the top k either way."""
    arg, plus, mode = arg.partition("+")
    if plus and mode != "topk":
        raise ValueError(f"{name} takes +topk for deterministic top-k children, got {'+' + mode!r}")
    return arg, "topk" if plus else "without_replacement"


def _int_arg(arg: str, default: int, what: str) -> int:
    if not arg:
        return default
    if not arg.isdigit() or int(arg) < 1:
        raise ValueError(f"{what} must be a positive integer, got {arg!r}")
    return int(arg)


# ---------------------------------------------------------------- the course's methods, by chapter
def _chain(arg, target, draft, weights):
    from specdec_lib.speculative import DraftModelProposer

    return DraftModelProposer(draft, _int_arg(arg, 4, "chain:K"))


def _tree(arg, target, draft, weights):
    from specdec_lib.trees import TreeDraftProposer

    arg, mode = _sibling_mode(arg, "tree:A-B-C")
    shape = tuple(_int_arg(b, 0, "tree:A-B-C branching") for b in (arg or "3-2-1").split("-"))
    return TreeDraftProposer(draft, shape, mode)


def _medusa(arg, target, draft, weights):
    from specdec_lib.medusa import MedusaHeads, MedusaProposer, load_medusa, medusa_choices

    arg, mode = _sibling_mode(arg, "medusa:NODES")
    nodes = _int_arg(arg, 16, "medusa:NODES")
    if weights == "random":  # rank r at every head treated as 0.5 ** (r + 1) likely: a small tree
        heads, card = (
            MedusaHeads.untrained(target),
            {"validation_accuracy": {"top_i": [[0.5 ** (r + 1) for r in range(4)]] * 3}},
        )
    else:
        heads, card = _zoo_module(target, "medusa", load_medusa)
    accuracy = torch.tensor(card["validation_accuracy"]["top_i"])
    return MedusaProposer(heads, medusa_choices(accuracy, nodes), mode)


def _mtp(kind: str):
    def build(arg, target, draft, weights):
        from specdec_lib.mtp import IndependentMTP, MTPProposer, SequentialMTP, load_mtp

        if weights == "random":  # blocks start as copies of the target's last layer: a fair untrained start
            mtp = (
                IndependentMTP(target, num_heads=3)
                if kind == "independent"
                else SequentialMTP(target, depth=3)
            )
        else:
            mtp, _ = _zoo_module(target, f"mtp-{kind}", lambda t, p: load_mtp(t, kind, p))
        return MTPProposer(mtp.eval(), _int_arg(arg, 0, f"mtp-{kind}:DEPTH") or None)

    return build


# Untrained drafters' sampled-slot worth (chapter 08's slot_acceptance has this shape): a first draw
# worth more in the bins of a peaked q, later draws less and less. Only the tree's shape depends on it.
MADE_UP_SLOT_ACCEPTANCE = [[(0.5 + b / 20) * 0.3**j for j in range(8)] for b in range(10)]


def _slot_acceptance(card):
    """The sampled slots' acceptance table a card holds (chapter 08), or None (then point-mass worth)."""
    return card.get("calibration", {}).get("sampled_slot_acceptance", {}).get("acc")


def _eagle_drafter(target, weights):
    from specdec_lib.eagle import EagleDrafter, load_eagle

    if weights == "random":  # untrained (fc passes the feature through): trees of made-up odds
        return EagleDrafter(target).eval(), {
            "rank_acceptance": {"acc": [[0.5 ** (r + 1) for r in range(4)]] * 4},
            "calibration": {"sampled_slot_acceptance": {"acc": MADE_UP_SLOT_ACCEPTANCE}},
        }
    return _zoo_module(target, "eagle", lambda t, p: load_eagle(t, preset=p))


def _eagle(arg, target, draft, weights):
    from specdec_lib.eagle import EagleProposer, eagle_choices

    arg, mode = _sibling_mode(arg, "eagle:NODES")
    nodes = _int_arg(arg, 16, "eagle:NODES")
    drafter, card = _eagle_drafter(target, weights)
    acc = torch.tensor(card["rank_acceptance"]["acc"])  # measured on the target's greedy text
    return EagleProposer(drafter, eagle_choices(acc, nodes), mode)


def _tree_budget(arg: str, name: str) -> dict:
    """EAGLE-2's tree budget from "TOTAL" or "TOTAL-DEPTH" (default 16 nodes, depth 8)."""
    total, dash, depth = arg.partition("-")
    if dash and not (total and depth):
        raise ValueError(f"{name}:TOTAL-DEPTH needs both numbers, got {arg!r}")
    return {
        "total_tokens": _int_arg(total, 16, f"{name}:TOTAL[-DEPTH]"),
        "depth": _int_arg(depth, 8, f"{name}:TOTAL[-DEPTH]"),
    }


def _eagle2(arg, target, draft, weights):
    from specdec_lib.eagle2 import Eagle2Proposer

    arg, mode = _sibling_mode(arg, "eagle2:TOTAL-DEPTH")
    budget = _tree_budget(arg, "eagle2")  # a bad spec fails before any weights load
    drafter, card = _eagle_drafter(target, weights)
    greedy_t = card.get("calibration", {}).get("greedy_temperature", 1.0)  # fitted by the zoo (chapter 08)
    slots = _slot_acceptance(card)
    return Eagle2Proposer(drafter, greedy_temperature=greedy_t, mode=mode, slot_acceptance=slots, **budget)


def _eagle3(arg, target, draft, weights):
    from specdec_lib.eagle3 import Eagle3Drafter, Eagle3Proposer, load_eagle3

    arg, mode = _sibling_mode(arg, "eagle3:TOTAL-DEPTH")
    budget = _tree_budget(arg, "eagle3")
    if weights == "random":
        drafter, greedy_t, slots = Eagle3Drafter.untrained(target), 1.0, MADE_UP_SLOT_ACCEPTANCE
    else:
        drafter, card = _zoo_module(target, "eagle3", load_eagle3)
        greedy_t, slots = card["calibration"]["greedy_temperature"], _slot_acceptance(card)
    return Eagle3Proposer(  # chapter 08's tree
        drafter, greedy_temperature=greedy_t, mode=mode, slot_acceptance=slots, **budget
    )


def _dflash(arg, target, draft, weights):
    from specdec_lib.dflash import DFlashDrafter, DFlashProposer, load_dflash

    block = _int_arg(arg, 16, "dflash:BLOCK")
    if weights == "random":
        drafter = DFlashDrafter.untrained(target)
    else:
        drafter, _ = _zoo_module(target, "dflash", load_dflash)
    return DFlashProposer(drafter, block_size=block)


def _dflash2(arg, target, draft, weights):
    from specdec_lib.dflash2 import DFlash2Drafter, DFlash2Proposer, load_dflash2

    # "dflash2:B" is DFlash 2 with both parts; "dflash2:B+selector" / "dflash2:B+mixing" the ablations
    block_arg, _, part = arg.partition("+")
    block = _int_arg(block_arg, 16, "dflash2:BLOCK[+selector|+mixing]")
    if part not in ("", "selector", "mixing"):
        raise ValueError(f"dflash2 takes +selector or +mixing for one part alone, got {arg!r}")
    mixing, selector = part != "selector", part != "mixing"
    if weights == "random":
        drafter = DFlash2Drafter.untrained(target, mixing=mixing, selector=selector)
    else:
        load = lambda t, p: load_dflash2(t, p, mixing=mixing, selector=selector)  # noqa: E731
        drafter, _ = _zoo_module(target, f"dflash2+{part or 'both'}", load)
    return DFlash2Proposer(drafter, block_size=block)


def _ngram(arg, target, draft, weights):
    from specdec_lib.ngram import PromptLookupProposer

    k, dash, n = arg.partition("-")
    if dash and not (k and n):
        raise ValueError(f"ngram:K-N needs both numbers, got {arg!r}")
    return PromptLookupProposer(_int_arg(k, 8, "ngram:K[-N]"), _int_arg(n, 3, "ngram:K[-N]"))


register(
    "chain",
    _chain,
    chapter=2,
    summary="a separate draft model drafts a chain of K tokens (classic speculative decoding)",
    example="chain:3",
    needs_draft=True,
    bench=("chain:4", "chain:2"),
    samples=True,
)
register(
    "tree",
    _tree,
    chapter=4,
    summary="a draft model drafts a fixed-shape tree, one draft pass per level (SpecInfer-style); sampling, "
    "children are drawn without replacement from the draft (tree:A-B-C+topk: its top-k picks)",
    example="tree:2-2-1",
    needs_draft=True,
    bench=("tree:3-2-1",),
    modes=("topk",),
    law_example="tree:2-1",
    branches=True,
    samples=True,
)
register(
    "medusa",
    _medusa,
    chapter=5,
    summary="Medusa heads on the target's last hidden state draft a sparse tree of NODES nodes; sampling, each "
    "head's tokens are drawn without replacement (medusa:NODES+topk: its top-k picks)",
    example="medusa:16",
    zoo_weights="medusa",
    zoo_stage="heads",
    bench=("medusa:16",),
    modes=("topk",),
    law_example="medusa:4",
    branches=True,
    samples=True,
)
register(
    "mtp-independent",
    _mtp("independent"),
    chapter=6,
    summary="independent multi-token-prediction heads (Gloeckle et al.) draft a chain",
    zoo_weights="mtp-independent",
    zoo_stage="heads",
    bench=("mtp-independent",),
    samples=True,
)
register(
    "mtp-sequential",
    _mtp("sequential"),
    chapter=6,
    summary="sequential MTP modules (DeepSeek-V3) draft a chain, each depth reading the one before",
    zoo_weights="mtp-sequential",
    zoo_stage="heads",
    bench=("mtp-sequential",),
    samples=True,
)
register(
    "eagle",
    _eagle,
    chapter=7,
    summary="EAGLE: a one-layer drafter on the target's features drafts a static tree of NODES nodes; sampling, "
    "children are drawn without replacement (eagle:NODES+topk: its top-k picks)",
    example="eagle:8",
    zoo_weights="eagle",
    zoo_stage="eagle",
    bench=("eagle:16",),
    modes=("topk",),
    law_example="eagle:4",
    branches=True,
    samples=True,
)
register(
    "eagle2",
    _eagle2,
    chapter=8,
    summary="EAGLE-2: the same drafter grows a dynamic tree, keeping the TOTAL most promising child slots "
    "(eagle2:TOTAL-DEPTH also caps the depth, default 8); sampling, each slot is drawn without replacement "
    "and ranked by its measured acceptance, from the card (+topk: the drafter's top-k picks, point masses)",
    example="eagle2:8",
    zoo_weights="eagle",
    zoo_stage="eagle",
    bench=("eagle2:16", "eagle2:16+topk"),
    modes=("topk",),
    law_example="eagle2:3-2",
    branches=True,
    reranks=True,
    samples=True,
)
register(
    "eagle3",
    _eagle3,
    chapter=9,
    summary="EAGLE-3: a token-predicting drafter on three fused target layers, trained with training-time "
    "test, grows EAGLE-2's dynamic tree of TOTAL nodes (eagle3:TOTAL-DEPTH: at most DEPTH deep; +topk as eagle2's)",
    example="eagle3:8",
    zoo_weights="eagle3",
    zoo_stage="eagle3",
    bench=("eagle3:16", "eagle3:12-4", "eagle3:16+topk"),
    modes=("topk",),
    law_example="eagle3:3-2",
    branches=True,
    reranks=True,
    samples=True,
)
register(
    "dflash",
    _dflash,
    chapter=10,
    summary="DFlash: a bidirectional drafter reading the target's features through its keys and values "
    "fills a whole block [anchor, MASK, ...] in ONE pass, drafting a chain of BLOCK - 1 tokens",
    example="dflash:8",
    zoo_weights="dflash",
    zoo_stage="dflash",
    bench=("dflash:8", "dflash:16", "dflash:4"),  # chapter 10 compares the block sizes
    samples=True,
)
register(
    "dflash2",
    _dflash2,
    chapter=11,
    summary="DFlash 2: DFlash's one-pass block with local mixing (two-tap convolutions inside the block) and a "
    "path selector that walks each row's top-16 candidates from the anchor; dflash2:B+selector and "
    "dflash2:B+mixing keep one part only (the ablation)",
    example="dflash2:4",
    zoo_weights="dflash2",
    zoo_stage="dflash2",
    bench=("dflash2:16", "dflash2:16+selector"),
    modes=("selector", "mixing"),
    samples=True,
)
register(
    "ngram",
    _ngram,
    chapter=12,
    summary="prompt lookup: copy the K tokens that followed the latest earlier occurrence of the text's last "
    "N (default 3, then fewer) tokens; no model at all",
    example="ngram:4",
    bench=("ngram:8",),
)
