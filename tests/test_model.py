"""
Tests for model.py, read as its specification: causality of every gater x (downsampler, upsampler) pair in train
and eval mode, chunk padding, the chunk index helpers on worked examples, each gater's contract, the straight-through
baselines (H-Net, Nawrot), attention and its sliding window, generate, parameter counts, encode/decode.
Tiny float32 models on the CPU (a few run under bfloat16 autocast). Run: python -m pytest -q tests/test_model.py
"""
import itertools
import os
import time
import math

import pytest
import torch
import torch.nn.functional as F

import model
from model import (BOS, DOWNSAMPLERS, GATERS, PRESETS, UPSAMPLERS, WHITESPACE, AddUpsampler, ByteUNet, HNetUpsampler,
                   MeanDownsampler, NawrotDownsampler, NawrotGater, SequentialGater, UNetConfig, attention,
                   binomial_prior, boundary_counts, boundary_metrics, chunk_ends, chunk_ids, decode, ema_scan, encode,
                   gather, hnet_ratio_loss, is_space, nawrot_onehot, next_byte_nll, read_ids)
from common import BPE_PAT, bpe_gates, load_bpe, save_bpe, train_bpe

PAIRS = list(itertools.product(DOWNSAMPLERS, UPSAMPLERS)) # every (down, up) pair is valid, and causal
COMBOS = [(g, d, u) for g in GATERS for d, u in PAIRS]  # every gater with every (down, up) pair
EXACT = dict(rtol=0, atol=1e-6)                          # "unchanged": float32 noise at most, nothing learned



def tiny(**kw):
    """ the test config: small enough for the CPU, window 8 so the sliding window matters within 64 bytes """
    return UNetConfig(**{**dict(n_embd=32, n_head=2, n_down=1, n_mid=2, n_up=1, block_size=64, window=8), **kw})


def make_model(seed=0, perturb=True, **kw):
    """ a tiny model; perturb moves every weight off its init (zero-init projections, p = rate gaters, norms at 1)
        so that a leak cannot hide behind a zero """
    torch.manual_seed(seed)
    m = ByteUNet(tiny(**kw))
    if perturb:
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.1 * torch.randn_like(p))
    return m


def rows(B, T, seed):
    """ (B, T) ids: BOS, then random bytes, a quarter of them spaces (so the whitespace gater finds boundaries) """
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, 256, (B, T), generator=gen)
    idx[torch.rand(B, T, generator=gen) < 0.25] = 32
    idx[:, 0] = BOS
    return idx


def random_gates(rates, T, seed, ends=True):
    """ one row of Bernoulli(rate) gates per rate (so rows get different chunk counts), ends forced if asked """
    gen = torch.Generator().manual_seed(seed)
    g = (torch.rand(len(rates), T, generator=gen) < torch.tensor(rates)[:, None]).float()
    if ends:
        g[:, [0, -1]] = 1.0
    return g


def lm_loss(out, idx):
    return next_byte_nll(out['logits'], idx).mean() + next_byte_nll(out['early_logits'], idx).mean()


def ema_loop(z, p):
    """ the H-Net EMA as written in the paper: z_bar_k = p_k z_k + (1 - p_k) z_bar_{k-1}, z_bar_{-1} = 0 """
    out, prev = torch.zeros_like(z), torch.zeros_like(z[:, 0])
    for k in range(z.size(1)):
        prev = p[:, k, None] * z[:, k] + (1 - p[:, k, None]) * prev
        out[:, k] = prev
    return out

# -----------------------------------------------------------------------------
# Shapes and the one law: causality of every combination


@pytest.mark.parametrize('gater,down,up', COMBOS)
def test_forward_shapes_and_finite_loss(gater, down, up):
    m = make_model(perturb=False, gater=gater, downsampler=down, upsampler=up)
    idx = rows(3, 64, seed=0)
    out = m(idx)
    B, T = idx.shape
    assert out['logits'].shape == out['early_logits'].shape == (B, T, 320)
    assert out['gates'].dtype == torch.long and out['gates'].shape == (B, T)
    assert set(out['gates'].unique().tolist()) <= {0, 1}
    assert out['gate_logits'].shape == out['gate_probs'].shape == (B, T)
    assert torch.equal(out['n_chunks'], out['gates'].sum(-1))
    assert torch.isfinite(lm_loss(out, idx))


@pytest.mark.parametrize('gates_from', ['prescribed', 'sampled'])
@pytest.mark.parametrize('mode', ['train', 'eval'])
@pytest.mark.parametrize('gater,down,up', COMBOS)
def test_causal(gater, down, up, mode, gates_from):
    """ changing the bytes after t leaves everything at <= t alone: logits, early logits, sampled gates (same seed),
        and the gate logits and probabilities that REINFORCE differentiates. Row r changes after its own t (start, middle, end), so one pair of forwards checks three cuts;
        'prescribed' gives the rows different chunk counts, so chunk padding is in play too """
    m = make_model(gater=gater, downsampler=down, upsampler=up)
    m.train(mode == 'train')
    B, T, cuts = 3, 64, (1, 30, 62)
    idx = rows(B, T, seed=1)
    idx2 = idx.clone()
    for r, t in enumerate(cuts):
        idx2[r, t + 1:] = rows(1, T, seed=2 + r)[0, t + 1:]
        idx2[r, t + 1] = (idx[r, t + 1] + 1) % 256          # byte t+1 surely differs
    gates = random_gates([0.3, 0.1, 0.6], T, seed=3) if gates_from == 'prescribed' else None
    torch.manual_seed(4)
    a = m(idx, gates)
    torch.manual_seed(4)
    b = m(idx2, gates)
    # sampled gates may give the batch another chunk count S; the mid layers then sum in another order, so the
    # logits may move by float32 rounding (a few ulp of ~10): assert_close's float32 default instead of EXACT there
    tol = EXACT if a['n_chunks'].max() == b['n_chunks'].max() else {}
    for r, t in enumerate(cuts):
        assert torch.equal(a['gates'][r, :t + 1], b['gates'][r, :t + 1]), f'row {r}, t={t}'
        for key in ('logits', 'early_logits', 'gate_logits', 'gate_probs'):
            torch.testing.assert_close(a[key][r, :t + 1], b[key][r, :t + 1], **tol, msg=f'{key} row {r} t={t}')
        assert (a['logits'][r, t + 1] - b['logits'][r, t + 1]).abs().amax() > 1e-3  # the test can see a change


METHOD_COMBOS = [('uniform', 'select', 'add'), ('sequential', 'select', 'add'), ('linear', 'select', 'deviation'),
                 ('nawrot', 'nawrot', 'nawrot'), ('hnet', 'hnet', 'hnet'), ('whitespace', 'select', 'add')]


@pytest.mark.parametrize('gater,down,up', METHOD_COMBOS)
def test_causal_under_cpu_bfloat16_autocast(gater, down, up):
    """ train.py's --dtype=bfloat16 on a CPU: the same law in mixed precision, sampled gates, train mode """
    m = make_model(gater=gater, downsampler=down, upsampler=up).train()
    B, T, cuts = 3, 64, (1, 30, 62)
    idx = rows(B, T, seed=1)
    idx2 = idx.clone()
    for r, t in enumerate(cuts):
        idx2[r, t + 1:] = (idx[r, t + 1:] + 1) % 256
    with torch.autocast('cpu', dtype=torch.bfloat16):
        torch.manual_seed(4)
        a = m(idx)
        torch.manual_seed(4)
        b = m(idx2)
    assert a['logits'].dtype == torch.bfloat16 # autocast is on
    # another chunk count S may change the mid layers' summation order: bfloat16 rounding then, as test_causal's float32
    tol = EXACT if a['n_chunks'].max() == b['n_chunks'].max() else dict(rtol=1.6e-2, atol=1e-2)
    for r, t in enumerate(cuts):
        assert torch.equal(a['gates'][r, :t + 1], b['gates'][r, :t + 1]), f'row {r}, t={t}'
        for key in ('logits', 'early_logits', 'gate_logits', 'gate_probs'):
            torch.testing.assert_close(a[key][r, :t + 1], b[key][r, :t + 1], **tol, msg=f'{key} row {r} t={t}')
        assert (a['logits'][r, t + 1] - b['logits'][r, t + 1]).abs().amax() > 1e-1  # the test can see a change


