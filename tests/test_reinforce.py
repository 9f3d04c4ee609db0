"""
The gater's REINFORCE estimator: discounted_returns against a reverse loop, the batch baseline, and, on a tiny
U-Net whose every gate sequence is enumerated, that train.py's score-function loss has exactly the gradient of the
expected loss (reward-to-go is unbiased by causality); what the off-policy importance ratio does and does not
correct; the rate losses; and a sign check. train.py's step is inline, so its lines are mirrored in helpers below.
Run: python -m pytest -q tests/test_reinforce.py   (about 15 s on 2 cores)
"""
import itertools
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # harmless if conftest did it
from model import UNetConfig, ByteUNet, BOS, discounted_returns, hnet_ratio_loss, next_byte_nll, logit



# -----------------------------------------------------------------------------
# train.py's REINFORCE step, line for line (the "REINFORCE-with-discounting step" block of the training loop, from
# `m = M[:, 1:].float()` to `r_loss = ...`), cut into pieces so a test can swap one of them

def rewards_of(out, X, early_exit_reward):
    """ train.py: nll, nll_early = next_byte_nll(...); reward = (nll_early - nll).detach() if ... else -nll.detach() """
    nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X)
    return (nll_early - nll).detach() if early_exit_reward else -nll.detach() # (B, T-1)


def batch_advantage(reward, m):
    """ train.py: reward = reward - (reward * m).sum(0) / m.sum(0).clamp(min=1) """
    return reward - (reward * m).sum(0) / m.sum(0).clamp(min=1)


def returns_of(reward, m, gamma):
    """ train.py: returns = discounted_returns(reward * m, gamma); returns = F.pad(returns, (0, 1)) """
    return F.pad(discounted_returns(reward * m, gamma), (0, 1)) # (B, T)


def pg_terms(out, M, returns, behaviour=None):
    """ train.py, logp .. pg_loss: the entries -(ratio * returns * logp), (B, T); pg_loss is their sum / Mf.sum() """
    gate_logits, gate_probs, gates = out['gate_logits'].float(), out['gate_probs'].float(), out['gates']
    logp = -F.binary_cross_entropy_with_logits(gate_logits, gates.float(), reduction='none')
    q = gate_probs.detach() if behaviour is None else behaviour
    ratio = torch.where(gates > 0, gate_probs / q, (1 - gate_probs) / (1 - q)).detach()
    ratio = torch.where(M, ratio, 0.0)
    return -(ratio * returns * logp)


def pg_loss_of(out, X, M, gamma=0.99, early_exit_reward=True, batch_baseline=True, behaviour=None):
    """ train.py's pg_loss with its defaults """
    m = M[:, 1:].float()
    reward = rewards_of(out, X, early_exit_reward)
    if batch_baseline:
        reward = batch_advantage(reward, m)
    return pg_terms(out, M, returns_of(reward, m, gamma), behaviour).sum() / M.float().sum()


def rate_loss_ours(gate_logits, gate_probs, M, target):
    """ train.py: mean_p = ...; r_loss = (gate_logits * Mf).sum() / Mf.sum() * (mean_p - target).detach() """
    Mf = M.float()
    mean_p = (gate_probs * Mf).sum() / Mf.sum()
    return (gate_logits * Mf).sum() / Mf.sum() * (mean_p - target).detach()

# -----------------------------------------------------------------------------
# a tiny U-Net and every gate sequence of one row

ROW = [BOS] + list(b'x = 1\n') # T = 7: 5 free gates, 32 sequences


def tiny_model(gater='sequential', seed=0, **kw):
    """ float64 where model.py allows it: the gater, RMSNorm, RoPE and the softmax still compute in fp32.
        gate_scale=1 (not 1/16) so the policy really depends on the bytes and the gate history """
    torch.manual_seed(seed)
    cfg = dict(block_size=16, n_embd=16, n_head=2, n_down=1, n_mid=1, n_up=1, window=8, gater=gater,
               filter_size=3, gate_scale=1.0)
    model = ByteUNet(UNetConfig(**{**cfg, **kw})).double().train()
    if gater == 'linear': # starts with zero weights, p = rate everywhere: give it a policy that varies
        torch.nn.init.normal_(model.gater.proj.weight, std=0.5)
    return model


def all_gates(T):
    """ (2^(T-2), T): every assignment of the free gates 1..T-2, both ends forced to 1 """
    return torch.tensor([[1.0, *g, 1.0] for g in itertools.product([0.0, 1.0], repeat=T - 2)])


