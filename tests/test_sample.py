"""
Tests for sample.py, run as a user runs it (subprocess, cwd = repo root) on tiny checkpoints made here: sampling
matches model.generate under the same seed, --show_boundaries round-trips and puts one '|' per gate, --compare
against a small tiktoken encoding (registered through tiktoken's own tiktoken_ext plugin folder), precision/recall
by hand, --analyze against a direct computation, and the error paths (one line, no traceback).
Run: python -m pytest -q tests/test_sample.py
"""
import math
import os
import re
import subprocess
import sys
from dataclasses import asdict

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from model import BOS, WHITESPACE, ByteUNet, UNetConfig, decode, next_byte_nll  # noqa: E402
from common import bpe_ends, bpe_gates  # noqa: E402
from sample import precision_recall, render  # noqa: E402 (sample.py only runs as a script)
from conftest import ctrl_c_on_fifo, run_blocked_on_fifo, tiny_encoding  # noqa: E402 (and `plugin`, `lean`)

TEXT = b"the cat sat on the mat. the dog sat on the log. " * 20
SEED = 1337  # sample.py's default seed


def unmark(s):
    """ the inverse of render(colour=False): drop each '|' marker, unescape '\\\\' and '\\|' """
    return re.sub(r'\\(.)|\|', r'\1', s, flags=re.S)


def n_markers(s):
    return sum(m.group() == '|' for m in re.finditer(r'\\.|\|', s, flags=re.S))  # '|' not escaped by a '\'



@pytest.fixture(scope='module')
def ckpts(tmp_path_factory):
    """ tiny checkpoints in train.py's format: 'sequential' untrained (random bytes, invalid UTF-8 included),
        'whitespace' trained 20 Adam steps on TEXT so that it writes ASCII words, 'bpe' untrained, as a run with
        prescribe='bpe' on the 'tiny' encoding would save it """
    root, dirs = tmp_path_factory.mktemp('ckpts'), {}
    for name, steps in (('sequential', 0), ('whitespace', 20), ('bpe', 0)):
        torch.manual_seed(0)
        gater = 'uniform' if name == 'bpe' else name
        cfg = UNetConfig(n_embd=32, n_head=2, n_down=1, n_mid=1, n_up=1, block_size=64, gater=gater)
        model = ByteUNet(cfg)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        data = torch.tensor(list(TEXT))
        for _ in range(steps):
            ix = torch.randint(len(data) - 63, (4,)).tolist()
            X = torch.stack([torch.cat([torch.tensor([BOS]), data[i:i + 63]]) for i in ix])
            loss = next_byte_nll(model(X)['logits'], X).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        dirs[name] = root / name
        dirs[name].mkdir()
        config = dict(dataset='test', block_size=64, seed=0, prescribe='bpe' if name == 'bpe' else '',
                      bpe_encoding='tiny')
        torch.save(dict(model=model.state_dict(), optimizer=opt.state_dict(), model_args=asdict(cfg), config=config,
                        iter_num=steps, best_val_loss=0.0, bytes_seen=0), dirs[name] / 'ckpt.pt')
    return dirs


def run_all(*flag_sets, plugin=None):
    """ sample.py as a user runs it, once per flag set, the processes at once (each is mostly an import of torch)
        -> [(returncode, stdout after the configurator's lines, stderr)] """
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONIOENCODING='utf-8')  # one thread, as in one_thread()
    if plugin is not None:
        env.update(PYTHONPATH=str(plugin), TIKTOKEN_CACHE_DIR=str(plugin / 'cache'))
    procs = [subprocess.Popen([sys.executable, 'sample.py', *flags], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) for flags in flag_sets]
    results = []
    for flags, p in zip(flag_sets, procs):
        out, err = p.communicate(timeout=300)
        out = out.decode('utf-8').split('\n', len(flags))[-1]  # the configurator prints one line per flag
        results.append((p.returncode, out, err.decode('utf-8')))
    return results


