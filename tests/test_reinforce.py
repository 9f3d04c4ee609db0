"""
The gater's REINFORCE estimator, run through train.py's own lines: the block between its markers
`# --- the REINFORCE step` and `# --- end of the REINFORCE step ---` is cut out of train.py's source and executed here
on a model's output (if train.py drifts, these tests see it). Checked: discounted_returns against a reverse loop; the
batch baseline; on a tiny U-Net whose every gate sequence is enumerated, that the step's pg_loss has exactly the
gradient of the expected loss (reward-to-go is unbiased by causality), with the early-exit reward too, and the batch
baseline's (B-1)/B; the rate losses; which parameters each loss trains; and a sign check.
Run: python -m pytest -q tests/test_reinforce.py   (about 15 s on 2 cores)
"""
import ast
import itertools
import os
import textwrap

import torch
import torch.nn.functional as F

from conftest import ROOT
from model import UNetConfig, ByteUNet, BOS, binomial_prior, discounted_returns, hnet_ratio_loss, logit, next_byte_nll

# -----------------------------------------------------------------------------
# train.py's REINFORCE step, as it ships

TRAIN = open(os.path.join(ROOT, 'train.py')).read()


def step_source(src=TRAIN):
    """ the lines between train.py's two step markers, dedented """
    lines = src.splitlines()
    a = [i for i, line in enumerate(lines) if line.strip().startswith('# --- the REINFORCE step')]
    b = [i for i, line in enumerate(lines) if line.strip() == '# --- end of the REINFORCE step ---']
    assert len(a) == 1 and len(b) == 1 and a[0] < b[0], "train.py lost its REINFORCE step markers"
    return textwrap.dedent('\n'.join(lines[a[0] + 1:b[0]]))


TREE = ast.parse(TRAIN)
IMPORTS = compile(ast.Module([n for n in TREE.body if isinstance(n, (ast.Import, ast.ImportFrom))
                              or isinstance(n, ast.FunctionDef) and n.name == 'position_mean'], type_ignores=[]),
                  'train.py', 'exec') # the names the step uses, as train.py imports and defines them
DEFAULTS = {n.targets[0].id: n.value.value for n in TREE.body if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)} # gamma, pg_weight, ...


def step(out, X, M, src=None, **config):
    """ train.py's step on one micro-batch of one process (share = 1), train.py's defaults unless overridden:
        its namespace after the step (reward, advantage, returns, logp, pg_loss, r_loss, loss, ...) """
    ns = dict(DEFAULTS, share=1, micro=0, device='cpu', out=out, X=X, M=M, **{'warm': False, **config})
    exec(IMPORTS, ns)
    exec(compile(src or STEP, 'train.py', 'exec'), ns)
    return ns


STEP = step_source()


def rows_of(out, i, j):
    """ the rows i:j of a forward's output dict """
    return {k: v[i:j] if torch.is_tensor(v) and v.dim() > 0 else v for k, v in out.items()}


def fake_out(B, T, seed=0):
    """ a forward's output without a model: random logits and gate logits, sampled gates """
    g = torch.Generator().manual_seed(seed)
    gate_logits = torch.randn(B, T, generator=g, dtype=torch.float64)
    probs = torch.sigmoid(gate_logits)
    return dict(logits=torch.randn(B, T, 256, generator=g), early_logits=torch.randn(B, T, 256, generator=g),
                gate_logits=gate_logits, gate_probs=probs, gates=torch.bernoulli(probs.detach(), generator=g))

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
    seqs = all_gates(len(row))
    X = torch.tensor(row).expand(len(seqs), -1)
    out = model(X, gates=seqs)
    assert torch.equal(out['gates'].float(), seqs)
    logp = -F.binary_cross_entropy_with_logits(out['gate_logits'].double(), seqs.double(), reduction='none')
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
    B, T = 5, 10
    M = torch.arange(T)[None, :] < torch.tensor([10, 7, 5, 5, 2])[:, None]
    M[:, 8:] = False # predictions 7 and 8 are padding in every row: 0/0 without the clamp
    ns = step(fake_out(B, T), torch.randint(0, 256, (B, T)), M)
    reward, A, m, returns = ns['reward'], ns['advantage'], M[:, 1:], ns['returns']
    assert torch.isfinite(A).all() and torch.isfinite(returns).all()
    torch.testing.assert_close(A.sum(0), torch.zeros(T - 1), rtol=0, atol=1e-5)
    for t in range(7): # the baseline is the mean of the real rewards at that position
        real = m[:, t]
        torch.testing.assert_close(A[real, t], reward[real, t] - reward[real, t].mean())
    assert torch.all(A[~m] == 0) and torch.all(returns[~M] == 0) # nothing from the padding, nothing into it

