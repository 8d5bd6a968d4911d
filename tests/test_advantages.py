"""GAE and V-trace equal plain reference loops, including terminations and truncations with bootstrap."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from srl_lab.algorithms.advantages import gae, vtrace


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


def reference_vtrace(r, v, term, trunc, tv, last, log_rhos, gamma, rho_bar, c_bar, lam):
    """IMPALA's definition step by step: vs_s = V_s + sum_t gamma^(t-s) (prod_{i<t} c_i) rho_t delta_t."""
    T, B = r.shape
    vs, adv = np.zeros((T, B)), np.zeros((T, B))
    rho = np.minimum(rho_bar, np.exp(log_rhos))
    c = lam * np.minimum(c_bar, np.exp(log_rhos))

    def next_value(t, b, following):  # value after step t: 0, the bootstrap of a truncation, or following
        if term[t, b]:
            return 0.0
        if trunc[t, b]:
            return tv[t, b]
        return following[t + 1, b] if t + 1 < T else last[b]

    for b in range(B):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                total += weight * rho[t, b] * (r[t, b] + gamma * next_value(t, b, v) - v[t, b])
                if term[t, b] or trunc[t, b]:
                    break
                weight *= gamma * c[t, b]
            vs[s, b] = v[s, b] + total
    for b in range(B):
        for t in range(T):
            adv[t, b] = rho[t, b] * (r[t, b] + gamma * next_value(t, b, vs) - v[t, b])
    return adv, vs


@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 12), B=st.integers(1, 5), seed=st.integers(0, 10_000), gamma=st.floats(0.5, 1.0),
       lam=st.floats(0.5, 1.0), rho_bar=st.floats(0.5, 2.0), c_bar=st.floats(0.5, 1.5))
def test_vtrace_matches_reference(T, B, seed, gamma, lam, rho_bar, c_bar):
    rng = np.random.default_rng(seed)
    r, v, tv = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    term = rng.random((T, B)) < 0.15
    trunc = (rng.random((T, B)) < 0.15) & ~term
    last = rng.normal(size=B).astype(np.float32)
    log_rhos = rng.normal(scale=0.7, size=(T, B)).astype(np.float32)
    adv, vs = vtrace(r, v, term, trunc, tv, last, log_rhos, gamma, rho_bar, c_bar, lam)
    ref_adv, ref_vs = reference_vtrace(r, v, term, trunc, tv, last, log_rhos, gamma, rho_bar, c_bar, lam)
    np.testing.assert_allclose(vs, ref_vs, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(adv, ref_adv, atol=1e-5, rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 12), B=st.integers(1, 5), seed=st.integers(0, 10_000), gamma=st.floats(0.5, 1.0))
def test_vtrace_on_policy_with_unit_lambda_is_gae_with_lambda_one(T, B, seed, gamma):
    rng = np.random.default_rng(seed)
    r, v, tv = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    term = rng.random((T, B)) < 0.15
    trunc = (rng.random((T, B)) < 0.15) & ~term
    last = rng.normal(size=B).astype(np.float32)
    _, vs = vtrace(r, v, term, trunc, tv, last, np.zeros((T, B), np.float32), gamma)
    _, returns = gae(r, v, term, trunc, tv, last, gamma, 1.0)
    np.testing.assert_allclose(vs, returns, atol=1e-4, rtol=1e-4)