@pytest.mark.parametrize('gater,down,up', METHOD_COMBOS)
def test_overfits_one_batch(gater, down, up):
    """ the method presets (config/method_*.py) learn: 25 AdamW steps on one batch cut the next-byte loss by over 2 nats """
    m = make_model(perturb=False, gater=gater, downsampler=down, upsampler=up)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    idx, losses = rows(4, 64, seed=40), []
    for _ in range(25):
        out = m(idx)
        loss = lm_loss(out, idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(next_byte_nll(out['logits'], idx).mean().item())
    assert losses[-1] < losses[0] - 2, losses


@pytest.mark.parametrize('gater,down,up', COMBOS)
def test_chunk_padding_never_reaches_a_real_chunk(gater, down, up):
    """ rows with about 20, 8 and 40 chunks in one batch: each row's logits are those of the row run alone (to
        float32 rounding: the kernels sum in another order for another batch or chunk count; a leak would be O(1)) """
    m = make_model(gater=gater, downsampler=down, upsampler=up).eval()
    idx, gates = rows(3, 64, seed=5), random_gates([0.3, 0.1, 0.6], 64, seed=6)
    out = m(idx, gates)
    assert len(set(out['n_chunks'].tolist())) == 3
    for b in range(3):
        alone = m(idx[b:b + 1], gates[b:b + 1])
        torch.testing.assert_close(out['logits'][b:b + 1], alone['logits'])


@pytest.mark.parametrize('gater', GATERS)
def test_forward_reads_nothing_back_but_the_chunk_count(gater, monkeypatch):
    """ on the 'meta' device, which holds no data (.item(), .tolist(), nonzero or a boolean mask index raise there), the
        forward runs with every downsampler once chunk_ends, whose chunk count is its one host sync, is stood in for;
        the hnet upsampler is left out only because autocast knows no 'meta' device """
    monkeypatch.setattr(model, 'chunk_ends', lambda g, dynamic=False: (g.new_zeros(g.size(0), 13).long(), g.sum(-1).long()))
    for down in DOWNSAMPLERS:
        with torch.device('meta'):
            m = ByteUNet(tiny(gater=gater, downsampler=down, word_rate=0.1)) # word_rate: the word gaters draw too
            assert m.train()(torch.zeros(2, 64, dtype=torch.long))['logits'].device.type == 'meta', down


def test_early_head_sees_one_window():
    """ with one down layer, early_logits[t] depends on exactly the `window` bytes t-window+1..t """
    m = make_model(n_down=1, window=8).eval()
    idx, t = rows(1, 40, seed=7), 30
    for j, changes in ((t - 8, False), (t - 7, True), (t, True)):
        idx2 = idx.clone()
        idx2[0, j] = (idx[0, j] + 1) % 256
        d = (m(idx)['early_logits'][0, t] - m(idx2)['early_logits'][0, t]).abs().amax()
        assert (d > 1e-4) if changes else (d == 0), f'byte {j}'

# -----------------------------------------------------------------------------
# Chunk index helpers: the docstring examples and the paper code's own test


def test_chunk_ids_and_read_ids_worked_example():
    g = torch.tensor([[1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1]])
    assert chunk_ids(g).tolist() == [[0, 1, 1, 2, 3, 3, 4, 5, 5, 5, 5]]
    assert read_ids(g).tolist() == [[0, 0, 1, 2, 2, 3, 4, 4, 4, 4, 5]]


def test_read_ids_is_chunk_ids_or_the_one_before():
    g = random_gates([0.2, 0.5, 0.9], 50, seed=8)
    assert torch.equal(read_ids(g), chunk_ids(g) - (1 - g).long())  # u = c at a gate, c - 1 elsewhere


def test_distribute_example():
    """ the example of the paper code's own upsampler test: g = 1 1 1 0 1 0 1, chunks 0..4 -> 0 1 2 2 3 3 4 """
    g = torch.tensor([[1, 1, 1, 0, 1, 0, 1]])
    z = torch.arange(5.0).view(1, 5, 1)
    assert gather(z, read_ids(g))[0, :, 0].tolist() == [0, 1, 2, 2, 3, 3, 4]


def test_chunk_ends_pads_with_zero():
    ends, n = chunk_ends(torch.tensor([[1., 0, 1, 1], [1, 0, 0, 1]]))
    assert ends.tolist() == [[0, 2, 3], [0, 3, 0]] and n.tolist() == [3, 2]
    ends, n = chunk_ends(torch.tensor([[1., 0, 0, 0, 1], [1, 1, 1, 1, 1]]))
    assert ends.tolist() == [[0, 4, 0, 0, 0], [0, 1, 2, 3, 4]] and n.tolist() == [2, 5]


@pytest.mark.parametrize('down,up', PAIRS)
@pytest.mark.parametrize('gater', ['sequential', 'nawrot', 'hnet'])  # the gaters whose probs or gates have gradients
def test_padded_chunk_slots_change_no_output(gater, down, up, monkeypatch):
    """ the mid level padded to 64 slots gives every output of the exact S: the padded slots follow every real chunk,
        so the causal mid layers, the EMA and the pooling never bring them back (to float32 rounding: the matmuls run
        over another length). Rows with fewer chunks than the batch's most are padded so in every forward """
    import model as model_py
    m = make_model(gater=gater, downsampler=down, upsampler=up).train()
    idx, gates = rows(3, 64, seed=7), random_gates([0.3, 0.1, 0.6], 64, seed=8)
    torch.manual_seed(9)
    want = m(idx, gates)
    exact, seen = model_py.chunk_ends, []
    def padded(g, dynamic=False):
        ends, n = exact(g)
        seen.append(ends.size(1))
        return F.pad(ends, (0, 64 - ends.size(1))), n
    monkeypatch.setattr(model_py, 'chunk_ends', padded)
    torch.manual_seed(9)
    got = m(idx, gates)
    assert seen == [want['n_chunks'].max()] and seen[0] < 64  # the padding is in play
    for key in ('logits', 'early_logits', 'gate_probs', 'gates', 'n_chunks'):
        torch.testing.assert_close(got[key], want[key], msg=key)


@pytest.mark.parametrize('down,up', [('mean', 'deviation'), ('nawrot', 'nawrot'), ('select', 'hnet')])
def test_compiled_model_takes_every_chunk_count_in_one_graph(down, up, monkeypatch):
    """ under torch.compile (eager backend: dynamo's capture; dynamic=False, so only chunk_ends' mark makes a length
        dynamic) batches of three chunk counts give eager's outputs with the graphs of the first; without the mark,
        each new count recompiles """
    import model as model_py
    m = make_model(gater='uniform', downsampler=down, upsampler=up).eval()
    idx = rows(3, 64, seed=10)
    batches = [random_gates(rates, 64, seed=11) for rates in ([0.3, 0.1, 0.6], [0.2, 0.1, 0.3], [0.8, 0.5, 0.1])]
    assert len({int(g.sum(-1).max()) for g in batches}) == 3
    marked = model_py.chunk_ends
    for chunk_ends_, grows in ((marked, False), (torch.compiler.disable(lambda g, dynamic: marked(g)), True)):
        monkeypatch.setattr(model_py, 'chunk_ends', chunk_ends_)
        graphs, n = [], []
        torch._dynamo.reset()
        compiled = torch.compile(m, backend=lambda gm, inputs: graphs.append(gm) or gm.forward, dynamic=False)
        for gates in batches:
            got, want = compiled(idx, gates), m(idx, gates)
            for key in ('logits', 'early_logits', 'gate_probs'):
                torch.testing.assert_close(got[key], want[key], msg=key)
            n.append(len(graphs))
        assert (n[2] > n[0]) == grows, n


def test_nawrot_onehot_is_one_hot_chunk_ids_with_gradient():
    assert nawrot_onehot(torch.tensor([[0., 1, 1, 2]]), 3).tolist() == [[[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]]]
    g = random_gates([0.3, 0.6], 20, seed=9).requires_grad_()
    for ids, want in ((g.cumsum(-1) - g, chunk_ids(g.detach())), (g.cumsum(-1) - 1, read_ids(g.detach()))):
        A = nawrot_onehot(ids, 20)
        assert torch.equal(A, F.one_hot(want, 20).float())
        g.grad = None
        (A * torch.randn_like(A)).sum().backward()
        assert g.grad.abs().sum() > 0  # the value is one-hot, the gradient reaches the gates through the cumsum


@pytest.mark.parametrize('gater', GATERS)
@pytest.mark.parametrize('gates_from', ['prescribed', 'sampled'])
def test_ends_are_forced(gater, gates_from):
    """ the row's slots 0 and T-1 end a chunk, whatever the gater or the prescription says; the policy there is the
        constant p = 1, logit = 100 """
    m = make_model(gater=gater)
    gates = random_gates([0.3, 0.3], 64, seed=10, ends=False) if gates_from == 'prescribed' else None
    if gates is not None:
        gates[:, [0, -1]] = 0.0
    out = m(rows(2, 64, seed=11), gates)
    for t in (0, -1):
        assert (out['gates'][:, t] == 1).all()
        assert (out['gate_probs'][:, t] == 1).all() and (out['gate_logits'][:, t] == 100).all()
    if gates is not None:
        assert torch.equal(out['gates'][:, 1:-1], gates[:, 1:-1].long())  # the rest as prescribed


@pytest.mark.parametrize('gater', GATERS)
@pytest.mark.parametrize('T', [1, 2])
def test_shortest_rows(gater, T):
    """ a row of BOS alone (T = 1), or BOS and one byte, is a valid input for every gater """
    out = make_model(gater=gater)(torch.full((2, T), BOS))
    assert out['logits'].shape == (2, T, 320) and (out['gates'] == 1).all()

# -----------------------------------------------------------------------------
# Each gater's contract


def test_uniform_exact_count():
    for rate, T in [(0.2, 64), (0.2, 33), (0.3, 10), (0.5, 7), (1 / 3, 64)]:
        gater = GATERS['uniform'](tiny(rate=rate))
        idx = rows(50, T, seed=12)
        _, probs, gates = gater(torch.zeros(50, T, 32), idx)
        assert (gates.sum(-1) == round(rate * T)).all(), (rate, T)
        assert (gates[:, 0] == 1).all() and (gates[:, -1] == 1).all()
        assert (probs == rate).all()
        assert len({tuple(r) for r in gates.tolist()}) > 1  # random positions, not one fixed pattern


def test_uniform_exact_count_in_model():
    out = make_model(gater='uniform')(rows(4, 64, seed=13))
    assert (out['n_chunks'] == round(0.2 * 64)).all()


def test_equidistant_period():
    for rate in (0.2, 0.25, 1 / 3):
        out = make_model(gater='equidistant', rate=rate)(rows(2, 64, seed=14))
        expected = (torch.arange(63) % round(1 / rate) == 0).long()
        assert (out['gates'][:, :-1] == expected).all() and (out['gates'][:, -1] == 1).all(), rate


@pytest.mark.parametrize('gater', ['bernoulli', 'linear'])
def test_independent_gaters_hit_the_rate_at_init(gater):
    """ over B*T draws the gate count is Binomial(n, rate): within 4 standard deviations of n * rate """
    rate, B, T = 0.2, 256, 64
    g = GATERS[gater](tiny(rate=rate))
    torch.manual_seed(15)
    _, probs, gates = g(torch.randn(B, T, 32), rows(B, T, seed=15))
    torch.testing.assert_close(probs, torch.full((B, T), rate))  # the linear gater starts on target
    n = B * T
    assert abs(gates.sum().item() - n * rate) < 4 * math.sqrt(n * rate * (1 - rate))


def test_whitespace_gates_exactly_at_whitespace():
    text = 'def f(x):\n\treturn x  # hi\r\n\x0b\x0c\xa0end'  # \xa0 (NBSP) is two bytes in UTF-8, not whitespace
    idx = torch.tensor([encode(text)])
    out = make_model(gater='whitespace')(idx)
    expected = torch.isin(idx, torch.tensor(WHITESPACE)).long()
    expected[:, [0, -1]] = 1
    assert torch.equal(out['gates'], expected)
    all_bytes = torch.arange(256)[None]
    _, probs, gates = GATERS['whitespace'](tiny())(torch.zeros(1, 256, 32), all_bytes)
    assert gates[0].nonzero().flatten().tolist() == [9, 10, 11, 12, 13, 32]


def test_word_gaters_by_hand():
    """ 'hi  you\tall': word_ends gates the first whitespace after each word (3 and 8), word_onsets each word's first
        byte after whitespace (5 and 9; 'h' follows BOS, not whitespace); the model forces 0 and 11 on top """
    idx = torch.tensor([encode('hi  you\tall')])
    for gater, at in (('word_ends', [3, 8]), ('word_onsets', [5, 9])):
        want = torch.zeros(1, 12, dtype=torch.long)
        want[0, at] = 1
        logits, probs, gates = GATERS[gater](tiny())(torch.zeros(1, 12, 32), idx)
        assert torch.equal(gates.long(), want) and torch.equal(probs, gates), gater
        assert torch.equal(logits, 100.0 * (2 * gates - 1)) # certain, as every fixed gater
        want[0, [0, -1]] = 1
        assert torch.equal(make_model(gater=gater)(idx)['gates'], want), gater


@pytest.mark.parametrize('gater', ['word_ends', 'word_onsets'])
@pytest.mark.parametrize('rate', [0.4, 0.1]) # above the rule's share (random gates added), below it (rule gates dropped)
def test_word_rate_moves_the_realised_rate_to_rate(gater, rate):
    """ with word_rate the rule's own share on these rows, the gates over 512 rows of 64 bytes are within 4 standard
        deviations of rate (the sum of independent Bernoulli(p)); the rule's own positions keep most gates """
    idx = rows(512, 64, seed=50)[:, 1:] # the gater's view of the positions 1..63 (position 0 is forced anyway)
    rule = GATERS[gater](tiny())(None, idx)[2]
    share = rule.mean().item()
    assert 0.1 < share < 0.3 # the rows have words: the case is real
    torch.manual_seed(51)
    _, probs, gates = GATERS[gater](tiny(rate=rate, word_rate=share))(None, idx)
    n = gates.numel()
    assert abs(gates.sum().item() - n * rate) < 4 * math.sqrt((probs * (1 - probs)).sum().item()), gates.mean()
    torch.testing.assert_close(probs.mean(), torch.tensor(rate)) # the expectation, exactly
    assert (gates <= rule).all() if rate < share else (rule <= gates).all() # dropped from the rule, or added to it


@pytest.mark.parametrize('rate', [0.4, 0.1])
def test_word_gater_step_draws_from_the_forwards_probabilities(rate):
    """ generation with word_rate: step at t gives the forward's p there, from the bytes at t-1 and t, and gates u < p """
    g = GATERS['word_onsets'](tiny(rate=rate, word_rate=0.2))
    idx, gen = rows(3, 30, seed=52), torch.Generator().manual_seed(53)
    probs = g(None, idx)[1]
    assert len(probs.unique()) == 2 # the rule's p and the rest's: both cases are in play
    for t in range(1, 30):
        u = torch.rand(3, generator=gen)
        p, gt = g.step(None, None, idx[:, t], idx[:, t - 1], t, None, u)
        assert torch.equal(p, probs[:, t]) and torch.equal(gt, (u < p).float()), t


def test_word_rate_must_be_a_share():
    for word_rate in (-0.1, 1.0):
        with pytest.raises(ValueError, match='word_rate'):
            tiny(word_rate=word_rate)


def test_is_space_is_the_whitespace_bytes():
    assert torch.equal(is_space(torch.arange(257)), torch.isin(torch.arange(257), torch.tensor(WHITESPACE)))


def sequential_gater(w=8, seed=16, **kw):
    """ a sequential gater whose filter is scaled up, so the history of gates moves the probabilities a lot """
    torch.manual_seed(seed)
    g = SequentialGater(tiny(filter_size=w, **kw))
    with torch.no_grad():
        g.filter.weight.mul_(40.0)
    return g


def test_sequential_logits_follow_the_formula():
    """ logit_t = cap(scale * (V_t[w-1] + sum_{k=1}^{w-1} V_t[w-1-k] a_{t-k}) + logit(rate)); V_t[w-2] weighs a_{t-1},
        the cap (6 tanh(y/6)) in train mode only """
    g, w, T = sequential_gater(w=4), 4, 12
    x, gates = torch.randn(2, T, 32), random_gates([0.4, 0.6], T, seed=17)
    for training in (True, False):
        g.train(training)
        logits = g(x, rows(2, T, seed=17), gates)[0]
        V = g.filter(x).float()
        for b, t in itertools.product(range(2), range(T)):
            z = V[b, t, w - 1] + sum(V[b, t, w - 1 - k] * gates[b, t - k] for k in range(1, w) if t - k >= 0)
            y = g.scale * z + math.log(0.2 / 0.8)
            y = 6 * torch.tanh(y / 6) if training else y
            torch.testing.assert_close(logits[b, t], y)


@pytest.mark.parametrize('mode', ['train', 'eval'])
def test_sequential_scan_matches_teacher_forced_recompute(mode):
    """ the probabilities the scan sampled from are the ones the gradient is computed on """
    g, w, B, T = sequential_gater(), 8, 64, 64
    g.train(mode == 'train')
    x = torch.randn(B, T, 32)
    torch.manual_seed(18)
    a, probs = g.scan(g.filter(x).float())
    assert (a[:, :w - 1] == 0).all() and (a[:, w - 1] == 1).all()  # w-1 zeros of history, then the forced gate
    gates = a[:, w - 1:]
    _, probs_tf, gates_tf = g(x, rows(B, T, seed=18), gates)
    assert torch.equal(gates_tf, gates)
    torch.testing.assert_close(probs_tf[:, 1:], probs[:, 1:])
    assert probs[:, 1:].std() > 0.1  # the probabilities do vary: the check compares more than a constant
    p = probs[:, 1:]  # the draws are Bernoulli(probs): their sum is within 4 sigma of the sum of probs
    assert abs((gates[:, 1:] - p).sum().item()) < 4 * math.sqrt((p * (1 - p)).sum().item())


def test_sequential_forward_samples_from_the_scan():
    g, T = sequential_gater(), 32
    x, idx = torch.randn(4, T, 32), rows(4, T, seed=19)
    torch.manual_seed(20)
    _, probs, gates = g(x, idx)
    torch.manual_seed(20)
    a, probs_scan = g.scan(g.filter(x).float())
    assert torch.equal(gates, a[:, 7:])
    torch.testing.assert_close(probs[:, 1:], probs_scan[:, 1:])


def test_sequential_filter_size_one_ignores_history():
    g, T = sequential_gater(w=1).eval(), 16
    x, idx = torch.randn(2, T, 32), rows(2, T, seed=21)
    p1 = g(x, idx, torch.ones(2, T))[1]
    p0 = g(x, idx, torch.zeros(2, T))[1]
    torch.testing.assert_close(p1, p0, rtol=0, atol=0)
    torch.testing.assert_close(p1, torch.sigmoid(g.scale * g.filter(x)[..., 0] + math.log(0.2 / 0.8)))
    torch.manual_seed(22)
    _, probs = g.scan(g.filter(x).float())
    torch.testing.assert_close(probs[:, 1:], p1[:, 1:])


@pytest.mark.parametrize('mode,cap', [('train', 6.0), ('train', 0.0), ('eval', 6.0)]) # capped, uncapped, eval
@pytest.mark.parametrize('w', [1, 2, 8, 10]) # 10: H = 512 histories, the largest the sampler takes
def test_sequential_sample_equals_the_scan_on_the_same_draws(w, mode, cap):
    """ the parallel sampler draws exactly the loop's gates from the same uniforms: rows of 1 to 300 bytes, 6 rows,
        blocks of 1 (the GPU's pure doubling), 7 and sqrt(T) (the CPU's); the scaled filter spreads the gate
        probabilities over (0, 1) and makes them depend on the history; 3 seeds give ~8,000 draws per case """
    g = sequential_gater(w=w, gate_softcap=cap).train(mode == 'train')
    for seed, T in itertools.product(range(3), (1, 2, 3, 7, 64, 65, 300)):
        torch.manual_seed(seed)
        V, u = g.filter(torch.randn(6, T, 32)).float(), torch.rand(6, T)
        a, probs = g.scan(V, u)
        for block in (1, 7, None):
            assert torch.equal(g.sample(V, u, block), a), (seed, T, block)
    assert 0.1 < probs[:, 1:].mean() < 0.9 and probs[:, 1:].std() > 0.1  # not all near 0 or 1: the draws decide


def test_sequential_forward_beyond_ten_falls_back_to_the_scan():
    g, T = sequential_gater(w=11), 20
    x, idx = torch.randn(2, T, 32), rows(2, T, seed=23)
    torch.manual_seed(24)
    gates = g(x, idx)[2]
    torch.manual_seed(24)
    assert torch.equal(gates, g.scan(g.filter(x).float())[0][:, 10:])


def test_sequential_samples_follow_the_teacher_forced_probabilities():
    """ the gate sequences drawn by forward (the parallel sampler) on one 6-byte row, w=4, N=200,000 draws, against
        the exact law prod_t pi(a_t | a_<t) of all 32 sequences (a_0 = 1) from the teacher-forced probabilities.
        Total variation: E[TV] <= 1/2 sum_k sqrt(p_k (1-p_k) / N) and, one draw moving TV by at most 1/N, McDiarmid
        gives P(TV > E[TV] + eps) <= exp(-2 N eps^2) = 1e-6 at eps = sqrt(ln(1e6) / 2N): a tolerance of ~0.012 """
    g, T, N = sequential_gater(w=4).train(), 6, 200_000
    x, idx = torch.randn(1, T, 32), rows(1, T, seed=25)
    seqs = torch.tensor([[1, *bits] for bits in itertools.product([0, 1], repeat=T - 1)], dtype=torch.float)
    p = g(x.expand(len(seqs), -1, -1), idx.expand(len(seqs), -1), seqs)[1][:, 1:] # (32, 5) teacher-forced
    exact = torch.where(seqs[:, 1:] > 0, p, 1 - p).prod(-1).double()              # (32,), sums to 1
    torch.manual_seed(26)
    drawn = g(x.expand(N, -1, -1), idx.expand(N, -1))[2]                            # (N, T)
    code = (drawn[:, 1:].long() * 2 ** torch.arange(T - 2, -1, -1)).sum(-1)        # the row of seqs drawn
    empirical = torch.bincount(code, minlength=len(seqs)).double() / N
    tol = 0.5 * (exact * (1 - exact) / N).sqrt().sum() + math.sqrt(math.log(1e6) / (2 * N))
    assert 0.5 * (empirical - exact).abs().sum() < tol
    independent = torch.where(seqs[:, 1:] > 0, p.mean(0), 1 - p.mean(0)).prod(-1).double()
    assert 0.5 * (independent - exact).abs().sum() > 10 * tol  # a sampler ignoring the history would fail


@pytest.mark.parametrize('gater', ['linear', 'sequential'])
@pytest.mark.parametrize('down,up', [(d, u) for d, u in PAIRS if u != 'hnet'])
def test_rl_gaters_get_no_gradient_from_the_lm_loss(gater, down, up):
    """ REINFORCE gaters learn only from the policy loss (train.py): the next-byte losses leave them untouched """
    m = make_model(gater=gater, downsampler=down, upsampler=up)
    idx = rows(2, 64, seed=23)
    lm_loss(m(idx), idx).backward()
    for name, p in m.gater.named_parameters():
        assert p.grad is None or (p.grad == 0).all(), name
    assert m.wte.weight.grad.abs().sum() > 0  # the backward did run


@pytest.mark.parametrize('gater', ['linear', 'sequential'])
def test_rl_gaters_policy_is_differentiable(gater):
    """ what REINFORCE needs instead: log pi(sampled gates) sends a gradient to every gater weight """
    m = make_model(gater=gater)
    out = m(rows(2, 64, seed=41))
    g, p = out['gates'].float(), out['gate_probs']
    (g * p.log() + (1 - g) * (1 - p).log()).sum().backward()
    for name, w in m.gater.named_parameters():
        assert w.grad is not None and w.grad.abs().sum() > 0, name

# -----------------------------------------------------------------------------
# Straight-through baselines: H-Net and Nawrot (issue 3)


@pytest.mark.parametrize('gater,modules', [('hnet', ['q_proj', 'k_proj']), ('nawrot', ['mlp'])])
def test_straight_through_routers_learn_from_the_lm_loss(gater, modules):
    m = make_model(gater=gater, downsampler=gater, upsampler=gater).train()
    idx = rows(2, 64, seed=24)
    torch.manual_seed(25)
    lm_loss(m(idx), idx).backward()  # the byte loss alone: the gradient comes through the chunking itself
    for name in modules:
        for pname, p in getattr(m.gater, name).named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, f'{name}.{pname}'


def test_hnet_upsampler_forward_is_the_hard_computation():
    """ y = x + z_bar[u_t] (x added directly, as the paper's code) with z_bar the EMA over chunks at p of each chunk's
        gate byte: the straight-through factor is 1 forward, and its gradient reaches p at every byte """
    torch.manual_seed(26)
    up = HNetUpsampler()
    assert not list(up.parameters())  # no residual projection
    gates = random_gates([0.3, 0.6], 40, seed=27)
    ends, _ = chunk_ends(gates)
    x, zo = torch.randn(2, 40, 32), torch.randn(2, ends.size(1), 32)
    probs = torch.rand(2, 40).requires_grad_()
    y = up(x, zo, zo, gates, probs, ends)
    p_ends = torch.gather(probs, 1, ends).clamp(1e-4, 1 - 1e-4)
    ybar = gather(ema_loop(zo, p_ends.detach()), read_ids(gates))
    torch.testing.assert_close(y, x + ybar)
    w = torch.randn_like(y)
    (y * w).sum().backward()
    off = gates == 0  # at a non-gate byte p reaches y only through the confidence 1 - p_t: d/dp = -w_t . ybar_t
    torch.testing.assert_close(probs.grad[off], -(w * ybar).sum(-1)[off])


def hard_and_straight_through_gates(T=40, seed=28):
    torch.manual_seed(seed)
    soft = torch.sigmoid(3 * torch.randn(3, T)).requires_grad_()
    forced = torch.zeros(T, dtype=torch.bool)
    forced[[0, -1]] = True
    hard = torch.where(forced, 1.0, (soft > 0.5).float())
    ste = torch.where(forced, 1.0, (soft > 0.5).float() - soft.detach() + soft)  # as NawrotGater, then forced
    return soft, hard, ste


def test_nawrot_pooling_with_ste_gates_equals_hard_gates():
    soft, hard, ste = hard_and_straight_through_gates()
    down, up = NawrotDownsampler(), UPSAMPLERS['nawrot']()
    ends, _ = chunk_ends(hard)
    x = torch.randn(3, 40, 32)
    z_ste, zpos_ste = down(x, ste, ends)
    z_hard, zpos_hard = down(x, hard, ends)
    assert torch.equal(z_ste, z_hard) and torch.equal(zpos_ste, zpos_hard)
    zo = torch.randn_like(z_hard)
    y_ste, y_hard = up(x, z_ste, zo, ste, None, ends), up(x, z_hard, zo, hard, None, ends)
    assert torch.equal(y_ste, y_hard)
    ((z_ste * torch.randn_like(z_ste)).sum() + (y_ste * torch.randn_like(y_ste)).sum()).backward()
    assert soft.grad.abs().sum() > 0  # the pooling trains the boundary predictor


def test_nawrot_gates_are_exactly_zero_or_one():
    gater = NawrotGater(tiny())
    torch.manual_seed(29)
    gates = gater(3 * torch.randn(64, 64, 32), rows(64, 64, seed=29))[2]
    assert ((gates == 0) | (gates == 1)).all()  # not 0.99999994: the chunk counts come from these
    assert 0 < gates.mean() < 1


def test_nawrot_pooling_by_hand():
    """ gates 1 0 1 1 0 0 1 0 1: chunks {0} {1 2} {3} {4 5 6} {7 8}, each the mean of its bytes at their mean position,
        no null group; byte t gets the chunk that closed at or before t, so a boundary byte reads its own chunk """
    torch.manual_seed(30)
    down, up = NawrotDownsampler(), UPSAMPLERS['nawrot']()
    assert not list(down.parameters())
    gates = torch.tensor([[1., 0, 1, 1, 0, 0, 1, 0, 1]])
    ends, _ = chunk_ends(gates)
    x = torch.randn(1, 9, 32)
    z, zpos = down(x, gates, ends)
    chunks = [[0], [1, 2], [3], [4, 5, 6], [7, 8]]
    torch.testing.assert_close(z[0], torch.stack([x[0, c].mean(0) for c in chunks]))
    assert zpos[0].tolist() == [0, 1.5, 3, 5, 7.5]
    zo = torch.randn_like(z)
    y = up(x, z, zo, gates, None, ends)
    reads = [0, 0, 1, 2, 2, 2, 3, 3, 4]  # the last chunk whose last byte is <= t
    torch.testing.assert_close(y[0], x[0] + zo[0, reads])
    for t in (2, 3, 6, 8):  # the boundary bytes: the chunk that closed there
        torch.testing.assert_close(y[0, t], x[0, t] + zo[0, [c[-1] for c in chunks].index(t)])


def test_nawrot_pair_is_mean_and_add_and_only_the_pooling_trains_the_gates():
    """ forward: the nawrot down/up are the mean downsampler and the add upsampler (so any pair with them is causal);
        backward: the pooling passes a gradient to straight-through gates, the read passes none (the paper's code) """
    soft, hard, ste = hard_and_straight_through_gates(seed=42)
    ends, _ = chunk_ends(hard)
    x = torch.randn(3, 40, 32)
    z = NawrotDownsampler()(x, ste, ends)[0]
    torch.testing.assert_close(z, MeanDownsampler()(x, hard, ends)[0])
    (z * torch.randn_like(z)).sum().backward()
    assert soft.grad.abs().sum() > 0
    zo = torch.randn_like(z, requires_grad=True)
    y = UPSAMPLERS['nawrot']()(x, z.detach(), zo, ste, None, ends)
    torch.testing.assert_close(y, AddUpsampler()(x, z, zo, hard, None, ends))
    assert torch.autograd.grad(y.sum(), soft, allow_unused=True)[0] is None  # no path from the read to the gates


def test_nawrot_probs_are_the_relaxed_sample():
    """ the paper's run: probs = s = sigmoid((z + logistic noise) / temp), gates = 1[s > 0.5], logits = logit(s) """
    gater = NawrotGater(tiny(nawrot_temp=1.0))
    x, idx = torch.randn(4, 64, 32), rows(4, 64, seed=43)
    torch.manual_seed(44)
    logits, probs, gates = gater(x, idx)
    z = gater.mlp(x).squeeze(-1)
    torch.manual_seed(44)
    u = torch.rand_like(z).clamp(1e-6, 1 - 1e-6)
    torch.testing.assert_close(probs, torch.sigmoid(z + u.log() - (-u).log1p()))
    torch.testing.assert_close(logits, probs.logit(), rtol=1e-4, atol=1e-4)
    assert torch.equal(gates, (probs > 0.5).float())
    assert (probs - torch.sigmoid(z)).abs().mean() > 0.1  # the noise is in them


def test_ema_scan_equals_the_loop():
    torch.manual_seed(31)
    z, p = torch.randn(3, 16, 8), torch.rand(3, 16).clamp(1e-4, 1 - 1e-4)
    torch.testing.assert_close(ema_scan(z, p), ema_loop(z.double(), p.double()).float())


def test_ema_scan_with_p_one_is_plain_distribute():
    """ p_k = 1 at every chunk: no smoothing, each chunk keeps its own value """
    z = torch.randn(2, 6, 4)
    torch.testing.assert_close(ema_scan(z, torch.ones(2, 6)), z)


def test_ema_scan_is_fp32_accurate_at_paper_length():
    """ 4096 bytes at rate 0.2 is ~820 chunks, with p > 0.5 at every H-Net gate: still float32-accurate """
    torch.manual_seed(32)
    z, p = torch.randn(2, 820, 8), (0.5 + 0.5 * torch.rand(2, 820)).clamp(1e-4, 1 - 1e-4)
    torch.testing.assert_close(ema_scan(z, p), ema_loop(z.double(), p.double()).float())
    with torch.autocast('cpu', dtype=torch.bfloat16): # as train.py's bf16 autocast on CUDA: still fp32 inside
        torch.testing.assert_close(ema_scan(z, p), ema_loop(z.double(), p.double()).float())


def test_hnet_ratio_loss_is_one_at_the_target_and_minimal_on_the_diagonal():
    """ with P = F (the probabilities agree with the decisions) the loss is minimal at F = rate, where it is 1; F
        carries no gradient, and at F = rate the gradient in P vanishes (above it P is pushed down, below up) """
    rate, n = 0.2, 100
    grid = [k / n for k in range(0, n + 1, 5)]

    def loss(F_, P_, grad=False):
        gates = (torch.arange(n) < round(F_ * n)).float()
        probs = torch.full((n,), P_, requires_grad=grad)
        return hnet_ratio_loss(gates, probs, rate), probs
    diag = [loss(f, f)[0].item() for f in grid]
    assert grid[diag.index(min(diag))] == rate
    assert math.isclose(min(diag), 1.0, rel_tol=1e-6)
    for F_, sign in ((0.1, -1), (0.2, 0), (0.3, 1)):
        l, probs = loss(F_, 0.5, grad=True)
        l.backward()
        dP = probs.grad.sum().item()
        assert (abs(dP) < 1e-5) if sign == 0 else (dP * sign > 0), F_


def test_hnet_ratio_loss_mask_drops_padding():
    gates, probs = random_gates([0.3, 0.3], 20, seed=33), torch.rand(2, 20)
    mask = torch.ones(2, 20)
    mask[1, 12:] = 0
    keep = mask.bool()
    torch.testing.assert_close(hnet_ratio_loss(gates, probs, 0.2, mask),
                               hnet_ratio_loss(gates[keep], probs[keep], 0.2))


def test_binomial_prior_is_minimal_at_the_rate_and_masks_padding():
    """ -log Binomial(count; N, rate) / N, smallest at the binomial's mode floor((N+1) rate), within one of rate * N
        (N = 64 is avoided: 65 * 0.2 is whole, so 12 and 13 tie); padding counts neither as a byte nor as a gate """
    rate = 0.2
    for N in (50, 60, 33):
        prior = []
        for k in range(N + 1):
            gates = (torch.arange(N) < k).float()[None]
            prior.append(binomial_prior(gates, rate, torch.ones(1, N, dtype=torch.bool)).item())
            expected = -(math.log(math.comb(N, k)) + k * math.log(rate) + (N - k) * math.log(1 - rate)) / N
            assert math.isclose(prior[-1], expected, rel_tol=1e-4), (N, k)
        k = prior.index(min(prior))
        assert k == math.floor((N + 1) * rate) and abs(k - rate * N) < 1
    gates = torch.tensor([[1.0, 0, 1, 0, 1, 1, 1]]) # 3 gates in 5 real bytes; the padding's gates are ignored
    mask = torch.tensor([[True] * 5 + [False] * 2])
    expected = -(math.log(math.comb(5, 3)) + 3 * math.log(rate) + 2 * math.log(1 - rate)) / 5
    assert math.isclose(binomial_prior(gates, rate, mask).item(), expected, rel_tol=1e-6)


# -----------------------------------------------------------------------------
# Attention: the SDPA, softcap and blocked sliding-window paths against a plain softmax; the window's edge


def attention_ref(q, k, v, window, softcap):
    """ softmax(q k^T / sqrt(d)) v, causal, each query seeing its last `window` keys (itself included), in fp64 """
    q, k, v = q.double(), k.double(), v.double()
    T, d = q.size(1), q.size(-1)
    s = torch.einsum('bihd,bjhd->bhij', q, k) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    s = s.masked_fill(~((j <= i) & (i - j < (window or T))), float('-inf'))
    return torch.einsum('bhij,bjhd->bihd', s.softmax(-1), v).float()


@pytest.mark.parametrize('T', [5, 40, 43])  # shorter than the window (full path), a multiple of it, a ragged tail
@pytest.mark.parametrize('window', [0, 8])  # 8: the blocked local_attention path once T > 8
@pytest.mark.parametrize('softcap', [0, 50.0])
def test_attention_equals_reference(T, window, softcap):
    torch.manual_seed(35)
    q, k, v = 2 * torch.randn(2, T, 2, 16), 2 * torch.randn(2, T, 2, 16), torch.randn(2, T, 2, 16)  # scores ~ 15
    y = attention(q, k, v, window, softcap)
    torch.testing.assert_close(y, attention_ref(q, k, v, window, softcap))
    if softcap:  # the check would notice a missing softcap
        assert (y - attention_ref(q, k, v, window, 0)).abs().amax() > 1e-3  # 100x the tolerance above


@pytest.mark.parametrize('window', [0, 8])
def test_attention_keeps_every_tensor_on_the_inputs_device(window):
    """ the 'meta' device stands in for a GPU here: a mask or index made on the CPU would raise on it """
    q = torch.randn(1, 43, 2, 16, device='meta')
    assert attention(q, q, q, window, 50.0).shape == (1, 43, 2, 16)
    assert attention(q, q, q, window, 0).device.type == 'meta'


@pytest.mark.parametrize('softcap', [0, 50.0])
def test_sliding_window_is_64_keys_including_the_query(softcap):
    torch.manual_seed(36)
    q, k, v = (torch.randn(1, 130, 2, 16) for _ in range(3))
    y = attention(q, k, v, 64, softcap)
    for key, changes in ((37, True), (36, False), (100, True)):  # query 100 sees keys 37..100
        v2 = v.clone()
        v2[:, key] += 1.0
        d = (attention(q, k, v2, 64, softcap)[:, 100] - y[:, 100]).abs().amax()
        assert (d > 1e-4) if changes else (d == 0), key

@pytest.mark.parametrize('gater', ['sequential', 'hnet'])
def test_compile_keeps_the_outputs_and_does_not_unroll_the_scan(gater):
    """ torch.compile (eager backend: dynamo's graph capture without code generation) gives the eager outputs, and its
        graphs do not grow with the row length: the scan over positions is left to Python, not unrolled """
    extra = dict(downsampler='hnet', upsampler='hnet') if gater == 'hnet' else {}
    m = make_model(gater=gater, block_size=64, **extra).eval()
    ops = []
    for T in (16, 64):
        torch._dynamo.reset()
        idx = rows(2, T, seed=60)
        torch.manual_seed(61)
        want = m(idx)
        torch.manual_seed(61)
        got = torch.compile(m, backend='eager', dynamic=False)(idx)
        for key in ('logits', 'early_logits', 'gates'):
            torch.testing.assert_close(got[key], want[key], msg=key)
        ops.append(torch._dynamo.explain(m)(idx).op_count)
    assert ops[0] == ops[1], ops


# -----------------------------------------------------------------------------
# generate


def record_logits(monkeypatch):
    """ the logits generate hands to sample_byte, one (B, 256) per new byte, in order """
    seen, pick = [], model.sample_byte
    monkeypatch.setattr(model, 'sample_byte', lambda logits, *a: seen.append(logits.clone()) or pick(logits, *a))
    return seen


def forward_logits(m, seq, gates, bos=False):
    """ one forward over seq (B, L) (after a BOS if bos) and a placeholder byte, the gates prescribed (BOS's and the
        placeholder's 1) -> the logits at seq's positions (B, L, 256) """
    one = torch.ones_like(gates[:, :1])
    x, g = torch.cat([seq, seq[:, :1] * 0 + BOS], 1), torch.cat([gates, one], 1)
    if bos:
        x, g = torch.cat([seq[:, :1] * 0 + BOS, x], 1), torch.cat([one, g], 1)
    return m(x, gates=g.float())['logits'][:, int(bos):-1, :256]


@pytest.mark.parametrize('gater,down,up', COMBOS)
def test_generate_uses_the_logits_of_one_forward(gater, down, up, monkeypatch):
    """ the cached path's logits at every generated position are those of one full forward over the bytes it made,
        with the gates it returned prescribed; rows of different chunk counts in one batch """
    m = make_model(gater=gater, downsampler=down, upsampler=up).eval()
    seen = record_logits(monkeypatch)
    idx = rows(3, 6, seed=40)
    new, gates = m.generate(idx, 24, seeds=[1, 2, 3])
    assert new.shape == (3, 24) and gates.shape == (3, 30) and (gates[:, 0] == 1).all()
    assert ((0 <= new) & (new < 256)).all() and set(gates.unique().tolist()) <= {0, 1}
    want = forward_logits(m, torch.cat([idx, new], 1), gates)[:, 5:-1]
    torch.testing.assert_close(torch.stack(seen, 1), want, rtol=0, atol=1e-4)


@pytest.mark.parametrize('gater,down,up', METHOD_COMBOS)
def test_generate_under_cpu_bfloat16_autocast(gater, down, up, monkeypatch):
    """ sample.py's --dtype=bfloat16 on a CPU: the cached path's logits are one forward's up to bfloat16 rounding. Its
        products have other shapes than the forward's, so the bar is bfloat16's own error: the cached logits are no
        further from the bfloat16 forward's than those are from float32's """
    m = make_model(gater=gater, downsampler=down, upsampler=up).eval()
    seen = record_logits(monkeypatch)
    idx = rows(3, 6, seed=40)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        new, gates = m.generate(idx, 24, seeds=[1, 2, 3])
        want = forward_logits(m, torch.cat([idx, new], 1), gates)[:, 5:-1].float()
    assert ((0 <= new) & (new < 256)).all() and torch.stack(seen).dtype == torch.bfloat16
    rounding = (want - forward_logits(m, torch.cat([idx, new], 1), gates)[:, 5:-1]).abs().amax()
    assert (torch.stack(seen, 1).float() - want).abs().amax() <= rounding


@pytest.mark.parametrize('gater', GATERS)
def test_gater_step_is_the_forwards_distribution(gater):
    """ gater.step at t gives the forward's gate_probs there (its history teacher-forced); a deterministic gater's
        gate is the forward's own, a random one's is u < p """
    m = make_model(gater=gater).eval()
    idx, T = rows(3, 30, seed=41), 30
    x = m.wte(idx)
    cos, sin = model.rope(torch.arange(T), 16)
    for block in m.down:
        x = block(x, cos, sin)
    torch.manual_seed(0)
    g, w = m(idx)['gates'].float(), m.config.filter_size
    probs = m(idx, gates=g)['gate_probs'] # with its gates prescribed (nawrot's sampled probs are its relaxed sample)
    for t in range(1, T - 1):
        u = torch.rand(3)
        p, gt = m.gater.step(x[:, t], x[:, t - 1], idx[:, t], idx[:, t - 1], t, F.pad(g, (w - 1, 0))[:, t:t + w - 1], u)
        want = torch.full((3,), 0.2) if gater == 'uniform' else probs[:, t] # uniform: Bernoulli(rate)
        torch.testing.assert_close(p, want, rtol=0, atol=1e-5)
        if gater in ('equidistant', 'whitespace', 'word_ends', 'word_onsets', 'hnet'):
            assert torch.equal(gt, g[:, t])
        else:
            assert torch.equal(gt, (u < p).float())


@pytest.mark.parametrize('gater', ['whitespace', 'word_ends', 'word_onsets', 'equidistant', 'hnet'])
def test_generate_greedy_equals_rerunning_the_forward(gater):
    """ top_k=1 with a deterministic gater: the bytes and gates of re-running the whole row every step """
    m = make_model(gater=gater, downsampler='mean', upsampler='deviation').eval()
    idx = rows(2, 5, seed=42)
    new, gates = m.generate(idx, 50, top_k=1)
    seq = idx
    for _ in range(50):
        out = m(torch.cat([seq, seq[:, :1] * 0 + BOS], 1))
        seq = torch.cat([seq, out['logits'][:, -2, :256].argmax(-1, keepdim=True)], 1)
    assert torch.equal(torch.cat([idx, new], 1), seq)
    assert torch.equal(gates, m(torch.cat([seq, seq[:, :1] * 0 + BOS], 1))['gates'][:, :-1])


@pytest.mark.parametrize('gater,down,up', [('sequential', 'select', 'add'), ('whitespace', 'mean', 'deviation'),
                                           ('linear', 'mean', 'add'), ('hnet', 'hnet', 'hnet'),
                                           ('nawrot', 'nawrot', 'nawrot'), ('uniform', 'select', 'add')])
def test_generate_batch_equals_rows_one_by_one(gater, down, up):
    """ a row's bytes and gates do not depend on the other rows of its batch: prompts with different spaces (so
        different chunk counts), long enough to restart the rows (block_size 64) """
    m = make_model(gater=gater, downsampler=down, upsampler=up).eval()
    idx = rows(3, 9, seed=43)
    idx[0, 1:] = 32  # all spaces: a chunk per byte under whitespace
    idx[1, 1:] = 97  # none
    new, gates = m.generate(idx, 80, temperature=1.5, seeds=[5, 6, 7])
    for r, seed in enumerate([5, 6, 7]):
        new1, gates1 = m.generate(idx[r:r + 1], 80, temperature=1.5, seeds=[seed])
        assert torch.equal(new1[0], new[r]) and torch.equal(gates1[0], gates[r]), f'row {r}'
    assert not torch.equal(new[0], new[2])  # and the rows differ


@pytest.mark.parametrize('T0', [5, 80])
@pytest.mark.parametrize('gater,down,up', [('sequential', 'select', 'add'), ('hnet', 'hnet', 'hnet'),
                                           ('nawrot', 'nawrot', 'nawrot'), ('equidistant', 'mean', 'deviation')])
def test_generate_past_block_size_restarts_the_row(gater, down, up, T0, monkeypatch):
    """ the rule: a row holds at most block_size - 1 bytes; the byte that would exceed it makes the row BOS + the
        last block_size // 2 - 1 bytes with their gates (a prompt longer than that starts so, its bytes before never
        read: gate 0). Every logit used is that of one forward over the row it was made from """
    m = make_model(gater=gater, downsampler=down, upsampler=up).eval()
    seen = record_logits(monkeypatch)
    idx, N, h = rows(2, T0, seed=44), 100, 32
    new, gates = m.generate(idx, N, seeds=[8, 9])
    seq = torch.cat([idx, new], 1)
    start = None if T0 <= 63 else T0 - (h - 1)  # None: the prompt's own row; else the row is BOS + seq[start:]
    L = T0 if start is None else h
    if start is not None:
        assert (gates[:, :start] == 0).all()
    for n in range(T0, T0 + N):  # byte n came from the logits at byte n-1, in the current row
        a = 0 if start is None else start
        want = forward_logits(m, seq[:, a:n], gates[:, a:n], bos=start is not None)[:, -1]
        torch.testing.assert_close(seen[n - T0], want, rtol=0, atol=1e-4, msg=f'byte {n}')
        start, L = (n + 1 - (h - 1), h) if L == 63 else (start, L + 1)
    assert start is not None and start > T0  # the rows did restart

# -----------------------------------------------------------------------------
# Sizes, bytes, names


@pytest.mark.parametrize('name,expected', [('18m', 18.7e6), ('32m', 33.0e6), ('40m', 40.4e6), ('73m', 73.9e6),
                                           ('90m', 90.4e6), ('130m', 130.5e6), ('147m', 147.1e6), ('346m', 366e6)])
def test_preset_parameter_counts(name, expected):
    """ the paper's counts: embedding, layers and both heads; the uniform gater has no parameters """
    with torch.device('meta'):  # shapes only, no memory
        m = ByteUNet(UNetConfig(**PRESETS[name], block_size=4096, gater='uniform'))
    assert abs(m.get_num_params() - expected) / expected < 0.02


def test_module_docstring_flops_claims():
    """ model.py's docstring: per byte a mid layer costs about half a byte layer (one more layer of each, at the paper's
        block_size 4096 and rate 0.2), and the mid layers' share of each preset's training FLOPs (flops_per_byte at
        rate 0 has no mid level: every mid term scales with the rate) """
    def fpb(**kw):
        with torch.device('meta'):
            return ByteUNet(UNetConfig(**{**PRESETS['73m'], 'block_size': 4096, 'gater': 'uniform', **kw})).flops_per_byte
    for name, share in (('18m', 41), ('32m', 41), ('40m', 26), ('73m', 41), ('90m', 26), ('130m', 58), ('147m', 41),
                        ('346m', 70)):
        f = fpb(**PRESETS[name])
        assert round(100 * (f() - f(0.0)) / f()) == share, name
    mid, byte = fpb(n_mid=7)() - fpb()(), fpb(n_down=3)() - fpb()()
    assert 0.47 <= mid / byte <= 0.49


def test_configure_optimizers_fused_on_a_cpu_matches_plain_adamw():
    """ the fused AdamW (3x faster than the per-tensor loop for the 18M model on a CPU) takes the steps of the plain
        one; decay on matrices and the embedding only """
    models = [make_model(seed=0) for _ in range(2)]
    opt = models[0].configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu')
    assert opt.defaults['fused'] and [g['weight_decay'] for g in opt.param_groups] == [0.1, 0.0]
    assert all(p.dim() >= 2 for p in opt.param_groups[0]['params'])
    groups = models[1].configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu').param_groups
    plain = torch.optim.AdamW([{k: g[k] for k in ('params', 'weight_decay')} for g in groups], lr=1e-2,
                              betas=(0.9, 0.95), fused=False, foreach=False)
    assert not plain.param_groups[0]['fused']
    idx = rows(2, 32, seed=5)
    for m, o in zip(models, (opt, plain)):
        for step in range(3):
            torch.manual_seed(step)
            lm_loss(m(idx), idx).backward()
            o.step()
            o.zero_grad()
    for a, b in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.equal(models[0].lm_head.weight, make_model(seed=0).lm_head.weight) # the steps moved it


def test_encode_decode_round_trip():
    assert encode('hi') == [BOS, 104, 105]
    for text in ('', 'hello', 'héllo wörld', '世界 🙂\n\t'):
        assert decode(encode(text)) == text
    assert decode([BOS, 0xff, 104, 300, 105]) == '\ufffdhi'  # invalid UTF-8 replaced, specials dropped
    assert decode(torch.tensor(encode('ok'))) == 'ok'


def test_bpe_gates_by_hand():
    from conftest import tiny_encoding
    # 'the cat' as 'the', ' c', 'at': row [BOS] t h e ' ' c a t, the second and third tokens start at 4 and 6
    assert bpe_gates(tiny_encoding(), b'the cat', 9).tolist() == [0, 0, 0, 0, 1, 0, 1, 0, 0]
    # 'the', '\xff' (an invalid byte is a token of its own), 'c', 'at': starts at 4, 5 and 6
    assert bpe_gates(tiny_encoding(), b'the\xffcat', 9).tolist() == [0, 0, 0, 0, 1, 1, 1, 0, 0]


def test_load_bpe_builds_an_encoding_from_a_tiktoken_file(tmp_path):
    """ a file in tiktoken's format (conftest's tiny ranks) gives an encoding with GPT-2's pre-tokenisation: a string
        goes there and back, ' the' is one token; the file edited is read again (tiktoken caches by path); a missing
        file and an unknown name raise with the cause """
    import base64
    from conftest import RANKS, needs
    needs('tiktoken')
    path = tmp_path / 'tiny.tiktoken'
    path.write_text(''.join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in RANKS.items()))
    enc = load_bpe(str(path))
    text = "the cat sat on the log, 42 times!\n\t"
    assert enc.decode(enc.encode_ordinary(text)) == text and enc._pat_str == BPE_PAT
    assert enc.encode_ordinary(' the') == [RANKS[b' the']] and enc.name == 'tiny'
    save_bpe([], str(path)) # the 256 bytes alone
    assert len(load_bpe(str(path)).encode_ordinary(' the')) == 4 and not os.path.exists(str(path) + '.tmp')
    with pytest.raises(FileNotFoundError, match='missing.tiktoken'):
        load_bpe(str(tmp_path / 'missing.tiktoken'))
    with pytest.raises(ValueError, match="'gpt9'"):
        load_bpe('gpt9')


