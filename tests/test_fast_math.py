"""The cheaper tanh and categorical the models train with compute what torch's own ones compute."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch.distributions import Categorical

from srl_lab.api.policy import ActionHead
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
