"""Chapter 05's training loop, its schedules, and the zoo's warmup-stable-decay branches built on them."""

import math

import pytest
import torch

from specdec_lib.training import Constant, Cosine, WarmupStableDecay, adamw, train_on_frozen_target
from specdec_lib.zoo_stages.common import at_budgets


def test_schedules_start_at_the_peak_and_end_at_their_floor():
    assert [Constant(warmup=4)(s, 0.0) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    cos = Cosine(warmup=0, floor=0.1)
    assert cos(0, 0.0) == pytest.approx(1.0) and cos(0, 1.0) == pytest.approx(0.1)
    assert cos(0, 0.5) == pytest.approx(0.55) and cos(0, 2.0) == pytest.approx(0.1)  # past the end: the floor
    wsd = WarmupStableDecay(warmup=0, decay=0.2, floor=0.1)
    assert wsd(0, 0.0) == wsd(0, 0.79) == 1.0  # stable until the last 20%
    assert wsd(0, 0.9) == pytest.approx(0.55) and wsd(0, 1.0) == pytest.approx(0.1)
    assert WarmupStableDecay(warmup=10)(4, 0.0) == pytest.approx(0.5)  # the warm-up multiplies


def _task(seed=0, n=12):
    """A tiny regression and its batches: what matters is that training changes the weights."""
    g = torch.Generator().manual_seed(seed)
    w_true = torch.randn(4, 1, generator=g)
    xs = [torch.randn(8, 4, generator=g) for _ in range(n)]
    return xs, (lambda model: lambda x: (((model(x) - x @ w_true) ** 2).mean(), torch.zeros(1)))


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 1)


def test_the_loop_stops_at_its_step_budget_and_sets_the_scheduled_rate():
    xs, loss_for = _task()
    model = _model()
    opt = adamw(model, 0.1)
    history = train_on_frozen_target(model, loss_for(model), xs, math.inf, 0.1, max_steps=5,
                                     schedule=Cosine(warmup=0, floor=0.1), optimizer=opt)  # fmt: skip
    assert len(history) == 5
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * Cosine(0, 0.1)(4, 4 / 5))  # the last step's rate
    other = _model()
    assert len(train_on_frozen_target(other, loss_for(other), xs, math.inf, 0.1)) == len(xs)  # all batches


def test_a_run_continued_with_its_optimiser_is_the_same_run():
    xs, loss_for = _task()
    whole, split = _model(), _model()
    train_on_frozen_target(whole, loss_for(whole), xs, math.inf, 0.05)
    opt = adamw(split, 0.05)
    train_on_frozen_target(split, loss_for(split), xs[:5], math.inf, 0.05, optimizer=opt)
    train_on_frozen_target(split, loss_for(split), xs[5:], math.inf, 0.05, optimizer=opt)
    assert torch.equal(whole.weight, split.weight) and torch.equal(whole.bias, split.bias)
    fresh = _model()  # without the optimiser's state, the second half is a different run
    train_on_frozen_target(fresh, loss_for(fresh), xs[:5], math.inf, 0.05)
    train_on_frozen_target(fresh, loss_for(fresh), xs[5:], math.inf, 0.05)
    assert not torch.equal(whole.weight, fresh.weight)


def test_every_budget_of_one_branched_run_is_the_run_that_stops_there():
    xs, loss_for = _task(n=30)

    def train(model, batches, schedule, opt):
        train_on_frozen_target(model, loss_for(model), batches, math.inf, 0.05, max_steps=len(batches),
                               schedule=schedule, optimizer=opt)  # fmt: skip

    branched = at_budgets(_model(), train, xs, unit=10, budgets=(1, 3), lr=0.05)
    for b in (1, 3):
        alone = at_budgets(_model(), train, xs, unit=10, budgets=(b,), lr=0.05)[b]
        assert torch.equal(branched[b].weight, alone.weight), b
    assert not torch.equal(branched[1].weight, branched[3].weight)  # the budgets are different drafters


def test_pretraining_runs_on_the_same_loop_and_records_where_it_stopped():
    from specdec_lib.zoo_stages.base import llama, pretrain

    torch.manual_seed(0)
    model = llama(vocab=64, d=32, layers=1, heads=2, inter=64, ctx=16, eos=0)
    before = model.model.layers[0].mlp.up_proj.weight.clone()
    data = torch.randint(1, 64, (500,), generator=torch.Generator().manual_seed(0))
    teacher = llama(vocab=64, d=32, layers=1, heads=2, inter=64, ctx=16, eos=0).eval()
    for t in (None, teacher):  # from data, and distilled
        record = pretrain(model, data, steps=3, batch=2, ctx=16, lr=1e-3, minutes=5, seed=0, teacher=t,
                          compile=False)  # fmt: skip
        assert record["steps"] == 3 and record["tokens_seen"] == 3 * 2 * 16
        assert record["curve"][0]["step"] == 0 and "Cosine" in record["schedule"]
    assert not torch.equal(before, model.model.layers[0].mlp.up_proj.weight)