def test_train_bpe_merges_pairs_that_save_bpe_writes_for_load_bpe(tmp_path):
    """ common.train_bpe (Hugging Face's trainer, GPT-2's byte table by hand) on documents with an invalid byte: each
        new token joins two tokens ranked before it, ' the' (the most frequent word) is one; save_bpe's file, read by
        load_bpe, encodes ' the' as that one token and goes there and back """
    from conftest import needs
    needs('tiktoken'), needs('tokenizers')
    docs = [b'the cat sat on the mat, and the end\n'] * 20 + [b'a bad \xff byte in the text']
    tokens = train_bpe(docs, 30)
    assert 0 < len(tokens) <= 30 and b' the' in tokens and not any(b'\xff' in t for t in tokens)
    for k, t in enumerate(tokens):
        known = {bytes([i]) for i in range(256)} | set(tokens[:k])
        assert any(t[:i] in known and t[i:] in known for i in range(1, len(t))), t
    save_bpe(tokens, str(tmp_path / 'cats.tiktoken'))
    enc = load_bpe(str(tmp_path / 'cats.tiktoken'))
    assert enc.encode_ordinary(' the') == [256 + tokens.index(b' the')] and enc._pat_str == BPE_PAT
    assert enc.decode(enc.encode_ordinary('the cat, the end')) == 'the cat, the end'