def enumerate_row(model, row=ROW):
    """ one forward over every gate sequence of the row: X, M, out, and pi(g) (float64) from the teacher-forced
        gate logits (the product over t of sigmoid-probabilities; the forced ends contribute log 1 = 0) """
    G = all_gates(len(row))
    X = torch.tensor(row).expand(len(G), -1)
    out = model(X, gates=G)
    assert torch.equal(out['gates'].float(), G)
    logp = -F.binary_cross_entropy_with_logits(out['gate_logits'].double(), G.double(), reduction='none')
    pi = logp.sum(1).exp()
    torch.testing.assert_close(pi.sum(), torch.tensor(1.0, dtype=torch.float64)) # a distribution over sequences
    return X, torch.ones_like(X, dtype=torch.bool), out, pi


def grad(loss, params):
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params, retain_graph=True)])


def assert_grad_close(est, exact):
    """ The identity is exact algebra, but the gater computes in fp32 (model.py: V = self.filter(x).float()) and so
        does train.py's logp. Each sequence contributes about pi * L * grad log pi with L ~ 40 nats, and those terms
        cancel between sequences down to a gradient ~20x smaller; fp32 rounding (6e-8) of such sums leaves ~1e-6 of
        the gradient's size. 1e-5 of the largest entry is ten times that, and 4 orders below any wrong estimator. """
    torch.testing.assert_close(est, exact, rtol=0, atol=1e-5 * exact.abs().max().item())


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()

# -----------------------------------------------------------------------------
# 1. discounted_returns

def loop_returns(r, gamma):
    """ the obvious reverse loop: G_t = r_t + gamma * G_{t+1}, G_T = 0 """
    G = torch.zeros_like(r)
    acc = torch.zeros_like(r[:, 0])
    for t in reversed(range(r.size(1))):
        acc = r[:, t] + gamma * acc
        G[:, t] = acc
    return G


def test_discounted_returns_docstring_example():
    G = discounted_returns(torch.tensor([[1.0, 0.0, 0.0, 2.0]]), 0.5)
    torch.testing.assert_close(G, torch.tensor([[1.25, 0.5, 1.0, 2.0]]))


def test_discounted_returns_matches_reverse_loop_with_padding():
    torch.manual_seed(0)
    r = torch.randn(4, 11, dtype=torch.float64)
    lengths = torch.tensor([11, 7, 3, 0]) # the last row is all padding
    m = (torch.arange(11)[None, :] < lengths[:, None]).double()
    for gamma in (0.0, 0.5, 0.99, 1.0):
        torch.testing.assert_close(discounted_returns(r, gamma), loop_returns(r, gamma))
        G = discounted_returns(r * m, gamma)
        torch.testing.assert_close(G, loop_returns(r * m, gamma))
        assert torch.all(G[m == 0] == 0), gamma # nothing flows back from the padding, and nothing flows into it
    assert torch.equal(discounted_returns(r, 0.0), r) # gamma = 0 is the identity
    r32 = r.float() # fp32 in, fp32 out, over a paper-length row
    long = torch.randn(2, 1023)
    assert discounted_returns(r32, 0.99).dtype == torch.float32
    torch.testing.assert_close(discounted_returns(long, 0.99), loop_returns(long.double(), 0.99).float(),
                               rtol=1e-5, atol=1e-4)

# -----------------------------------------------------------------------------
# 2. the batch baseline

def test_batch_advantage_centres_each_position_and_survives_all_padding():
    torch.manual_seed(0)
    reward = torch.randn(5, 9, dtype=torch.float64)
    lengths = torch.tensor([9, 6, 4, 4, 1])
    m = (torch.arange(9)[None, :] < lengths[:, None]).double()
    m[:, 7:] = 0.0 # positions 7 and 8 are padding in every row: 0/0 without the clamp
    A = batch_advantage(reward, m)
    assert torch.isfinite(A).all()
    torch.testing.assert_close((A * m).sum(0), torch.zeros(9, dtype=torch.float64), rtol=0, atol=1e-12)
    for t in range(7): # the baseline is the mean of the real rewards at that position
        real = m[:, t] > 0
        torch.testing.assert_close(A[real, t], reward[real, t] - reward[real, t].mean())
    assert torch.all((A * m)[:, 7:] == 0)
    G = returns_of(A, m, 0.99)
    assert torch.isfinite(G).all() and torch.all(G[:, 7:] == 0)

