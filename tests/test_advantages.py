"""GAE equals a plain reference loop, including terminations and truncations with bootstrap."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from srl_lab.algorithms.advantages import gae


def reference_gae(r, v, term, trunc, tv, last, gamma, lam):
    T, B = r.shape
    adv = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if term[t, b]:
                next_v, running = 0.0, 0.0
            elif trunc[t, b]:
                next_v, running = tv[t, b], 0.0
            else:
                next_v = v[t + 1, b] if t + 1 < T else last[b]
            delta = r[t, b] + gamma * next_v - v[t, b]
            running = delta + gamma * lam * running
            adv[t, b] = running
    return adv, adv + v


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 12), B=st.integers(1, 5), seed=st.integers(0, 10_000),
       gamma=st.floats(0.5, 1.0), lam=st.floats(0.0, 1.0))
def test_gae_matches_reference(T, B, seed, gamma, lam):
    rng = np.random.default_rng(seed)
    r, v, tv = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    term = rng.random((T, B)) < 0.15
    trunc = (rng.random((T, B)) < 0.15) & ~term
    last = rng.normal(size=B).astype(np.float32)
    adv, ret = gae(r, v, term, trunc, tv, last, gamma, lam)
    ref_adv, ref_ret = reference_gae(r, v, term, trunc, tv, last, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, atol=1e-5, rtol=1e-5)