@pytest.mark.parametrize('field', ['gater', 'downsampler', 'upsampler'])
def test_unknown_variant_names(field):
    with pytest.raises(ValueError, match='bogus'):
        ByteUNet(tiny(**{field: 'bogus'}))


# -----------------------------------------------------------------------------
# Word-boundary metrics: the docstring examples, and both ways of aligning with words


def test_boundary_counts_and_metrics_docstring_example():
    idx = torch.tensor([encode('hi you all')])
    gates = torch.tensor([[1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1]])
    c = boundary_counts(idx, gates, torch.ones_like(idx, dtype=torch.bool))
    assert c.tolist() == [3, 9, 1, 2, 2, 2]
    assert boundary_metrics(c) == dict(rate=3 / 9, ws_boundary=0.5, word_boundary=1.0, boundary_precision=2 / 3)


def test_boundary_counts_leave_out_the_forced_ends():
    """ the gates at 0 (BOS) and T-1 are forced: neither they, their positions nor a space at T-1 count, and BOS's gate
        is not 'the gate just before' a space at 1; a padded row's last real byte is decided, and counts """
    idx = torch.tensor([encode(' ab ')])                      # BOS ' ' a b ' '
    ones = torch.ones_like(idx, dtype=torch.bool)
    assert boundary_counts(idx, torch.tensor([[1, 0, 0, 0, 1]]), ones).tolist() == [0, 3, 0, 1, 0, 0]
    assert boundary_counts(idx, torch.tensor([[1, 0, 0, 1, 1]]), ones).tolist() == [1, 3, 0, 1, 0, 1] # b: before ' '
    padded, mask = F.pad(idx, (0, 2), value=97), F.pad(ones, (0, 2))
    assert boundary_counts(padded, torch.tensor([[1, 0, 0, 0, 1, 0, 1]]), mask).tolist() == [1, 4, 1, 2, 1, 1]