# -----------------------------------------------------------------------------
# 3. the score-function identity, by enumeration: E_pi[grad of pg_loss] = grad E_pi[loss]

def pg_sums(out, X, M, k, src=None, **config):
    """ train.py's pg_loss times its count of real gates, on each micro-batch of k consecutive rows: (len(X) / k,) """
    return torch.stack([step(rows_of(out, i, i + k), X[i:i + k], M[i:i + k], src, **config)['pg_loss'] * M[i:i + k].sum()
                        for i in range(0, len(X), k)])


ONE_ROW = dict(gamma=1.0, batch_baseline=False) # one row per micro-batch: no baseline, no discount


def test_reward_to_go_is_the_exact_gradient_of_the_expected_loss():
    """ gate t is credited with the rewards of the predictions at >= t; the predictions before t cannot depend on
        g_t (causality), so dropping them from the credit keeps the estimator unbiased """
    model = tiny_model()
    X, M, out, pi = enumerate_row(model)
    params = list(model.gater.parameters())
    exact = grad((pi * next_byte_nll(out['logits'], X).sum(1).detach()).sum(), params) # d/dtheta sum_g pi(g) L(g)
    assert exact.norm() > 0.1
    est = grad((pi.detach() * pg_sums(out, X, M, 1, early_exit_reward=False, **ONE_ROW)).sum(), params) # r = -CE
    assert_grad_close(est, exact)

    # the test has teeth: crediting gate t with the predictions from t+1 on misses the prediction at t, which reads
    # the chunk g_t closes, and the estimate is then far off
    line = 'F.pad(discounted_returns(advantage, gamma), (0, 1))'
    assert STEP.count(line) == 1, f"train.py's step no longer has `{line}`: update this mutation"
    shifted = STEP.replace(line, 'F.pad(discounted_returns(advantage, gamma)[:, 1:], (0, 2))')
    wrong = grad((pi.detach() * pg_sums(out, X, M, 1, shifted, early_exit_reward=False, **ONE_ROW)).sum(), params)
    assert rel_err(wrong, exact) > 0.1


def test_early_exit_reward_is_the_exact_gradient_of_the_expected_gain():
    """ r = CE_early - CE (train.py's default): E[grad of pg_loss] = grad E[sum(CE - CE_early)] """
    model = tiny_model(seed=1)
    X, M, out, pi = enumerate_row(model)
    params = list(model.gater.parameters())
    nll, nll_early = next_byte_nll(out['logits'], X), next_byte_nll(out['early_logits'], X)
    exact = grad((pi * (nll - nll_early).sum(1).detach()).sum(), params)
    assert DEFAULTS['early_exit_reward']
    est = grad((pi.detach() * pg_sums(out, X, M, 1, **ONE_ROW)).sum(), params)
    assert_grad_close(est, exact)


def test_batch_baseline_scales_the_expected_gradient_by_b_minus_1_over_b():
    """ train.py's baseline is the batch mean at each position, each row's own reward included: the other rows'
        part has zero mean against this row's score, its own part takes 1/B of it back, so with B rows of full
        length the expected gradient is exactly (B-1)/B times the true one (same direction, unbiased up to scale) """
    model = tiny_model(seed=2)
    rows = [[BOS] + list(b'ab c'), [BOS] + list(b'if :'), [BOS] + list(b'x+=1')] # T = 5: 3 free gates each
    B, seqs1 = len(rows), all_gates(5)
    combos = list(itertools.product(range(len(seqs1)), repeat=B)) # every joint draw of the batch, 512
    X = torch.tensor([rows[b] for _ in combos for b in range(B)])
    seqs = torch.stack([seqs1[i] for c in combos for i in c])
    out = model(X, gates=seqs)
    M = torch.ones_like(X, dtype=torch.bool)
    logp = -F.binary_cross_entropy_with_logits(out['gate_logits'].double(), seqs.double(), reduction='none')
    pi = logp.sum(1).view(len(combos), B).sum(1).exp() # probability of the joint draw
    params = list(model.gater.parameters())
    nll = next_byte_nll(out['logits'], X)
    exact = grad((pi * nll.sum(1).view(len(combos), B).sum(1).detach()).sum(), params) # grad E[sum_b L_b]
    assert DEFAULTS['batch_baseline']
    est = grad((pi.detach() * pg_sums(out, X, M, B, gamma=1.0, early_exit_reward=False)).sum(), params)
    assert_grad_close(est, (B - 1) / B * exact)