# -----------------------------------------------------------------------------
# 3. the score-function identity, by enumeration: E_pi[grad of pg_loss] = grad E_pi[loss]

def test_reward_to_go_is_the_exact_gradient_of_the_expected_loss():
    """ gate t is credited with the rewards of the predictions at >= t; the predictions before t cannot depend on
        g_t (causality), so dropping them from the credit keeps the estimator unbiased """
    model = tiny_model()
    X, M, out, pi = enumerate_row(model)
    params = list(model.gater.parameters())
    m = M[:, 1:].double()
    nll = next_byte_nll(out['logits'], X)
    exact = grad((pi * nll.sum(1).detach()).sum(), params) # d/dtheta sum_g pi(g) L(g)
    assert exact.norm() > 0.1

    reward = rewards_of(out, X, early_exit_reward=False) # -CE, no baseline, gamma = 1
    returns = returns_of(reward, m, 1.0)
    est = grad((pi.detach()[:, None] * pg_terms(out, M, returns)).sum(), params)
    assert_grad_close(est, exact)

    # the test has teeth: crediting gate t with the predictions from t+1 on misses the prediction at t, which reads
    # the chunk g_t closes, and the estimate is then far off
    shifted = F.pad(returns[:, 1:], (0, 1))
    wrong = grad((pi.detach()[:, None] * pg_terms(out, M, shifted)).sum(), params)
    assert rel_err(wrong, exact) > 0.1


def test_early_exit_reward_is_the_exact_gradient_of_the_expected_gain():
    """ r = CE_early - CE (train.py's default): E[grad of pg_loss] = grad E[sum(CE - CE_early)] """
    model = tiny_model(seed=1)
    X, M, out, pi = enumerate_row(model)
    params = list(model.gater.parameters())
    nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X)
    exact = grad((pi * (nll - nll_early).sum(1).detach()).sum(), params)
    returns = returns_of(rewards_of(out, X, early_exit_reward=True), M[:, 1:].double(), 1.0)
    est = grad((pi.detach()[:, None] * pg_terms(out, M, returns)).sum(), params)
    assert_grad_close(est, exact)


def test_batch_baseline_scales_the_expected_gradient_by_b_minus_1_over_b():
    """ train.py's baseline is the batch mean at each position, each row's own reward included: the other rows'
        part has zero mean against this row's score, its own part takes 1/B of it back, so with B rows of full
        length the expected gradient is exactly (B-1)/B times the true one (same direction, unbiased up to scale) """
    model = tiny_model(seed=2)
    rows = [[BOS] + list(b'ab c'), [BOS] + list(b'if :'), [BOS] + list(b'x+=1')] # T = 5: 3 free gates each
    B, G1 = len(rows), all_gates(5)
    combos = list(itertools.product(range(len(G1)), repeat=B)) # every joint draw of the batch, 512
    X = torch.tensor([rows[b] for _ in combos for b in range(B)])
    G = torch.stack([G1[i] for c in combos for i in c])
    out = model(X, gates=G)
    M = torch.ones_like(X, dtype=torch.bool)
    logp = -F.binary_cross_entropy_with_logits(out['gate_logits'].double(), G.double(), reduction='none')
    pi = logp.sum(1).view(len(combos), B).sum(1).exp() # probability of the joint draw
    params = list(model.gater.parameters())
    nll = next_byte_nll(out['logits'], X)
    exact = grad((pi * nll.sum(1).view(len(combos), B).sum(1).detach()).sum(), params) # grad E[sum_b L_b]
    reward, m = rewards_of(out, X, early_exit_reward=False), M[:, 1:].double()
    A = torch.cat([batch_advantage(reward[k:k + B], m[k:k + B]) for k in range(0, len(X), B)]) # per micro-batch
    terms = pg_terms(out, M, returns_of(A, m, 1.0)).sum(1).view(len(combos), B).sum(1)
    est = grad((pi.detach() * terms).sum(), params)
    assert_grad_close(est, (B - 1) / B * exact)

# -----------------------------------------------------------------------------
# 4. the off-policy importance ratio (the warm start): train.py weights each decision by its own ratio
# rho_t = pi_t / q_t, not by the product over the gates drawn so far. That is unbiased only when the gates are
# independent AND each reward depends on its own gate only; otherwise the other gates come from q, not pi.