@pytest.mark.parametrize('side,expect', [('on', (1.0, 1.0, 1.0)), ('before', (0.0, 1.0, 1.0)),
                                         ('inside', (0.0, 0.0, 0.0))])
def test_boundary_metrics_either_side_of_the_space(side, expect):
    """ 'ab cd ef gh i' (4 spaces, at 3 6 9 12): gates on the spaces, on the byte before each, or inside the words
        (one byte earlier still); BOS's forced gate counts nowhere """
    idx = torch.tensor([encode('ab cd ef gh i')])
    at = dict(on=[3, 6, 9, 12], before=[2, 5, 8, 11], inside=[1, 4, 7, 10])[side]
    gates = torch.zeros_like(idx)
    gates[0, [0] + at] = 1
    m = boundary_metrics(boundary_counts(idx, gates, torch.ones_like(idx, dtype=torch.bool)))
    assert (m['ws_boundary'], m['word_boundary'], m['boundary_precision']) == pytest.approx(expect)


def test_boundary_counts_skip_padding_and_sum_over_rows():
    """ padding (mask False) counts nowhere, not even as the whitespace after a row's last real byte; rows add up """
    a, b = encode('ab cd'), encode('x y')
    idx = torch.tensor([a, b + [32, 32]])                    # row 2 padded with spaces, masked out
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    gates = torch.tensor([[1, 0, 1, 0, 0, 1], [1, 1, 0, 1, 1, 1]]) # row 2: 'x' (before ' '), 'y', two padded gates
    c = boundary_counts(idx, gates, mask)
    one = boundary_counts(idx[:1], gates[:1], mask[:1])
    assert one.tolist() == [1, 4, 0, 1, 1, 1]                # 'b' gated, before the space at 3; a, b, ' ', c decided
    assert c.tolist() == (one + torch.tensor([2, 3, 0, 1, 1, 1])).tolist() # 'x' (an edge) and 'y' (none after it)
    assert math.isnan(boundary_metrics(torch.zeros(6, dtype=torch.long))['ws_boundary'])


@pytest.mark.parametrize('down,up', [('select', 'nawrot'), ('nawrot', 'add'), ('nawrot', 'hnet'), ('hnet', 'nawrot')])
def test_mixed_nawrot_pairs_are_allowed(down, up):
    """ no pairing rule: the nawrot down/up no longer shift by a slot, so every pair is causal (test_causal) """
    out = ByteUNet(tiny(downsampler=down, upsampler=up))(rows(2, 64, seed=45))
    assert torch.isfinite(out['logits']).all()


def test_cpu_threads_leaves_the_cores_other_processes_hold():
    """ with every core held by a busy process, a CPU run takes one thread (two threads that meet at every op's
        barrier stall behind a process that holds a core); split among `share` processes it stays at least 1 """
    import subprocess
    import sys
    from common import cpu_threads
    n = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    busy = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(n)]
    try:
        time.sleep(0.5) # they are running
        assert cpu_threads(window=0.5) == 1
        assert cpu_threads(share=n + 1, window=0.2) == 1
    finally:
        for p in busy:
            p.kill()
            p.wait()