def test_draws_leave_one_out_baseline_is_unbiased():
    """ --draws=2 (a lever beyond the paper): each draw of a row is centred by the reward of the row's other draw,
        which does not depend on its own gates, so each draw's expected gradient is exactly the true one: no (B-1)/B
        shrink as with the batch mean, which includes the draw's own reward """
    model = tiny_model(seed=3)
    seqs1 = all_gates(len(ROW))
    combos = list(itertools.product(range(len(seqs1)), repeat=2)) # every joint draw of the row's two draws, 1024
    X = torch.tensor([ROW for _ in combos for _ in range(2)])
    seqs = torch.stack([seqs1[i] for c in combos for i in c])
    out = model(X, gates=seqs)
    M = torch.ones_like(X, dtype=torch.bool)
    logp = -F.binary_cross_entropy_with_logits(out['gate_logits'].double(), seqs.double(), reduction='none')
    pi = logp.sum(1).view(len(combos), 2).sum(1).exp()
    params = list(model.gater.parameters())
    exact = grad((pi * next_byte_nll(out['logits'], X).sum(1).view(len(combos), 2).sum(1).detach()).sum(), params)
    cfg = dict(gamma=1.0, early_exit_reward=False)
    est = grad((pi.detach() * pg_sums(out, X, M, 2, draws=2, **cfg)).sum(), params)
    assert_grad_close(est, exact)
    batch = grad((pi.detach() * pg_sums(out, X, M, 2, **cfg)).sum(), params) # draws=1: the batch mean of 2 rows
    assert_grad_close(batch, exact / 2)


def test_gate_warmup_leaves_only_the_byte_losses():
    """ --gate_warmup: while warm, the loss is the byte losses alone; the gater's own losses are off """
    X = torch.randint(0, 256, (3, 10))
    M = torch.ones_like(X, dtype=torch.bool)
    warm, cold = (step(fake_out(3, 10), X, M, warm=w) for w in (True, False))
    byte = (1 - DEFAULTS['early_weight']) * warm['lm_loss'] + DEFAULTS['early_weight'] * warm['early_loss']
    assert torch.equal(warm['loss'], byte) and warm['pg_loss'] != 0
    assert not torch.equal(cold['loss'], byte)

# -----------------------------------------------------------------------------
# 4. rate control

def test_rate_loss_ours_pushes_every_real_logit_equally():
    out = fake_out(3, 10)
    gate_logits = out['gate_logits'].float().requires_grad_()
    probs = torch.sigmoid(gate_logits)
    M = torch.ones(3, 10, dtype=torch.bool)
    M[1, 6:] = False
    M[2, 3:] = False
    target = 0.2
    assert DEFAULTS['rate_loss'] == 'ours'
    step(dict(out, gate_logits=gate_logits, gate_probs=probs), torch.zeros(3, 10, dtype=torch.long), M,
         rate=target)['r_loss'].backward()
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
        r_loss = step(out, X, M, rate=target)['r_loss']
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
    dP = N / (N - 1) * (N * Fr - 1) # d loss / d P, P = mean of probs over the real positions
    torch.testing.assert_close(probs.grad, torch.where(mask, dP / mask.sum(), 0.0).double())
    on_target = torch.tensor([[1.0, 0, 0, 0, 0]] * 2) # F = P = rate: the minimum value 1
    torch.testing.assert_close(hnet_ratio_loss(on_target, torch.full((2, 5), 0.2), 0.2), torch.tensor(1.0))

def test_rate_loss_binomial_holds_nawrots_hard_rate_at_the_target():
    """ rate_loss='binomial' (Nawrot et al.'s prior) through train.py's step: its value is the prior of the hard gate
        count over the real bytes, and its gradient reaches the gater through the straight-through gates alone, enough
        for Adam on it alone to bring the hard rate from either side to the target (the forced ends counted, as the
        prior counts them; rows of 64 bytes, so that they weigh little) """
    target = 0.2
    for start in (0.5, 0.01):
        model = tiny_model('nawrot', seed=7, nawrot_temp=1.0, block_size=64).float()
        last = model.gater.mlp[-1]
        torch.nn.init.zeros_(last.weight)
        torch.nn.init.constant_(last.bias, logit(start)) # hard rate P(s > 1/2) = start at temperature 1
        torch.manual_seed(0)
        X = torch.randint(0, 256, (16, 64))
        X[:, 0] = BOS
        M = torch.ones_like(X, dtype=torch.bool)
        M[3, 40:] = False
        opt = torch.optim.Adam(model.gater.parameters(), lr=0.05)
        rates = []
        for _ in range(41):
            out = model(X)
            rates.append(out['gates'][M].float().mean().item())
            r_loss = step(out, X, M, rate=target, rate_loss='binomial')['r_loss']
            torch.testing.assert_close(r_loss, binomial_prior(out['gates'].float(), target, M))
            opt.zero_grad()
            r_loss.backward()
            opt.step()
        after = sum(rates[-10:]) / 10 # the gates are drawn: the mean of the last few steps
        assert abs(rates[0] - target) > 0.15 and abs(after - target) < 0.03, (start, rates[0], after)


