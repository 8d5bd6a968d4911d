"""The cheaper tanh and categorical the models train with compute what torch's own ones compute."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch.distributions import Categorical

from srl_lab.api.policy import ActionHead, MultiCategorical, sample_categorical
from srl_lab.models.mlp import Tanh

floats = st.floats(-30, 30, allow_nan=False, width=32)


@settings(max_examples=60, deadline=None)
@given(arrays("float32", st.integers(1, 300), elements=floats), st.sampled_from([1, Tanh.SMALL + 1]))
def test_tanh_matches_torch_in_value_and_gradient(values, size):
    x = np.resize(values, size)  # small tensors take torch's tanh, large ones the sigmoid form
    ours_in = torch.tensor(x, requires_grad=True)
    ref_in = torch.tensor(x, requires_grad=True)
    ours, ref = Tanh()(ours_in), torch.tanh(ref_in)
    upstream = torch.linspace(-1, 1, size)
    (ours * upstream).sum().backward()
    (ref * upstream).sum().backward()
    assert torch.allclose(ours, ref, atol=3e-7, rtol=0)
    assert torch.allclose(ours_in.grad, ref_in.grad, atol=2e-6, rtol=0)
    with torch.no_grad():
        assert torch.allclose(Tanh()(torch.tensor(x)), ref, atol=3e-7, rtol=0)
    assert ours.abs().max() <= 1.0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_discrete_and_multidiscrete_heads_match_torch_categorical(rows, n, seed):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(rows, 8, generator=gen) * 5
    head = ActionHead(gym.spaces.Discrete(n), 8, init_scale=3.0)
    dist = head(features)
    reference = Categorical(logits=head.linear(features))
    actions = torch.randint(0, n, (rows,), generator=gen)
    assert torch.allclose(dist.log_prob(actions), reference.log_prob(actions), atol=1e-5)
    assert torch.allclose(dist.entropy(), reference.entropy(), atol=1e-5)

    multi = ActionHead(gym.spaces.MultiDiscrete([n, 3]), 8, init_scale=3.0)
    logits = multi.linear(features)
    parts = [Categorical(logits=logits[:, :n]), Categorical(logits=logits[:, n:])]
    chosen = torch.stack([actions, actions % 3], dim=-1)
    dist = multi(features)
    assert torch.allclose(dist.log_prob(chosen), parts[0].log_prob(actions) + parts[1].log_prob(actions % 3),
                          atol=1e-5)
    assert torch.allclose(dist.entropy(), parts[0].entropy() + parts[1].entropy(), atol=1e-5)


def test_entropy_of_a_masked_out_action_is_finite():
    dist = ActionHead(gym.spaces.Discrete(3), 2)(torch.zeros(1, 2))
    dist = type(dist)(logits=torch.tensor([[0.0, 0.0, float("-inf")]]))
    assert torch.allclose(dist.entropy(), torch.log(torch.tensor([2.0])))
    assert dist.log_prob(torch.tensor([2])).item() == float("-inf")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_multidiscrete_runs_of_equal_sizes_match_one_categorical_per_component(nvec, rows, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, sum(nvec), generator=gen) * 5
    parts = [Categorical(logits=chunk) for chunk in torch.split(logits, nvec, dim=-1)]
    actions = torch.stack([torch.randint(0, n, (rows,), generator=gen) for n in nvec], dim=-1)
    dist = MultiCategorical(logits, tuple(nvec))
    assert torch.allclose(dist.log_prob(actions), sum(p.log_prob(actions[:, i]) for i, p in enumerate(parts)),
                          atol=1e-5)
    assert torch.allclose(dist.entropy(), sum(p.entropy() for p in parts), atol=1e-5)
    assert torch.equal(dist.mode, torch.stack([p.probs.argmax(-1) for p in parts], dim=-1))
    for ours, reference in zip(dist.parts, parts):
        assert torch.allclose(ours.probs, reference.probs, atol=1e-6)
    drawn = dist.sample((3,))
    assert drawn.shape == (3, rows, len(nvec))
    assert all(((drawn[..., i] >= 0) & (drawn[..., i] < n)).all() for i, n in enumerate(nvec))


def test_sampling_draws_each_action_at_its_probability():
    torch.manual_seed(0)
    probs = torch.tensor([[0.6, 0.3, 0.1, 0.0], [0.25, 0.25, 0.25, 0.25]])
    draws = 40_000
    drawn = sample_categorical(probs.log(), (draws,))
    for row in range(2):
        freq = torch.bincount(drawn[:, row], minlength=4).double() / draws
        # 4.5 standard errors of a binomial proportion: a wrong sampler fails, a right one all but never
        bound = 4.5 * (probs[row].double() * (1 - probs[row].double()) / draws).sqrt() + 1e-12
        assert ((freq - probs[row].double()).abs() <= bound).all(), (row, freq)
    assert (drawn[:, 0] != 3).all()  # a zero-probability action is never drawn