def run(*flags, plugin=None):
    return run_all(flags, plugin=plugin)[0]


def samples(out):
    return out.split('\n---------------\n')[:-1]


def load(path):
    ckpt = torch.load(path / 'ckpt.pt', weights_only=True)
    model = ByteUNet(UNetConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    return model.eval()


def generate(path, prompt, n, num_samples, **kw):
    """ what sample.py should print, computed here: the same seed, then model.generate on the same batch """
    model = load(path)
    x = torch.tensor([BOS] + list(prompt))[None].repeat(num_samples, 1)
    torch.manual_seed(SEED)
    return (x, *model.generate(x, n, **kw))


# -----------------------------------------------------------------------------
# pure functions, by hand

def test_precision_recall_by_hand():
    p, r = precision_recall({1, 3, 4}, {3, 4, 7, 9})  # hits 3 and 4
    assert (p, r) == (2 / 3, 2 / 4)
    assert precision_recall({0, 5}, {0, 5}) == (1.0, 1.0)
    p, r = precision_recall(set(), {1})
    assert math.isnan(p) and r == 0.0
    # 'the cat' tokens 'the', ' c', 'at' (no ' ca' or ' cat' merge): token ends at bytes 2, 4, 6
    assert bpe_ends(tiny_encoding(), b'the cat') == {2, 4, 6}
    assert bpe_ends(tiny_encoding(), b'the\xffcat') == {2, 3, 4, 6}  # an invalid byte is a token of its own
    # learned chunks 'the |cat|' against BPE 'the| c|at|' and whitespace ' ' at 3
    learned, bpe, ws = {3, 6}, {2, 4, 6}, {3}
    assert precision_recall(learned, bpe) == (1 / 2, 1 / 3) and precision_recall(learned, ws) == (1 / 2, 1.0)


def test_render_markers_escapes_and_multibyte():
    assert render(b'ab cd', [0, 1, 1, 0, 1]) == 'ab| |cd|'
    assert render(b'a|\\', [0, 1, 1]) == 'a\\||\\\\|'  # literal '|' and '\' escaped, markers after them
    assert render('é!'.encode(), [1, 1, 0]) == 'é||!'  # two gates inside 'é' (2 bytes): two markers after it
    # a broken character decodes as decode() does; the decoder hands out '\ufffd ' at once, markers after both
    assert render(b'\xe2\x82 x', [1, 0, 1, 0]) == '\ufffd ||x'
    coloured = render(b'ab cd', [0, 1, 1, 0, 1], colour=True)
    assert re.sub(r'\033\[[0-9;]*m', '', coloured) == 'ab cd' and coloured.count('\033[48') == 3  # 'ab', ' ', 'cd'
    g = torch.Generator().manual_seed(0)
    for _ in range(300):  # random bytes (many invalid UTF-8, some '|' and '\'): exact round trip, one '|' per gate
        data = bytes(torch.randint(0, 256, (int(torch.randint(0, 12, (1,), generator=g)),), generator=g).tolist())
        data = data.replace(b'\x00', b'|').replace(b'\x01', b'\\')
        gates = torch.randint(0, 2, (len(data),), generator=g).tolist()
        s = render(data, gates)
        assert unmark(s) == decode(data) and n_markers(s) == sum(gates), (data, gates, s)


# -----------------------------------------------------------------------------
# the script

def test_generate_and_show_boundaries(ckpts):
    """ 100 bytes, past block_size 64: the marks are the gates generate drew the bytes with, for every byte """
    flags = (f'--out_dir={ckpts["sequential"]}', '--device=cpu', '--max_new_tokens=100', '--start=the ',
             '--num_samples=2', '--temperature=1.0')
    rc, plain, err = run(*flags)
    rc2, shown, err2 = run(*flags, '--show_boundaries')
    assert rc == rc2 == 0, err + err2
    x, y, gates = generate(ckpts['sequential'], b'the ', 100, 2, temperature=1.0, top_k=256)
    assert samples(plain) == [decode(x[i].tolist() + y[i].tolist()) for i in range(2)]  # prompt + sample, as generate
    assert gates.shape == (2, 1 + 4 + 100)  # a gate per byte, BOS included
    for text, block, g in zip(samples(plain), samples(shown), gates):
        marked, stats = block.split('\n--- learned: ')
        assert unmark(marked) == text  # removing the markers gives the generated text
        assert n_markers(marked) == int(g[1:].sum())  # one '|' per gate of the printed bytes (BOS is not printed)
        assert stats.startswith(f'104 bytes in {int(g[1:].sum())} chunks')


def test_show_boundaries_whitespace_gater_by_hand(ckpts):
    # gates = whitespace bytes exactly, so the marked text is known: '|' after each whitespace, '\' and '|' escaped
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', '--max_new_tokens=25', '--start=a|b\\c d',
                       '--num_samples=1', '--show_boundaries', '--top_k=3')
    assert rc == 0, err
    marked, stats = samples(out)[0].split('\n--- learned: ')
    text = unmark(marked)
    assert text.startswith('a|b\\c d') and len(text.encode()) == 7 + 25
    expect = ''.join(c.replace('\\', '\\\\').replace('|', '\\|') + '|' * (ord(c) in WHITESPACE) for c in text)
    assert marked == expect and marked.startswith('a\\|b\\\\c |d')
    assert stats.endswith('ws_boundary 1.000, word_boundary 1.000, boundary_precision 1.000')