# -----------------------------------------------------------------------------
# 5. what each loss trains

REACHES = {  # loss -> the parameter groups it sends a gradient to (the paper's gater, select, add); none to the others
    'lm_loss': {'wte', 'down', 'mid', 'up', 'lm_head'},  # the gates are hard: the byte loss never reaches the gater
    'early_loss': {'wte', 'down', 'early_head'},
    'pg_loss': {'wte', 'down', 'gater'},  # the gater reads x, not detached (as the paper): its losses train the down
    'r_loss': {'wte', 'down', 'gater'},   # layers and the embedding too
}


def reached(model, loss):
    """ the parameter groups (wte, down, mid, ..., the first name of a parameter) where loss has a non-zero gradient,
        and those where it has none, from train.py's step on one micro-batch of the model's own gates """
    torch.manual_seed(0)
    X = torch.tensor(ROW * 4).view(4, -1)
    ns = step(model(X), X, torch.ones_like(X, dtype=torch.bool))
    named = list(model.named_parameters())
    grads = torch.autograd.grad(ns[loss], [p for _, p in named], allow_unused=True)
    live = {n.split('.')[0]: False for n, _ in named}
    for (n, _), g in zip(named, grads):
        live[n.split('.')[0]] |= g is not None and bool(g.abs().sum() > 0)
    return {k for k, v in live.items() if v}, {k for k, v in live.items() if not v}


def test_each_loss_trains_its_parameter_groups():
    """ the gater's two losses train the gater, and through x the down layers and the embedding; the byte losses
        everything on their path but the gater """
    model = tiny_model(seed=10).float()
    for loss, groups in REACHES.items():
        some, none = reached(model, loss)
        assert some == groups and none == {'wte', 'down', 'mid', 'up', 'gater', 'lm_head', 'early_head'} - groups, loss

    # the test has teeth: a gater that read x.detach() would train neither the down layers nor the embedding
    forward = model.gater.forward
    model.gater.forward = lambda x, idx, gates=None: forward(x.detach(), idx, gates)
    assert reached(model, 'pg_loss')[0] == reached(model, 'r_loss')[0] == {'gater'}

# -----------------------------------------------------------------------------
# 6. sign check: a gate that lowers the loss becomes more likely under pg_loss alone

def gate_prob_after(sign, j=5, steps=20):
    """ reward about +3 sign for the prediction at j if gate j is 1 (so a gate there helps when sign = +1), 0
        otherwise: the early exit's logit of byte j+1 is -3 sign g_j, the final head's logits are all 0. On-policy
        gates, train.py's baseline and gamma; Adam on pg_loss alone; the mean probability of gate j, before and after """
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
        early = torch.zeros(*X.shape, 256)
        early[:, j, X[0, j + 1]] = -3.0 * sign * out['gates'][:, j].detach().float()
        pg_loss = step(dict(out, logits=torch.zeros(*X.shape, 256), early_logits=early), X, M)['pg_loss']
        opt.zero_grad()
        pg_loss.backward()
        opt.step()
    return probs[0], probs[-1]


def test_pg_loss_raises_a_helpful_gate_and_lowers_a_harmful_one():
    before, after = gate_prob_after(+1)
    assert before < 0.21 and after > 0.8, (before, after)
    before, after = gate_prob_after(-1)
    assert before < 0.21 and after < 0.05, (before, after)


def test_the_step_with_its_defaults_is_finite_with_padding():
    """ the defaults path (early-exit reward, baseline, gamma 0.99, every loss) runs end to end, finite with padding """
    model = tiny_model(seed=9).float()
    X = torch.tensor(ROW * 2).view(2, -1)
    M = torch.ones_like(X, dtype=torch.bool)
    M[1, 9:] = False
    torch.manual_seed(0)
    out = model(X)
    loss = step(out, X, M)['loss'] # the whole loss of train.py's defaults
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.gater.parameters())
