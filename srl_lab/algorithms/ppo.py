"""Proximal Policy Optimisation (clipped surrogate), readable top to bottom.

One ``train(batch)`` call: advantages from the batch (GAE, or V-trace against the current policy),
then ``epochs`` passes of shuffled minibatches minimising

    loss = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) + vf_coef * (V - R)^2 / 2 - ent_coef * H

with ratio = pi(a|s) / pi_old(a|s) taken against the behaviour log-probs the actors recorded, so a
fragment a version or two old is still corrected by the clipped ratio. Options (``PPOConfig``):

* ``dual_clip``: where A < 0 the policy term is bounded by c * A (``clipped_surrogate``), so a row whose
  ratio ran past c gives no gradient;
* ``value_clip``: the value loss is max((V - R)^2, (V_clip - R)^2), V_clip = V_old + clip(V - V_old, ±c);
* ``norm_value``: the value head predicts (R - mean) / std of running return statistics, so the
  behaviour values are denormalised before computing advantages;
* ``norm_obs``: the policy's ``obs_normalizer`` (buffers, shipped with the weights) is updated
  from every batch before training on it;
* ``advantage="vtrace"``: one no-gradient pass gives the current ("proximal") log-probs and values;
  V-trace then corrects for the policy lag of each sample, and the clipped ratio is taken against the
  proximal policy instead of the behaviour one (decoupled PPO, Hilton et al. 2021). At the start of
  an update the gradient is then the truncated importance-weighted one,
  grad log pi * min(rho_bar, pi_now / mu) * (r + gamma * vs' - V), whatever the lag, and the clip
  bounds the step away from the current policy rather than from a stale one, where the behaviour
  ratio would already sit outside the clip range and give no gradient at all;
* ``advantage="vtrace_minibatch"`` (feed-forward policies): no extra pass. Minibatches are whole
  fragment columns, and each takes V-trace from its own forward pass, as IMPALA's learner does; the
  clipped ratio is measured from the behaviour policy, as with GAE, so the advantage carries no
  second importance weight: A = r + gamma * vs' - V. A sample that lags further than the clip range
  gives no gradient (``vtrace`` still trains on it), but an update costs a quarter fewer passes. Each
  minibatch's returns update the value statistics for its share of the batch;
* ``max_staleness``: a sample acted by version v, trained when the trainer is at version V (or, if
  not given, the newest version in the batch), is s = V - v versions old; every epoch moves the
  policy about one version further, so epoch e trains only on samples with s + e <= max_staleness.
  Each sample is reused at most max_staleness + 1 - s times.

A minibatch whose gradient is not finite (NaN or inf, e.g. from a broken reward) is not stepped
along: it is counted in ``nonfinite_steps`` and the weights stay as they were.

Recurrent policies (``policy.recurrent``) need the batch key ``states`` ``[T, B, ...]``: the
policy state before each step. Fragments are cut into chunks of ``chunk_length`` steps; a chunk
starts from its stored state, first replayed over the ``burn_in`` steps before it without gradient
(so stale stored states are refreshed by the current weights), then trained on with BPTT. With
V-trace the proximal pass unrolls whole fragments chunk by chunk and the chunks then start from the
states it reached (no burn-in needed): the ratio's numerator and denominator come from the same
state, so it is exactly 1 before the first step. From the actors' stored states instead, a state the
acting weights made would differ from the proximal pass's, and rows would start off the clip.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from srl_lab.algorithms.advantages import gae, vtrace
from srl_lab.algorithms.value_norm import ValueNormalizer
from srl_lab.api.algorithm import Algorithm, Batch
from srl_lab.api.policy import Policy, obs_to_tensor
from srl_lab.api.tree import tree_map
from srl_lab.config import PPOConfig

Minibatch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
# |log pi - log pi_old| is capped here before exp: exp(20) lies far outside any clip range, while
# exp(89) overflows float32, and one such row (a near-deterministic policy meeting an action it now
# rules out) would make the loss, and after one step every weight, NaN.
MAX_LOG_RATIO = 20.0


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip_coef: float, dual_clip: float) -> torch.Tensor:
    """Per-row PPO objective to maximise: min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), and with
    ``dual_clip`` c > 0 never below c * A where A < 0 (dual-clip PPO, Ye et al. 2020).

    Without the second bound a row with A < 0 whose ratio has grown far past the clip keeps a gradient
    of size ratio * |A|: one action the proximal policy all but ruled out (a stale sample's, typically)
    that the update makes likelier can own a whole minibatch's clipped gradient step.
    """
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - clip_coef, 1 + clip_coef) * adv)
    if dual_clip:
        surrogate = torch.where(adv < 0, torch.max(surrogate, dual_clip * adv), surrogate)
    return surrogate


class PPO(Algorithm):
    def __init__(self, policy: Policy, config: PPOConfig, device: str = "cpu"):
        super().__init__(policy, config, device)
        if config.norm_obs and not hasattr(policy, "obs_normalizer"):
            raise TypeError("ppo.norm_obs needs a policy with an obs_normalizer, e.g. a subclass of "
                            "srl_lab.models.actor_critic.ActorCriticPolicy; or set norm_obs=False")
        self.recurrent = policy.recurrent
        if self.recurrent and config.advantage == "vtrace_minibatch":
            raise ValueError("ppo.advantage='vtrace_minibatch' takes V-trace from minibatches of whole fragments, "
                             "which a recurrent policy trains in chunks: use advantage='vtrace'")
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr, eps=1e-5, fused=True)
        self.value_normalizer = ValueNormalizer(config.value_norm_beta) if config.norm_value else None
        self.env_steps_trained = 0

    def train(self, batch: Batch, version: int | None = None) -> dict[str, float]:
        """One update on ``batch``; ``version`` is the trainer's current policy version (staleness)."""
        cfg, dev = self.config, self.device
        T, B = batch["rewards"].shape
        obs = obs_to_tensor(batch["obs"], dev)  # leaves [T, B, ...]
        if cfg.norm_obs:
            self.policy.obs_normalizer.update(obs)
        valid = batch.get("valid")  # False where the env ignored the action (a delayed reset): never trained on
        ended = batch["terminated"] | batch["truncated"] | (False if valid is None else ~valid)
        # first[t]: obs[t] starts an episode (the stored state of step 0 already accounts for it)
        first = torch.as_tensor(np.concatenate([np.zeros((1, B), bool), ended[:-1]]), device=dev)
        actions = torch.as_tensor(batch["actions"], device=dev)
        if self.recurrent and "states" not in batch:
            raise ValueError("a recurrent policy trains on batches with 'states' (the policy state before each "
                             "step), e.g. from srl_lab.algorithms.recurrent.Rollout")
        states = torch.as_tensor(batch["states"], device=dev) if self.recurrent else None

        # Advantages and returns in the scale of real returns.
        values, trunc_values, last_value = (self._denormalize(batch[k]) for k in
                                            ("values", "trunc_values", "last_value"))
        n = T * B
        per_minibatch = cfg.advantage == "vtrace_minibatch"
        if per_minibatch:  # each minibatch fills in its rows' advantages and targets from its own pass
            flat = {k: torch.zeros(n, device=dev) for k in ("adv", "ret", "old_v")}
            flat["old_logp"] = torch.as_tensor(batch["logp"].reshape(n), device=dev)
        else:
            ratio_base = batch["logp"]  # the policy the clipped ratio is measured from
            if cfg.advantage == "vtrace":
                logp_now, values_now, states = self._evaluate_everything(obs, actions, states, first)
                ratio_base, values = logp_now, self._denormalize(values_now)
                advantages, returns = self._vtrace(batch, values, trunc_values, last_value, logp_now)
            else:
                advantages, returns = gae(batch["rewards"], values, batch["terminated"], batch["truncated"],
                                          trunc_values, last_value, cfg.gamma, cfg.gae_lambda)
            # Value targets and the values to clip around, in the value head's scale.
            if self.value_normalizer is not None:
                self.value_normalizer.update(returns)
            flat = {k: torch.as_tensor(np.asarray(v).reshape(n), device=dev) for k, v in
                    (("old_logp", ratio_base), ("adv", advantages), ("ret", self._normalize(returns)),
                     ("old_v", self._normalize(values)))}

        self.env_steps_trained += n
        if cfg.anneal_lr_steps:
            frac = max(0.0, 1.0 - self.env_steps_trained / cfg.anneal_lr_steps)
            self.optimizer.param_groups[0]["lr"] = cfg.lr * frac
        newest = int(batch["versions"].max()) if version is None else version
        staleness = torch.as_tensor((newest - batch["versions"]).reshape(n), device=dev)
        happened = (torch.ones(n, dtype=torch.bool, device=dev) if valid is None
                    else torch.as_tensor(valid.reshape(n), device=dev))

        burn_in = 0 if cfg.advantage == "vtrace" else cfg.burn_in  # V-trace's pass refreshed the chunks' states
        stats: dict[str, list[float]] = {k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl",
                                                         "clip_frac", "dual_clip_frac")}
        samples_used = nonfinite_steps = 0
        for epoch in range(cfg.epochs):
            active = happened & (staleness + epoch <= cfg.max_staleness if cfg.max_staleness is not None
                                 else True)
            samples_used += int(active.sum())
            if self.recurrent:
                minibatches = self._chunk_minibatches(obs, actions, states, first, active, burn_in)
            elif per_minibatch:
                minibatches = self._column_minibatches(obs, actions, active)
            else:
                minibatches = self._row_minibatches(obs, actions, active)
            for idx, weight, logp, entropy, value in minibatches:
                if per_minibatch:
                    self._vtrace_from_pass(flat, batch, trunc_values, last_value, idx, logp, value,
                                           first_visit=epoch == 0)
                log_ratio = (logp - flat["old_logp"][idx]).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
                ratio = log_ratio.exp()
                adv = flat["adv"][idx]
                if cfg.norm_adv:
                    centred = adv - _mean(adv, weight)
                    adv = centred / (_mean(centred ** 2, weight).sqrt() + 1e-8)
                policy_loss = -_mean(clipped_surrogate(ratio, adv, cfg.clip_coef, cfg.dual_clip), weight)
                value_error = (value - flat["ret"][idx]) ** 2
                if cfg.value_clip > 0:
                    old_v = flat["old_v"][idx]
                    clipped = old_v + (value - old_v).clamp(-cfg.value_clip, cfg.value_clip)
                    value_error = torch.max(value_error, (clipped - flat["ret"][idx]) ** 2)
                value_loss = 0.5 * _mean(value_error, weight)
                loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * _mean(entropy, weight)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                if not torch.isfinite(grad_norm):  # a step along it would make every weight NaN: skip it
                    nonfinite_steps += 1
                    continue
                self.optimizer.step()
                with torch.no_grad():
                    stats["policy_loss"].append(policy_loss.item())
                    stats["value_loss"].append(value_loss.item())
                    stats["entropy"].append(_mean(entropy, weight).item())
                    stats["approx_kl"].append(_mean((ratio - 1) - log_ratio, weight).item())
                    stats["clip_frac"].append(_mean(((ratio - 1).abs() > cfg.clip_coef).float(), weight).item())
                    if cfg.dual_clip:
                        stats["dual_clip_frac"].append(_mean(((adv < 0) & (ratio > cfg.dual_clip)).float(),
                                                             weight).item())
        result = {k: float(np.mean(v)) for k, v in stats.items() if v}  # empty when every sample was too stale
        result["sample_reuse"] = samples_used / max(1, int(happened.sum()))
        result["nonfinite_steps"] = nonfinite_steps
        lag = staleness[happened].float()  # versions between acting and this update: what V-trace corrects
        result["policy_lag_mean"] = lag.mean().item() if len(lag) else 0.0
        result["policy_lag_max"] = lag.max().item() if len(lag) else 0.0
        if self.value_normalizer is not None:
            result["value_mean"], result["value_std"] = self.value_normalizer.mean_std()
        return result

    # ------------------------------------------------------------------ V-trace
    def _vtrace(self, batch: Batch, values: np.ndarray, trunc_values: np.ndarray, last_value: np.ndarray,
                logp_now: np.ndarray, columns: Any = slice(None), weight_advantages: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
        """V-trace ``(advantages, returns)`` of the batch's fragment ``columns`` (all by default)."""
        cfg = self.config
        return vtrace(batch["rewards"][:, columns], values, batch["terminated"][:, columns],
                      batch["truncated"][:, columns], trunc_values[:, columns], last_value[columns],
                      logp_now - batch["logp"][:, columns], cfg.gamma, cfg.vtrace_rho_bar, cfg.vtrace_c_bar,
                      cfg.gae_lambda, weight_advantages)

    @torch.no_grad()
    def _vtrace_from_pass(self, flat: dict[str, torch.Tensor], batch: Batch, trunc_values: np.ndarray,
                          last_value: np.ndarray, idx: torch.Tensor, logp: torch.Tensor, value: torch.Tensor,
                          first_visit: bool) -> None:
        """``vtrace_minibatch``: fill ``flat``'s advantages and value targets at a column minibatch's rows
        ``idx`` (step-major) from V-trace on that minibatch's own log-probs and values. On a row's first
        visit its value also becomes the one the value clip measures from, and its returns update the
        value statistics for its share of the batch."""
        T, B = batch["rewards"].shape
        columns = idx[:len(idx) // T].cpu().numpy()  # step 0's rows are the columns
        logp_now = logp.view(T, -1).cpu().numpy()
        values = self._denormalize(value.view(T, -1).cpu().numpy())
        advantages, returns = self._vtrace(batch, values, trunc_values, last_value, logp_now, columns,
                                           weight_advantages=False)
        if first_visit:
            if self.value_normalizer is not None:
                self.value_normalizer.update(returns, share=len(columns) / B)
            flat["old_v"][idx] = torch.as_tensor(self._normalize(values).reshape(-1), device=idx.device)
        flat["adv"][idx] = torch.as_tensor(advantages.reshape(-1), device=idx.device)
        flat["ret"][idx] = torch.as_tensor(self._normalize(returns).reshape(-1), device=idx.device)

    # ------------------------------------------------------------------ minibatches
    def _row_minibatches(self, obs: Any, actions: torch.Tensor, active: torch.Tensor) -> Iterator[Minibatch]:
        """Feed-forward: shuffled rows of the flattened ``[T * B]`` batch (active rows only)."""
        rows, flat_actions = _flatten_steps(obs, actions)
        candidates = torch.nonzero(active).squeeze(-1)
        candidates = candidates[torch.randperm(len(candidates), device=candidates.device)]
        mb = min(self._minibatch_rows(len(candidates)), len(candidates))
        if mb == 0:
            return
        for start in range(0, len(candidates) - mb + 1, mb):
            idx = candidates[start:start + mb]
            logp, entropy, value = self.policy.evaluate(_take(rows, idx), flat_actions[idx])
            yield idx, torch.ones_like(logp), logp, entropy, value

    def _column_minibatches(self, obs: Any, actions: torch.Tensor, active: torch.Tensor) -> Iterator[Minibatch]:
        """``vtrace_minibatch``: shuffled whole fragment columns ``[T, columns]``, rows step-major."""
        T, B = actions.shape[:2]
        rows, flat_actions = _flatten_steps(obs, actions)
        active = active.view(T, B)
        columns = torch.nonzero(active.any(0)).squeeze(-1)
        columns = columns[torch.randperm(len(columns), device=columns.device)]
        per_mb = max(1, self._minibatch_rows(int(active.sum())) // T)
        steps = torch.arange(T, device=columns.device)
        for part in torch.tensor_split(columns, max(1, len(columns) // per_mb)):  # sizes within a column
            if len(part):
                idx = (steps[:, None] * B + part[None, :]).reshape(-1)
                logp, entropy, value = self.policy.evaluate(_take(rows, idx), flat_actions[idx])
                yield idx, active.reshape(-1)[idx].float(), logp, entropy, value

    def _minibatch_rows(self, rows: int) -> int:
        """Rows per minibatch: ``minibatch_size``, or ``rows`` split into ``minibatches`` (a batch that
        grows with the actors then keeps its count of gradient steps)."""
        return self.config.minibatch_size or max(1, rows // self.config.minibatches)

    def _chunk_minibatches(self, obs: Any, actions: torch.Tensor, states: torch.Tensor, first: torch.Tensor,
                           active: torch.Tensor, burn_in: int) -> Iterator[Minibatch]:
        """Recurrent: shuffled chunks ``[L, columns]``; each minibatch's chunks share a start step."""
        T, B = first.shape
        L = self._chunk_length(T)
        per_mb = max(1, min(self._minibatch_rows(int(active.sum())) // L, B))
        active = active.view(T, B)
        plan = []
        for start in range(0, T, L):
            columns = torch.nonzero(active[start:start + L].any(0)).squeeze(-1)
            columns = columns[torch.randperm(len(columns), device=columns.device)]
            plan += [(start, columns[i:i + per_mb]) for i in range(0, len(columns), per_mb)]
        for k in torch.randperm(len(plan)).tolist():
            start, cols = plan[k]
            logp, entropy, value = self._unroll(obs, actions, states, first, start, start + L, cols, burn_in)
            steps = torch.arange(start, start + L, device=cols.device)
            idx = (steps[:, None] * B + cols[None, :]).reshape(-1)
            yield idx, active.reshape(-1)[idx].float(), logp.reshape(-1), entropy.reshape(-1), value.reshape(-1)

    def _chunk_length(self, fragment_length: int) -> int:
        """BPTT steps per chunk (``chunk_length``, or the whole fragment), which must cut it into whole chunks."""
        L = self.config.chunk_length or fragment_length
        if fragment_length % L:
            raise ValueError(f"ppo.chunk_length={L} must divide the fragment length {fragment_length}")
        return L

    def _unroll(self, obs: Any, actions: torch.Tensor, states: torch.Tensor, first: torch.Tensor,
                start: int, stop: int, cols: torch.Tensor, burn_in: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[stop - start, len(cols)]``, from the stored state ``burn_in`` steps back."""
        warm = max(0, start - burn_in)
        state = states[warm, cols]
        if warm < start:
            with torch.no_grad():
                _, _, state = self.policy.distribution_and_value(_take(obs, (slice(warm, start), cols)),
                                                                 state, first[warm:start, cols])
        return self.policy.evaluate(_take(obs, (slice(start, stop), cols)), actions[start:stop, cols],
                                    state, first[start:stop, cols])

    @torch.no_grad()
    def _evaluate_everything(self, obs: Any, actions: torch.Tensor, states: torch.Tensor | None,
                             first: torch.Tensor) -> tuple[np.ndarray, np.ndarray, torch.Tensor | None]:
        """Current ``(log_probs, values)`` ``[T, B]`` of the whole batch, for V-trace, and ``states`` with
        each chunk's first step replaced by the state the current weights reach there (recurrent)."""
        T, B = first.shape
        if self.recurrent:  # whole fragments from their first stored state, a chunk at a time
            L = self._chunk_length(T)
            states, state = states.clone(), states[0]
            logps, values = [], []
            for start in range(0, T, L):
                states[start] = state
                dist, value, state = self.policy.distribution_and_value(_take(obs, slice(start, start + L)), state,
                                                                        first[start:start + L])
                logps.append(dist.log_prob(actions[start:start + L]))
                values.append(value)
            return torch.cat(logps).cpu().numpy(), torch.cat(values).cpu().numpy(), states
        rows, flat_actions = _flatten_steps(obs, actions)
        size = self._minibatch_rows(T * B)
        parts = [self.policy.evaluate(_take(rows, slice(i, i + size)), flat_actions[i:i + size])
                 for i in range(0, T * B, size)]
        logp, value = (torch.cat([p[k] for p in parts]).view(T, B).cpu().numpy() for k in (0, 2))
        return logp, value, None

    # ------------------------------------------------------------------ value scale
    def _normalize(self, x: np.ndarray) -> np.ndarray:
        return x if self.value_normalizer is None else self.value_normalizer.normalize(x)

    def _denormalize(self, x: np.ndarray) -> np.ndarray:
        return x if self.value_normalizer is None else self.value_normalizer.denormalize(x)

    # ------------------------------------------------------------------ checkpoints
    def optimizers(self) -> tuple[torch.optim.Optimizer, ...]:
        """Checkpoints save its state; data-parallel trainers average gradients before its steps."""
        return (self.optimizer,)

    def state_dict(self) -> dict[str, Any]:
        state = {**super().state_dict(), "env_steps_trained": self.env_steps_trained}
        if self.value_normalizer is not None:
            state["value_normalizer"] = self.value_normalizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.env_steps_trained = state["env_steps_trained"]
        if self.value_normalizer is not None and "value_normalizer" in state:
            self.value_normalizer.load_state_dict(state["value_normalizer"])


def _flatten_steps(obs: Any, actions: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """``[T, B, ...]`` observations and actions as ``[T * B, ...]`` rows, step-major."""
    return tree_map(lambda x: x.reshape(-1, *x.shape[2:]), obs), actions.reshape(-1, *actions.shape[2:])


def _take(obs: Any, index: Any) -> Any:
    return tree_map(lambda x: x[index], obs)


def _mean(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the samples with weight 1 (padding of masked steps has weight 0)."""
    return (x * weight).sum() / weight.sum().clamp(min=1.0)