def test_compare_with_a_small_tiktoken_encoding(ckpts, plugin):
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', '--max_new_tokens=40', '--start=the cat',
                       '--num_samples=1', '--compare=tiny', '--top_k=3', plugin=plugin)
    assert rc == 0, err
    m = re.fullmatch(r'(.*)\n--- learned: (.*)\n(.*)\n--- tiny: (.*)', samples(out)[0], flags=re.S)
    assert m, out
    learned_text, learned_stats, bpe_text, bpe_stats = m.groups()
    text = unmark(learned_text)
    assert unmark(bpe_text) == text and text.isascii() and len(text) == 7 + 40
    enc = tiny_encoding()
    tokens = [enc.decode_single_token_bytes(t).decode() for t in enc.encode_ordinary(text)]
    assert bpe_text == ''.join(t + '|' for t in tokens)  # ASCII words: no escapes; '|' after every token
    # boundary sets by hand: learned = whitespace here; BPE = where each token ends
    ends = {sum(map(len, tokens[:i + 1])) - 1 for i in range(len(tokens))}
    ws = {t for t, c in enumerate(text) if ord(c) in WHITESPACE}
    p, r = len(ws & ends) / len(ws), len(ws & ends) / len(ends)
    assert bpe_stats == (f'47 bytes in {len(tokens)} tokens, {47 / len(tokens):.2f} bytes/token; '
                         f'learned vs tiny: precision {p:.3f} recall {r:.3f}')
    assert learned_stats.startswith(f'47 bytes in {len(ws)} chunks, {47 / len(ws):.2f} bytes/chunk')