Q = 0.3 # the behaviour policy: free gates i.i.d. Bernoulli(Q)


def behaviour_probs(G):
    """ q(g) over the free gates of each row of G (the forced ends are not drawn) """
    free = G[:, 1:-1].double()
    return (Q ** free * (1 - Q) ** (1 - free)).prod(1)


def off_policy_expectation(model, reward_fn, weight='per_decision'):
    """ sum_g q(g) * grad of the importance-weighted pg loss, gamma = 1, no baseline; and the on-policy exact grad """
    X, M, out, pi = enumerate_row(model)
    params = list(model.gater.parameters())
    G, m = out['gates'], M[:, 1:].double()
    reward = reward_fn(out, X, G)
    exact = grad((pi * -reward.sum(1)).sum(), params) # grad sum_g pi(g) L(g), L = -sum of rewards
    behaviour = torch.full(X.shape, Q, dtype=torch.float64)
    if weight == 'per_decision': # train.py
        terms = pg_terms(out, M, returns_of(reward, m, 1.0), behaviour)
    else: # the whole sequence's ratio pi(g) / q(g) on every decision
        terms = pg_terms(out, M, returns_of(reward, m, 1.0)) * (pi / behaviour_probs(G)).detach()[:, None]
    return grad((behaviour_probs(G)[:, None] * terms).sum(), params), exact


def ce_reward(out, X, G):
    return rewards_of(out, X, early_exit_reward=False)


def local_reward(out, X, G):
    """ a reward per prediction that depends on its own gate only: r_k = c_k + d_k g_k """
    c = torch.linspace(-1, 1, X.size(1) - 1, dtype=torch.float64)
    d = torch.linspace(2, -1, X.size(1) - 1, dtype=torch.float64)
    return c + d * G[:, :-1].double()


def test_sequence_ratio_makes_off_policy_gates_unbiased():
    model = tiny_model(seed=3)
    est, exact = off_policy_expectation(model, ce_reward, weight='sequence')
    assert_grad_close(est, exact)


def test_per_decision_ratio_is_unbiased_for_independent_gates_and_local_rewards():
    for gater, kw in (('linear', {}), ('sequential', dict(filter_size=1))): # filter_size 1: no gate history
        est, exact = off_policy_expectation(tiny_model(gater, seed=4, **kw), local_reward)
        assert_grad_close(est, exact)


def test_per_decision_ratio_is_biased_otherwise():
    """ what train.py's warm start really estimates: each decision's gradient with every OTHER gate drawn from q.
        Biased when a reward depends on several gates (the U-Net's CE) or when the policy sees its history """
    for gater, reward_fn in (('linear', ce_reward), ('sequential', ce_reward), ('sequential', local_reward)):
        est, exact = off_policy_expectation(tiny_model(gater, seed=5), reward_fn)
        assert rel_err(est, exact) > 0.02, (gater, reward_fn.__name__)


def test_on_policy_ratio_is_one():
    model = tiny_model(seed=6)
    X = torch.tensor(ROW).expand(8, -1)
    torch.manual_seed(0)
    out = model(X) # sampled by the gater's own scan
    q = out['gate_probs'].detach().float()
    gp, gates = out['gate_probs'].float(), out['gates']
    ratio = torch.where(gates > 0, gp / q, (1 - gp) / (1 - q)).detach() # train.py's line
    assert torch.equal(ratio, torch.ones_like(ratio))

# -----------------------------------------------------------------------------
# 5. rate control

def test_rate_loss_ours_pushes_every_real_logit_equally():
    torch.manual_seed(0)
    gate_logits = torch.randn(3, 10, dtype=torch.float64, requires_grad=True)
    M = torch.ones(3, 10, dtype=torch.bool)
    M[1, 6:] = False
    M[2, 3:] = False
    target = 0.2
    probs = torch.sigmoid(gate_logits)
    r_loss = rate_loss_ours(gate_logits, probs, M, target)
    r_loss.backward()
    N = M.sum()
    mean_p = probs[M].mean()
    expected = torch.where(M, (mean_p - target) / N, 0.0).detach()
    torch.testing.assert_close(gate_logits.grad, expected)


