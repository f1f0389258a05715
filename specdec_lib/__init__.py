"""specdec_lib: the library the speculative-decoding course builds, one module per chapter.

Generated from notebooks (edit the notebook, then `make export`):
    autoregressive  chapter 01  sampling controls, KV-cached decoding, forward-pass cost
    speculative     chapter 02  the decoding engine `decode` (prefill, verify_round, commit), DraftTree,
                                Verdict, greedy verification, DraftModelProposer
    rejection       chapter 03  speculative sampling: acceptance, residual, chain verification
    trees           chapter 04  draft trees: ancestor mask, tree drafting, multi-branch verification
    medusa          chapter 05  Medusa heads, the Medusa tree, typical acceptance (lossy, opt-in)
    training        chapter 05  the one training loop for proposers on a frozen target
    mtp             chapter 06  multi-token prediction: independent heads, sequential modules
    layers          chapter 06  the drafter toolkit: RMSNorm, rotary, a decoder block with its own KV cache
    eagle           chapter 07  the EAGLE drafter (features + token), its static tree, rank acceptance
    eagle2          chapter 08  the dynamic tree, confidence calibration
    eagle3          chapter 09  fused taps, a reduced draft vocabulary, training-time test
    dflash          chapter 10  the block drafter with injected target context, its training mask and loss
    dflash2         chapter 11  local mixing (two-tap convolutions) and the path selector, their losses
    recap           chapter 12  the benchmark's report and plots
    ngram           chapter 12  prompt lookup (a free drafter)
Hand-written support: methods (the method registry, `make_proposer`), zoo (offline models), hf (the
transformers adapter, and the target runners: `hf.Runner`, transformers' growing cache, the default;
`hf.StaticRunner`, preallocated and written in place; `hf.CompiledRunner`, its passes compiled), checks (exercise checkers), bench (the benchmark harness), _export (the notebook exporter).

Every public name of these modules (each generated module's `__all__`) is also `specdec_lib.NAME`,
imported on first use (the table `_EXPORTS` below).

`specdec_lib.generate` is the one public entry point: the chapter-02 engine (`speculative.decode`) with
the verifier chosen for you (greedy matching at temperature 0, lossless rejection sampling otherwise),
or the rule you pass as `verify`.
"""

from __future__ import annotations

import ast as _ast
from pathlib import Path as _Path

# The supported transformers and its check: a module of their own (importing nothing of specdec_lib), which hf
# imports too; here they are checked against the installed release and kept as package names.
from specdec_lib._supported import SUPPORTED_TRANSFORMERS, check_transformers_version  # noqa: F401

__version__ = "0.1.0"


def _installed_transformers() -> str | None:
    # The installed release, read from its metadata: importing transformers here would slow down every
    # `import specdec_lib`.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return None


check_transformers_version(_installed_transformers())

# Names are resolved lazily, so a half-finished chapter never breaks the chapters before it, and
# `import specdec_lib` imports no chapter (nor torch): `specdec_lib.NAME` imports NAME's module on first use.
#
# _EXPORTS is every generated module's `__all__`, in chapter order (specdec_lib/_names.py, which `make
# export` writes from the notebooks, so the table is never typed by hand), plus the public names of two
# hand-written modules. It is read as a literal, importing nothing, so a chapter that does not even parse
# yet cannot take an earlier chapter's names down with it.
_GENERATED = _ast.literal_eval(
    _Path(__file__).with_name("_names.py").read_text("utf-8").split("EXPORTS = ", 1)[1]
)

_EXPORTS = {
    **{module: " ".join(names) for module, names in _GENERATED.items()},
    # hand-written (no __all__)
    "methods": "make_proposer register METHODS",
    "zoo": "load_pair heldout_prompts",
}
# `generate` (below) is this file's own and no chapter exports that name: chapter 02's engine is
# `decode` (tests/test_engine_api.py checks that no chapter brings back a second `generate`).


def _lazy_names(exports: dict[str, str]) -> dict[str, str]:
    """{name: module} for every exported name, leaving out any name that two modules export:
    `specdec_lib.NAME` would have to pick one silently, so such a name is imported from its module.
    (No name is exported twice today; the test in tests/test_engine_api.py lists any that appears.)"""
    owners: dict[str, list[str]] = {}
    for module, names in exports.items():
        for name in names.split():
            owners.setdefault(name, []).append(module)
    return {name: mods[0] for name, mods in owners.items() if len(mods) == 1}


_NAMES = _lazy_names(_EXPORTS)


def __getattr__(name):
    if name in _NAMES:
        import importlib

        return getattr(importlib.import_module(f"specdec_lib.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'specdec_lib' has no attribute {name!r}")


def __dir__():
    # dir() and tab completion list the lazy names too, without importing their chapters.
    return sorted(set(globals()) | set(_NAMES))


def generate(
    target,
    prompt_ids,
    max_new_tokens: int,
    proposer=None,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    eos_token_id: int | None = None,
    verify=None,
    on_round=None,
    timed: bool = False,
    compile: bool = False,
):
    """Decode `max_new_tokens` after `prompt_ids` with `target`, drafting with `proposer` (None: plain).

    The chapter-02 engine (`speculative.decode`) with its verification rule. verify=None picks the
    lossless one for the sampling parameters: greedy matching at temperature 0, otherwise rejection
    sampling (chapter 03's for a chain, chapter 04's for a tree). Then greedy output equals plain greedy
    decoding token for token, and sampled output follows the target's distribution after temperature /
    top-k / top-p. A rule passed as `verify(tree, p, generator)` is used as is, and is lossless only if
    the rule is: Medusa's `typical_verifier()` (chapter 05) is not. Returns `.tokens` and `.stats`.
    `target` is a model, or a runner over it: `hf.StaticRunner(model, capacity)` preallocates its cache.
    timed=True waits for a GPU at every step, so that the per-step times in `.stats` are exact.
    compile=True runs the target's passes compiled (`hf.CompiledRunner`): the same tokens, after a
    one-time compilation per pass shape (tens of seconds on a CPU; see chapter 12).
    """
    from specdec_lib import hf
    from specdec_lib.speculative import decode

    if compile:
        if isinstance(target, hf.Runner) and not isinstance(target, hf.CompiledRunner):
            raise ValueError("compile=True compiles a model's passes: pass the model, not a runner")
        import torch

        # room for the prompt, the new tokens and a 64-node tree: growing later would recompile
        needed = torch.as_tensor(prompt_ids).numel() + max_new_tokens + 65
        target = hf.runner(target, max(512, 1 << (needed - 1).bit_length()), compiled=True)

    if verify is None and temperature != 0:  # at T = 0 the engine's own default: greedy matching
        verify = _verify_sampled
    return decode(
        target,
        prompt_ids,
        max_new_tokens,
        proposer,
        temperature,
        top_k,
        top_p,
        seed,
        eos_token_id,
        verify=verify,
        on_round=on_round,
        timed=timed,
    )


def _verify_sampled(tree, p, generator=None):
    """Lossless sampled verification: chapter 03's rule for chains, chapter 04's SpecInfer multi-step
    speculative sampling for branching trees. On a chain the two agree in distribution, not draw by
    draw: with the same seed they can make different decisions (they consume the random numbers in a
    different order), but both emit exactly the target's distribution."""
    if tree.is_chain:
        from specdec_lib.rejection import verify_chain

        return verify_chain(tree, p, generator)
    from specdec_lib.trees import verify_tree

    return verify_tree(tree, p, generator)