def test_analyze_matches_a_direct_computation(ckpts, tmp_path):
    data = TEXT[:140] + 'é|\n'.encode() + bytes(range(0, 256, 7))  # 3 rows of 63 bytes, the last one short
    (tmp_path / 'a.txt').write_bytes(data)
    rc, out, err = run(f'--out_dir={ckpts["sequential"]}', f'--analyze={tmp_path / "a.txt"}', '--batch_size=2')
    assert rc == 0, err
    keys = r'(bpb|rate|bytes/chunk|ws_boundary|word_boundary|boundary_precision)'
    got = {k: float(v) for k, v in re.findall(keys + r' ([0-9.]+)', out)}
    # direct: rows [BOS] + 63-byte windows, right-padded, batches of 2 seeded SEED + k as train.py's eval
    model, rows = load(ckpts['sequential']), [data[i:i + 63] for i in range(0, len(data), 63)]
    nll_sum = n_targets = gate_sum = n_pos = ws_gates = n_ws = ws_hits = edge_gates = 0
    with torch.no_grad():
        for k in range(0, len(rows), 2):
            X = torch.tensor([[BOS] + list(r) + [0] * (63 - len(r)) for r in rows[k:k + 2]])
            torch.manual_seed(SEED + k // 2)
            out_ = model(X)
            nll, gates = next_byte_nll(out_['logits'], X), out_['gates']
            for i, r in enumerate(rows[k:k + 2]):
                n = 1 + len(r)  # real positions: BOS and the bytes
                nll_sum, n_targets = nll_sum + nll[i, :n - 1].sum().item(), n_targets + n - 1
                is_ws, g = [False] + [b in WHITESPACE for b in r], gates[i, :n].tolist()
                dec = range(1, min(n, 63))  # decided: real, but not BOS (0) nor the row's forced last position (63)
                gate_sum, n_pos = gate_sum + sum(g[t] for t in dec), n_pos + len(dec)
                ws_gates, n_ws = ws_gates + sum(g[t] for t in dec if is_ws[t]), n_ws + sum(is_ws[t] for t in dec)
                ws_hits += sum(1 for t in dec if is_ws[t] and (g[t] or (t - 1 in dec and g[t - 1])))  # on it or before
                edge_gates += sum(1 for t in dec if g[t] and (is_ws[t] or (t + 1 < n and is_ws[t + 1])))
    assert f'{len(data)} bytes, 3 rows of 64' in out
    assert got['bpb'] == pytest.approx(nll_sum / n_targets / math.log(2), abs=1e-4)
    assert got['rate'] == pytest.approx(gate_sum / n_pos, abs=1e-4)
    assert got['bytes/chunk'] == pytest.approx(n_pos / gate_sum, abs=1e-3)
    assert got['ws_boundary'] == pytest.approx(ws_gates / n_ws, abs=1e-4)
    assert got['word_boundary'] == pytest.approx(ws_hits / n_ws, abs=1e-4)
    assert got['boundary_precision'] == pytest.approx(edge_gates / gate_sum, abs=1e-4)


def test_analyze_shows_the_vocabulary_beside_word_ends_and_bpe(ckpts, plugin, tmp_path):
    """ --vocab: the most frequent chunks the gater cuts, counted here from the same seeded forwards, beside word
        ends at the same rate and the --compare BPE's tokens of the same rows; --analyze=val reads the val split """
    from collections import Counter
    from sample import chunks_of, show_chunk
    data = TEXT[:300]
    (tmp_path / 'data' / 'test').mkdir(parents=True)
    (tmp_path / 'data' / 'test' / 'val.bin').write_bytes(data)
    ckpt = torch.load(ckpts['whitespace'] / 'ckpt.pt', weights_only=True)
    ckpt['config']['data_dir'] = str(tmp_path / 'data')
    (tmp_path / 'ws').mkdir()
    torch.save(ckpt, tmp_path / 'ws' / 'ckpt.pt')
    rc, out, err = run(f'--out_dir={tmp_path / "ws"}', '--analyze=val', '--vocab=4', '--compare=tiny', '--batch_size=2',
                       plugin=plugin)
    assert rc == 0, err
    assert out.startswith(f"{tmp_path / 'data' / 'test' / 'val.bin'}: 300 bytes, 5 rows of 64")
    model, rows = load(ckpts['whitespace']), [data[i:i + 63] for i in range(0, len(data), 63)]
    learned = Counter()
    with torch.no_grad():
        for k in range(0, len(rows), 2): # the same rows and seeds as --analyze's forwards
            X = torch.tensor([[BOS] + list(r) + [0] * (63 - len(r)) for r in rows[k:k + 2]])
            torch.manual_seed(SEED + k // 2)
            gates = model(X)['gates'][:, 1:].tolist()
            for r, g in zip(rows[k:k + 2], gates):
                learned.update(chunks_of(r, {t for t in range(len(r)) if g[t]}))
    bpe = Counter(c for r in rows for c in chunks_of(r, bpe_ends(tiny_encoding(), r)))
    assert sum(learned.values()) > len(rows) and b''.join(chunks_of(data, {3, 7})) == data
    table = [line[:-2].split(' | ') for line in out.splitlines() if re.match(r'\| \d+ \|', line)]
    assert [int(c[0][2:]) for c in table] == [1, 2, 3, 4]
    for cells, counts, col in ((table, learned, 1), (table, bpe, 7)):
        top = counts.most_common(4)
        for i, c in enumerate(cells):
            assert c[col:col + 3] == [f'`{show_chunk(top[i][0])}`', f'{top[i][1]:,}',
                                      f'{top[i][1] / sum(counts.values()):.1%}']
    head = re.search(r'learned \(([0-9.]+)\) \| count \| share \| word ends \(([0-9.]+)\)', out)
    assert head and abs(float(head[1]) - float(head[2])) < 0.1 # word ends topped up to the learned rate
    assert f"tiny ({sum(bpe.values()) / len(data):.3f})" in out


def test_a_bpe_guided_model_is_analyzed_on_bpe_gates_and_does_not_generate(ckpts, plugin, tmp_path):
    data = TEXT[:150]  # 3 rows: 63, 63 and 24 bytes
    (tmp_path / 'a.txt').write_bytes(data)
    rc, out, err = run(f'--out_dir={ckpts["bpe"]}', f'--analyze={tmp_path / "a.txt"}', plugin=plugin)
    assert rc == 0, err
    got = {k: float(v) for k, v in re.findall(r'(bpb|rate) ([0-9.]+)', out)}
    model, rows = load(ckpts['bpe']), [data[i:i + 63] for i in range(0, len(data), 63)]
    X = torch.tensor([[BOS] + list(r) + [0] * (63 - len(r)) for r in rows])
    G = torch.stack([bpe_gates(tiny_encoding(), r, 64) for r in rows])
    with torch.no_grad():
        out_ = model(X, gates=G)
    nll, n = next_byte_nll(out_['logits'], X), [1 + len(r) for r in rows]
    bpb = sum(nll[i, :k - 1].sum().item() for i, k in enumerate(n)) / (sum(n) - len(n)) / math.log(2)
    want = G.clone()
    want[:, [0, -1]] = 1  # the forced ends: BOS, and the last position (real in the two full rows)
    assert torch.equal(out_['gates'], want.long())  # the model took the BPE gates as prescribed
    gates = sum(want[i, 1:min(k, 63)].sum().item() for i, k in enumerate(n))  # the decided ones: not the forced ends
    rate = gates / sum(min(k, 63) - 1 for k in n)
    assert got['bpb'] == pytest.approx(bpb, abs=1e-4) and got['rate'] == pytest.approx(rate, abs=1e-4)
    rc, out, err = run(f'--out_dir={ckpts["bpe"]}', plugin=plugin)
    assert rc == 1 and 'cannot generate' in err and 'Traceback' not in err


# -----------------------------------------------------------------------------
# bad input: one line, the right exit code, no traceback

def test_missing_or_broken_checkpoint(tmp_path):
    """ common.load_checkpoint, which eval.py shares: one line naming the file, and what to do; a file that is not a
        nanotok checkpoint (a pickle of anything) never gets torch's advice to load it with weights_only=False """
    import argparse
    for name in ('cut', 'pickled'):
        (tmp_path / name).mkdir()
    (tmp_path / 'cut' / 'ckpt.pt').write_bytes(b'PK\x03\x04 cut short by a kill mid-copy')
    torch.save(argparse.Namespace(lr=1), tmp_path / 'pickled' / 'ckpt.pt')
    (rc, out, err), *broken = run_all(*[(f'--out_dir={tmp_path / n}',) for n in ('nowhere', 'cut', 'pickled')])
    assert rc != 0 and 'Traceback' not in err and len(err.strip().splitlines()) == 1
    assert str(tmp_path / 'nowhere' / 'ckpt.pt') in err and f'python train.py --out_dir={tmp_path / "nowhere"}' in err
    for name, (rc, _, err) in zip(('cut', 'pickled'), broken):
        assert rc != 0 and 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f'sample.py: {tmp_path / name / "ckpt.pt"} is truncated or not a nanotok checkpoint (')
        assert 'weights_only' not in err and f'python train.py --out_dir={tmp_path / name}' in err


def test_empty_prompt_starts_from_bos(ckpts):
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', '--start=', '--max_new_tokens=10', '--num_samples=1',
                       '--show_boundaries')
    assert rc == 0, err
    assert samples(out)[0].split('\n--- learned: ')[1].startswith('10 bytes in ')  # BOS alone, then 10 new bytes