def realised_rate_after(gater, start_rate, target, steps=50, **kw):
    """ Adam on the 'ours' rate loss alone; the mean gate probability over the real positions (forced ends
        included, as the loss counts them: 2 of 16) before and after """
    model = tiny_model(gater, seed=7, rate=start_rate, **kw).float()
    lin = model.gater.proj if gater == 'linear' else model.gater.filter
    torch.nn.init.zeros_(lin.weight) # p = start_rate at every free position (the linear gater's own init)
    torch.nn.init.constant_(lin.bias, logit(start_rate) if gater == 'linear' else 0.0) # sequential: bias built in
    torch.manual_seed(0)
    X = torch.randint(0, 256, (8, 16))
    X[:, 0] = BOS
    M = torch.ones_like(X, dtype=torch.bool)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    rates = []
    for _ in range(steps + 1):
        out = model(X)
        rates.append(out['gate_probs'][M].mean().item())
        r_loss = rate_loss_ours(out['gate_logits'].float(), out['gate_probs'].float(), M, target)
        opt.zero_grad()
        r_loss.backward()
        opt.step()
    return rates[0], rates[-1]


def test_rate_loss_ours_moves_the_rate_toward_the_target():
    target = 0.2
    for gater in ('linear', 'sequential'):
        for start in (0.5, 0.02): # from above and from below
            before, after = realised_rate_after(gater, start, target)
            assert (after < before) == (before > target), (gater, start, before, after)
            assert abs(after - target) < 0.5 * abs(before - target), (gater, start, before, after)


def test_hnet_ratio_loss_gradient():
    N = 5.0 # 1 / rate
    torch.manual_seed(0)
    gates = (torch.rand(4, 12) < 0.3).float()
    probs = torch.rand(4, 12, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[3, 5:] = False
    loss = hnet_ratio_loss(gates, probs, 1 / N, mask)
    loss.backward()
    Fr = gates[mask].mean().item()
    dG = N / (N - 1) * (N * Fr - 1) # d loss / d G, G = mean of probs over the real positions
    torch.testing.assert_close(probs.grad, torch.where(mask, dG / mask.sum(), 0.0).double())
    on_target = torch.tensor([[1.0, 0, 0, 0, 0]] * 2) # F = G = rate: the minimum value 1
    torch.testing.assert_close(hnet_ratio_loss(on_target, torch.full((2, 5), 0.2), 0.2), torch.tensor(1.0))

# -----------------------------------------------------------------------------
# 6. sign check: a gate that lowers the loss becomes more likely under pg_loss alone

def gate_prob_after(sign, j=5, steps=20):
    """ reward +sign for the prediction at j if gate j is 1 (so a gate there helps when sign = +1), on-policy
        gates, train.py's baseline and gamma; Adam on pg_loss alone; the mean probability of gate j, before and
        after """
    model = tiny_model('linear', seed=8).float()
    torch.nn.init.zeros_(model.gater.proj.weight) # p = 0.2 at every position
    X = torch.tensor(ROW + list(b'y = 2\n\n\n')).expand(32, -1)
    M = torch.ones_like(X, dtype=torch.bool)
    opt = torch.optim.Adam(model.gater.parameters(), lr=0.05)
    torch.manual_seed(0)
    probs = []
    for _ in range(steps + 1):
        out = model(X)
        probs.append(out['gate_probs'][:, j].mean().item())
        reward = torch.zeros(X.size(0), X.size(1) - 1)
        reward[:, j] = sign * out['gates'][:, j].float()
        m = M[:, 1:].float()
        pg_loss = pg_terms(out, M, returns_of(batch_advantage(reward, m), m, 0.99)).sum() / M.float().sum()
        opt.zero_grad()
        pg_loss.backward()
        opt.step()
    return probs[0], probs[-1]


def test_pg_loss_raises_a_helpful_gate_and_lowers_a_harmful_one():
    before, after = gate_prob_after(+1)
    assert before < 0.21 and after > 0.8, (before, after)
    before, after = gate_prob_after(-1)
    assert before < 0.21 and after < 0.05, (before, after)


def test_pg_loss_defaults_are_finite_with_padding():
    """ the defaults path (early-exit reward, baseline, gamma 0.99) runs end to end and is finite with padding """
    model = tiny_model(seed=9).float()
    X = torch.tensor(ROW * 2).view(2, -1)
    M = torch.ones_like(X, dtype=torch.bool)
    M[1, 9:] = False
    torch.manual_seed(0)
    out = model(X)
    loss = pg_loss_of(out, X, M)
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.gater.parameters())
