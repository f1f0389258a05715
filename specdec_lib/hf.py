"""The one adapter between the course and `transformers` model/cache internals (hand-written).

`transformers` changes its cache API often (4.x `DynamicCache.key_cache` lists became `.layers[i].keys` in
4.54; 5.x renames more). Every call into model or cache internals goes through these few functions, so a
new release means editing this file only. Supported: transformers >= 4.56, < 6 (pinned 5.23.0 in
requirements.txt). Logits come back as fp32 whatever the model's dtype: probability maths is always fp32.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import transformers

# The supported range and its check live in specdec_lib._supported (`import specdec_lib` checks the installed
# release with it); here the check runs again on the module actually imported, which differs when a notebook
# upgraded transformers after importing it (e.g. on Colab, before a restart).
from specdec_lib._supported import SUPPORTED_TRANSFORMERS, check_transformers_version  # noqa: F401 (re-exported)

# Before anything else is imported from transformers: an old release fails here, with the fix.
check_transformers_version(transformers.__version__)
from transformers import DynamicCache, StaticCache  # noqa: E402


@dataclass
class ForwardOut:
    logits: torch.Tensor  # [n, V] fp32: row i is the next-token distribution after input i
    hidden: dict[int, torch.Tensor]  # layer index -> [n, d] hidden states (see `forward`)


def new_cache(model) -> DynamicCache:
    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older releases take no config
        return DynamicCache()


def cache_length(cache) -> int:
    return 0 if cache is None else int(cache.get_seq_length())


def _layers_kv(cache):
    """(list of key tensors, list of value tensors, setter) across cache API versions."""
    if hasattr(cache, "layers"):
        return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]
    return list(cache.key_cache), list(cache.value_cache)  # pragma: no cover - transformers < 4.54


def _set_layers_kv(cache, keys, values):
    if hasattr(cache, "layers"):
        for layer, k, v in zip(cache.layers, keys, values, strict=True):
            layer.keys, layer.values = k, v
    else:  # pragma: no cover - transformers < 4.54
        cache.key_cache[:], cache.value_cache[:] = keys, values


def crop_cache(cache, length: int) -> None:
    """Keep the first `length` positions (a chain's rollback)."""
    excess = cache_length(cache) - length
    if excess > 0:
        cache.crop(-excess)  # a negative argument removes tokens in every supported release


def keep_cache_slots(cache, start: int, slots: torch.Tensor) -> None:
    """Keep positions [0, start) followed by positions start + slots (a tree's compaction).

    A crop when `slots` is 0, 1, ..., m-1; otherwise a gather: the accepted nodes' keys and values are
    copied into place and the rejected branches dropped.
    """
    slots = slots.to(torch.long)
    m = slots.numel()
    if bool((slots == torch.arange(m, device=slots.device)).all()):
        crop_cache(cache, start + m)
        return
    keys, values = _layers_kv(cache)
    idx = torch.cat([torch.arange(start, device=slots.device), start + slots])
    keys = [k.index_select(-2, idx.to(k.device)) for k in keys]
    values = [v.index_select(-2, idx.to(v.device)) for v in values]
    _set_layers_kv(cache, keys, values)


def keep_cache_rows(cache, rows: torch.Tensor) -> None:
    """Keep only the batch rows `rows` of every layer (a batch of answers drops the ones that ended)."""
    keys, values = _layers_kv(cache)
    rows = rows.to(torch.long)
    _set_layers_kv(cache, [k.index_select(0, rows.to(k.device)) for k in keys],
                   [v.index_select(0, rows.to(v.device)) for v in values])  # fmt: skip


def cache_kv(cache, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values of one layer, [batch, heads, positions, head_dim] (for tests and figures)."""
    keys, values = _layers_kv(cache)
    return keys[layer], values[layer]


_CACHE_KW = "past_key_values"


def _cache_kwarg(model) -> str:
    """The name forward() gives the cache argument (5.x renames `past_key_values` to `cache`)."""
    return _cache_kwarg_of(type(model))


@functools.cache
def _cache_kwarg_of(cls) -> str:  # inspect.signature costs ~0.1 ms: once per model class
    params = inspect.signature(cls.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else _CACHE_KW


def forward(
    model,
    input_ids: torch.Tensor,
    cache=None,
    position_ids: torch.Tensor | None = None,
    tree_mask: torch.Tensor | None = None,
    hidden_layers: tuple[int, ...] = (),
    last_only: bool = False,
) -> ForwardOut:
    """Run `model` on new tokens `input_ids` ([n] or [1, n]) after what `cache` holds; append to `cache`.

    position_ids: [n] explicit positions (default: cache length + 0..n-1).
    tree_mask: bool, True where new token i may attend: [n, n] over the new tokens (the cached prefix
      is then fully visible), or [n, cached + n] over everything (when the cache itself holds branches,
      as a tree drafter's does). Default: causal. Passed to the model as a 4-D additive mask.
    hidden_layers: which entries of `output_hidden_states` to return. The course's one numbering of
      hidden states (every `feature_layers`, `hidden_states` and tap uses it): 0 = the embeddings;
      i = 1 .. L-1 = the residual stream entering decoder layer i (layers counted from 0), i.e. leaving
      layer i-1, before any norm; -1 (= L) = the last layer's output after the final norm, as the LM
      head sees it. EAGLE reads -1; EAGLE-3 fuses (1, 3, 5) of our 6-layer target.
    last_only: logits of the last position only ([1, V]): a prefill or a catch-up needs no others, and
      the LM head over every position of a long prompt is a sizeable part of its cost.
    """
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    n, past, device = input_ids.shape[1], cache_length(cache), input_ids.device
    mask = None
    if tree_mask is not None:
        dtype = dtype_of(model)
        mask = torch.zeros(n, past + n, dtype=dtype, device=device)  # what the tree mask leaves out: visible
        blocked = ~tree_mask.to(device, torch.bool)
        mask[:, _tree_columns(tree_mask, n, past)].masked_fill_(blocked, torch.finfo(dtype).min)
    return _call(model, input_ids, cache, position_ids, mask, hidden_layers, last_only)


def _tree_columns(tree_mask, n: int, past: int) -> slice:
    """The columns of an [n, past + n] mask that `tree_mask` sets: its [n, n] form covers the new tokens
    (the cached prefix stays visible), its [n, past + n] form everything."""
    if tree_mask.shape == (n, n):
        return slice(past, past + n)
    if tree_mask.shape == (n, past + n):
        return slice(0, past + n)
    raise ValueError(f"tree_mask must be [{n}, {n}] or [{n}, {past + n}], got {list(tree_mask.shape)}")


def _call(model, input_ids, cache, position_ids, mask, hidden_layers, last_only, cache_kw=None) -> ForwardOut:
    """One model call [1, n] with the course's options; `mask` is an additive [n, keys] mask or None (causal).
    `cache_kw`: the cache argument's name, when the caller looked it up already (a compiled pass does)."""
    n = input_ids.shape[1]
    kwargs = {"use_cache": cache is not None}
    if cache is not None:
        kwargs[cache_kw or _cache_kwarg(model)] = cache
    if position_ids is not None:
        kwargs["position_ids"] = position_ids.reshape(1, n).to(input_ids.device)
    if mask is not None:
        kwargs["attention_mask"] = mask[None, None]
    if hidden_layers:
        kwargs["output_hidden_states"] = True
    if last_only:
        kwargs["logits_to_keep"] = 1
    out = model(input_ids=input_ids, **kwargs)
    return ForwardOut(out.logits[0].float(), {i: out.hidden_states[i][0] for i in hidden_layers})


class Runner:
    """The target as the decoding engine reaches it: five calls, and nothing else of the model.

    new_cache() a fresh, empty cache; forward(ids, cache, ...) = `forward` on this model, appending to
    `cache`; keep(cache, start, slots) a tree's compaction (`keep_cache_slots`); crop(cache, length) a
    chain's rollback; length(cache) how many positions it holds. This runner is transformers'
    `DynamicCache`: it grows with every pass, a compaction gathers into new tensors and every pass builds its
    mask. It is the default, and what the chapters run; `StaticRunner` swaps the cache underneath.
    """

    def __init__(self, model):
        if not is_model(model):
            raise ValueError(f"a Runner wraps a causal language model, not {type(model).__name__}")
        self.model = model

    def new_cache(self):
        return new_cache(self.model)

    def forward(self, input_ids, cache, position_ids=None, tree_mask=None, hidden_layers=(), last_only=False):
        return forward(self.model, input_ids, cache, position_ids, tree_mask, hidden_layers, last_only)

    def keep(self, cache, start: int, slots: torch.Tensor) -> None:
        keep_cache_slots(cache, start, slots)

    def crop(self, cache, length: int) -> None:
        crop_cache(cache, length)

    def length(self, cache) -> int:
        return cache_length(cache)


def runner(target, capacity: int | None = None, compiled: bool = False) -> Runner:
    """`target` as a Runner: a model gets the default one (a few attributes: cheap to make per call), a
    StaticRunner when `capacity` (positions to preallocate) is given, a CompiledRunner when `compiled`."""
    if isinstance(target, Runner):
        return target
    if compiled:
        return CompiledRunner(target, capacity or 512)
    return Runner(target) if capacity is None else StaticRunner(target, capacity)


@dataclass
class StaticKV:
    """A preallocated target cache: transformers' `StaticCache`, and how many of its slots hold the text.

    The slots past `length` keep stale keys and values (rejected branches, rolled-back drafts): the mask
    hides them, and the next pass overwrites them."""

    kv: StaticCache
    length: int
    capacity: int


class StaticRunner(Runner):
    """Keys and values preallocated for `capacity` positions and written in place, as in gpt-fast.

    A pass writes its n tokens at slots length .. length + n - 1; `keep` moves the accepted nodes down
    with an in-place `index_copy_`; `crop` only moves the length; the mask is a slice of one causal table,
    built once. Every pass attends over all `capacity` slots, the unused ones masked: its shapes depend on
    n alone, which is what a compiled pass needs (issue 50). A pass that would not fit doubles the capacity
    (a new allocation and a copy, so size it for prompt + new tokens + the largest tree up front).
    Full-attention models only: a sliding-window layer would wrap around.
    """

    def __init__(self, model, capacity: int = 512):
        super().__init__(model)
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.causal = self._causal_table(capacity)

    def _causal_table(self, capacity: int) -> torch.Tensor:
        """[capacity, capacity] additive mask: row i (a token at slot i) sees slots 0 .. i."""
        dtype = dtype_of(self.model)
        allowed = torch.ones(capacity, capacity, dtype=torch.bool, device=device_of(self.model)).tril()
        table = torch.zeros(capacity, capacity, dtype=dtype, device=allowed.device)
        return table.masked_fill_(~allowed, torch.finfo(dtype).min)

    def new_cache(self, capacity: int | None = None) -> StaticKV:
        capacity = capacity or self.capacity
        kv = StaticCache(config=self.model.config, max_cache_len=capacity)
        if any(layer.is_sliding for layer in kv.layers):
            raise ValueError(
                "StaticRunner supports full-attention models only (this one has sliding windows)"
            )
        b = block_config(self.model)
        kv.early_initialization(1, b["kv_heads"], b["head_dim"], dtype_of(self.model), device_of(self.model))
        return StaticKV(kv, 0, capacity)

    def _grow(self, cache: StaticKV, needed: int) -> None:
        bigger = self.new_cache(max(2 * cache.capacity, needed))
        for old, new in zip(cache.kv.layers, bigger.kv.layers, strict=True):
            new.keys[:, :, : cache.capacity] = old.keys
            new.values[:, :, : cache.capacity] = old.values
        cache.kv, cache.capacity = bigger.kv, bigger.capacity
        self.crop(cache, cache.length)
        if self.causal.shape[0] < cache.capacity:
            self.causal = self._causal_table(cache.capacity)

    def forward(self, input_ids, cache, position_ids=None, tree_mask=None, hidden_layers=(), last_only=False):
        if not isinstance(cache, StaticKV):
            raise ValueError("StaticRunner.forward needs a cache from its own new_cache()")
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
        n, past = input_ids.shape[1], cache.length
        m = self.padded(n, past)  # the pass's length: n here; a compiled runner pads to fixed shapes
        if past + m > cache.capacity:
            self._grow(cache, past + m)
        device = input_ids.device
        if position_ids is None:
            position_ids = torch.arange(past, past + n, device=device)
        mask = self.causal[past : past + m, : cache.capacity]  # slots after past + i are hidden
        if tree_mask is not None:
            mask = mask.clone()
            allowed = tree_mask.to(device, torch.bool)
            mask[:n, _tree_columns(tree_mask, n, past)] = torch.where(
                allowed, 0.0, torch.finfo(mask.dtype).min
            )
        if m > n:  # padding tokens go after the real ones, in slots no real row sees, and are dropped
            input_ids = torch.nn.functional.pad(input_ids, (0, m - n))
            position_ids = position_ids.reshape(-1)
            position_ids = torch.cat([position_ids, position_ids[-1:].expand(m - n)])
        out = self._pass(
            input_ids, cache.kv, position_ids, mask, hidden_layers, last_only and m == n, past == 0
        )
        cache.length = past + n
        if m > n:
            self.crop(cache, past + n)  # the model wrote m slots: the next pass writes after the real n
            rows = slice(n - 1, n) if last_only else slice(0, n)
            out = ForwardOut(out.logits[rows], {i: h[:n] for i, h in out.hidden.items()})
        return out

    def padded(self, n: int, past: int) -> int:
        return n

    def _pass(self, input_ids, kv, position_ids, mask, hidden_layers, last_only, prefill: bool) -> ForwardOut:
        return _call(self.model, input_ids, kv, position_ids, mask, hidden_layers, last_only)

    def keep(self, cache: StaticKV, start: int, slots: torch.Tensor) -> None:
        m = slots.numel()
        src = start + slots.to(device=cache.kv.layers[0].keys.device, dtype=torch.long)
        dst = torch.arange(start, start + m, device=src.device)
        for layer in cache.kv.layers:  # index_select copies first, so overlapping slots are safe
            layer.keys.index_copy_(2, dst, layer.keys.index_select(2, src))
            layer.values.index_copy_(2, dst, layer.values.index_select(2, src))
        self.crop(cache, start + m)

    def crop(self, cache: StaticKV, length: int) -> None:
        cache.length = min(cache.length, length)
        for layer in cache.kv.layers:  # where transformers' StaticLayer writes the next pass
            layer.cumulative_length.fill_(cache.length)

    def length(self, cache: StaticKV) -> int:
        return cache.length


def torch_compile(fn, dynamic: bool):
    """torch.compile(fn), with room for a graph per pass shape, per set of hidden layers and per model:
    dynamo's default of 8 graphs per function is too few, and past it dynamo falls back to eager silently."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(fn, dynamic=dynamic)


def _compiled_pass(model, input_ids, kv, position_ids, mask, hidden_layers, cache_kw):
    out = _call(model, input_ids, kv, position_ids, mask, hidden_layers, False, cache_kw)
    return out.logits, out.hidden


class CompiledRunner(StaticRunner):
    """A StaticRunner whose passes after the prefill run through `torch.compile` with fixed shapes (issue 50).

    A pass of n tokens is padded to a bucket: 1 (a decoding step), else 1 + a power of two (a root and a
    tree of 1, 2, 4, 8, 16 ... nodes), so that a method's verification always has the same shape and
    nothing recompiles from round to round; the prefill (one pass of any length) stays eager. Each bucket,
    and each set of requested hidden layers, compiles once per process: tens of seconds on a CPU, so
    this pays off over long generations only (the benchmark reports the break-even). Capacity is part of
    every shape: size it once for the longest prompt + new tokens + tree, since growing recompiles.
    The model code is transformers' own, unchanged: the compiled path wraps the eager one.
    """

    def __init__(self, model, capacity: int = 512):
        super().__init__(model, capacity)
        self.compiled = torch_compile(_compiled_pass, dynamic=False)

    def padded(self, n: int, past: int) -> int:
        if past == 0 or n == 1:
            return n
        return 1 + (1 << (n - 2).bit_length())  # 1 + the smallest power of two >= n - 1

    def _pass(self, input_ids, kv, position_ids, mask, hidden_layers, last_only, prefill: bool) -> ForwardOut:
        if prefill:
            return super()._pass(input_ids, kv, position_ids, mask, hidden_layers, last_only, prefill)
        kw = _cache_kwarg(self.model)  # looked up here: dynamo would trace the signature lookup
        logits, hidden = self.compiled(
            self.model, input_ids, kv, position_ids, mask.clone(), tuple(hidden_layers), kw
        )
        return ForwardOut(logits, hidden)


def compiled_graphs() -> int:
    """How many graphs torch.compile has built in this process: read it before and after a generation to
    see that nothing recompiled."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def forward_batch(model, input_ids: torch.Tensor, cache=None) -> torch.Tensor:
    """Logits [B, n, V] (fp32) of B equal-length sequences [B, n] after what `cache` holds (batch B);
    appends to `cache`. For cost measurements (chapter 01's `time_forward`); the engine is batch 1."""
    kwargs = {"use_cache": cache is not None}
    if cache is not None:
        kwargs[_cache_kwarg(model)] = cache
    return model(input_ids=input_ids, **kwargs).logits.float()


def forward_rows(model, input_ids, attention_mask, cache=None, hidden_layers: tuple[int, ...] = ()):
    """B left-padded rows at once, for writing training text (the zoo's batched answers, not the engine):
    input_ids [B, n] after what `cache` holds; attention_mask [B, past + n], 0 on the padding. Positions count
    each row's real tokens only, as in transformers' generate. Returns (the last position's logits [B, V] in
    fp32, {layer: [B, n, d]} in `forward`'s numbering)."""
    n = input_ids.shape[1]
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -n:]
    kwargs = {
        "use_cache": cache is not None,
        "output_hidden_states": bool(hidden_layers),
        "logits_to_keep": 1,
    }
    if cache is not None:
        kwargs[_cache_kwarg(model)] = cache
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, **kwargs)
    return out.logits[:, -1].float(), {i: out.hidden_states[i] for i in hidden_layers}


def context_limit(model) -> int:
    return int(getattr(model.config, "max_position_embeddings", 1 << 30))


def vocab_size(model) -> int:
    return int(model.get_output_embeddings().weight.shape[0])


def device_of(model) -> torch.device:
    return next(model.parameters()).device


def dtype_of(model) -> torch.dtype:
    """The dtype of the model's weights (bf16 on the GPU presets, fp32 in the zoo)."""
    return next(model.parameters()).dtype


def is_model(obj) -> bool:
    """Is `obj` a causal language model (what a proposer wraps, never a proposer itself)?"""
    return isinstance(obj, torch.nn.Module) and callable(getattr(obj, "get_output_embeddings", None))


def empty_hidden(model) -> torch.Tensor:
    """Hidden states over zero positions, [0, d]: the features of an empty prefix (a 1-token prompt)."""
    return torch.zeros(0, int(model.config.hidden_size), device=device_of(model), dtype=dtype_of(model))


def version() -> str:
    return transformers.__version__


# ---- model parts that proposers built on the target's own weights need (chapters 05+) ----
def lm_head(model) -> torch.nn.Module:
    """The output projection (hidden -> vocabulary logits)."""
    return model.get_output_embeddings()


def embeddings(model) -> torch.nn.Module:
    """The input token embedding table."""
    return model.get_input_embeddings()


def final_norm(model) -> torch.nn.Module:
    """The norm applied to the last decoder layer's output before the LM head."""
    return model.model.norm


def borrow(model, *parts: str) -> SimpleNamespace:
    """The target's own modules that a proposer calls but neither owns nor trains: any of "embed",
    "lm_head" and "final_norm", as attributes of a plain namespace. Assigned to an nn.Module attribute
    directly they would become its submodules, so its parameters, its optimiser and its saved weights
    would hold a copy of the target's."""
    get = {"embed": embeddings, "lm_head": lm_head, "final_norm": final_norm}
    unknown = [p for p in parts if p not in get]
    if unknown:
        raise ValueError(f"unknown target parts {unknown}; known: {sorted(get)}")
    return SimpleNamespace(**{p: get[p](model) for p in parts})


def num_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def decoder_layer(model, i: int) -> torch.nn.Module:
    return model.model.layers[i]


def block_config(model) -> dict:
    """The sizes a Llama-style decoder block needs to match this model's layers."""
    c = model.config
    heads = int(c.num_attention_heads)
    rope = getattr(c, "rope_parameters", None) or {}
    return {
        "hidden": int(c.hidden_size),
        "heads": heads,
        "kv_heads": int(getattr(c, "num_key_value_heads", None) or heads),
        "head_dim": int(getattr(c, "head_dim", None) or c.hidden_size // heads),
        "intermediate": int(c.intermediate_size),
        "rope_theta": float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))),
        "eps": float(getattr(c, "rms_norm_eps", 1e-6)),
        # Qwen3 normalises each head's queries and keys before the rotary embedding (QK-norm).
        "qk_norm": hasattr(decoder_layer(model, 0).self_attn, "q_norm"),
    }


def hidden_states(model, ids: torch.Tensor, layers: tuple[int, ...]) -> dict[int, torch.Tensor]:
    """Hidden states of a batch [B, T] (no cache, causal), for training proposers on a frozen target:
    {layer: [B, T, d]} with the same layer numbering as `forward`'s `hidden_layers`."""
    out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    return {i: out.hidden_states[i] for i in layers}