def test_too_long_prompt_keeps_the_tail(ckpts):
    prompt = ''.join(chr(ord('a') + i % 26) for i in range(100))
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', f'--start={prompt}', '--max_new_tokens=5',
                       '--num_samples=1')
    assert rc == 0, err
    assert 'prompt is 100 bytes' in err and 'keeping its last 62 bytes' in err and 'Traceback' not in err
    assert samples(out)[0].startswith(prompt[-62:]) and not samples(out)[0].startswith(prompt[:40])


def test_encoding_that_cannot_be_downloaded(ckpts, plugin):
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', '--compare=offline', '--max_new_tokens=10',
                       '--num_samples=1', plugin=plugin)
    assert rc == 0 and 'Traceback' not in err and len(err.strip().splitlines()) == 1
    assert "'offline'" in err and 'TIKTOKEN_CACHE_DIR' in err and 'no network' in err
    assert '\n--- learned: ' in samples(out)[0] and '--- offline' not in out  # the learned boundaries still print


def test_unknown_encoding(ckpts, plugin):
    rc, out, err = run(f'--out_dir={ckpts["whitespace"]}', '--compare=gtp2', plugin=plugin)
    assert rc != 0 and 'Traceback' not in err and len(err.strip().splitlines()) == 1
    assert "unknown tiktoken encoding 'gtp2'" in err and 'gpt2' in err and 'tiny' in err  # it lists the known ones


def test_bad_values_name_the_flag(ckpts):
    cases = [('--max_new_tokens=-1', '--max_new_tokens=-1 must be >= 0'), ('--top_k=0', '--top_k=0 must be > 0'),
             ('--dtype=fp8', '--dtype=fp8'), ('--temperature=0', '--temperature=0.0 must be > 0'),
             ('--max_new_tokens=1000000000', '--num_samples=3 x --max_new_tokens=1000000000 must be at most 10,000,000')]
    # (the last: 30 GB, which one sample took before printing a byte)
    if not torch.cuda.is_available():
        cases.append(('--device=cuda', 'no CUDA GPU; use --device=cpu'))
    if not torch.backends.mps.is_available():  # --device=mps on Linux, or on a Mac without MPS
        cases.append(('--device=mps', '--device=mps but MPS (Apple silicon) is not available; use --device=cpu'))
    n = torch.cuda.device_count()  # an index past the last GPU
    cases += [(f'--device=cuda:{n}', f'--device=cuda:{n} but'), ('--device=gpu', '--device=gpu is not a device')]
    results = run_all(*[(f'--out_dir={ckpts["whitespace"]}', flag) for flag, _ in cases])
    for (flag, says), (rc, out, err) in zip(cases, results):
        assert rc != 0 and says in err and 'Traceback' not in err and len(err.strip().splitlines()) == 1, flag


def test_a_prompt_whose_bytes_are_not_utf8_is_read_as_those_bytes(ckpts):
    """ argv holds bytes on Linux: a prompt of invalid UTF-8 (a Latin-1 file name pasted in) is the prompt's bytes, as
        the model reads bytes (it was a UnicodeEncodeError traceback), and prints, even where stdout is strict UTF-8 """
    prompt = b'caf\xe9 \xff'
    r = subprocess.run([sys.executable, 'sample.py', f'--out_dir={ckpts["whitespace"]}'.encode(), b'--start=' + prompt,
                        b'--max_new_tokens=5', b'--num_samples=1', b'--show_boundaries'], cwd=ROOT, capture_output=True,
                       env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONIOENCODING='utf-8:strict'))
    assert r.returncode == 0 and b'Traceback' not in r.stderr, r.stderr[-2000:]
    assert b'\n--- learned: 11 bytes in ' in r.stdout # the 6 bytes as given, then 5 more
    assert samples(r.stdout.decode('utf-8', 'replace').split('\n', 5)[-1])[0].startswith('caf\ufffd |\ufffd')


def test_runs_without_the_optional_packages(ckpts, lean, tmp_path):
    """ tiktoken, lm_eval, datasets, tqdm, matplotlib and wandb fail to import (lean's stubs): sampling and --analyze
        need only torch and numpy; --compare says in one line what to install """
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(lean))
    out_dir = f'--out_dir={ckpts["whitespace"]}'
    flags = [(out_dir, '--start=', '--max_new_tokens=20', '--num_samples=1', '--show_boundaries'),
             (out_dir, '--max_new_tokens=5', '--compare=gpt2'), (out_dir, f'--analyze={tmp_path / "a.txt"}')]
    (tmp_path / 'a.txt').write_bytes(TEXT)
    procs = [subprocess.Popen([sys.executable, 'sample.py', *f], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for f in flags]
    (out, err), (_, err2), (out3, err3) = [p.communicate(timeout=1800) for p in procs]
    assert procs[0].returncode == 0 and '--- learned: 20 bytes in ' in out, err
    assert procs[1].returncode == 1 and 'Traceback' not in err2 and len(err2.strip().splitlines()) == 1, err2
    assert 'tiktoken' in err2 and 'pip install tiktoken' in err2
    assert procs[2].returncode == 0 and f'{len(TEXT)} bytes, ' in out3 and ' bpb ' in out3, err3


def test_stdout_reaches_a_pipe_line_by_line(ckpts, tmp_path):
    """ the prompt is a FIFO, so sample.py blocks reading it: the lines printed before that must already be in the
        pipe (a block-buffered stdout would hold them until exit, and this test would wait out its hang guard) """
    os.mkfifo(tmp_path / 'prompt')
    first, running, out, err, rc = run_blocked_on_fifo(
        [sys.executable, 'sample.py', f'--out_dir={ckpts["whitespace"]}', f'--start=FILE:{tmp_path / "prompt"}',
         '--max_new_tokens=5', '--num_samples=1'], tmp_path / 'prompt', 'the cat', cwd=ROOT,
        env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert first.startswith('Overriding: ') and running  # printed while sample.py waited on the FIFO
    assert rc == 0 and out.split('\n')[3].startswith('the cat'), err  # 3 more configurator lines, then the sample


def test_ctrl_c_is_one_line(ckpts, tmp_path):
    """ a Ctrl-C, here while sample.py waits for its prompt (a FIFO): one line, not a traceback """
    os.mkfifo(tmp_path / 'prompt')
    out, err, rc = ctrl_c_on_fifo([sys.executable, 'sample.py', f'--out_dir={ckpts["whitespace"]}',
                                   f'--start=FILE:{tmp_path / "prompt"}'], tmp_path / 'prompt', cwd=ROOT,
                                  env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert rc == 1 and err.splitlines() == ['sample.py: interrupted (Ctrl-C)'], err[-3000:]
