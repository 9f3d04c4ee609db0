"""
eval.py as a user runs it: the lm-evaluation-harness adapter scores bytes as the model's logits do; a real harness run,
offline, on a tiny local multiple-choice task gives acc in [0, 1] and the gold continuation's bpb of a direct
computation; a group or tag is one row per task; the bpb protocol (also named fineweb) reproduces train.py's own val
bpb on the same rows and seed, says why the two differ otherwise, keeps every run in eval.jsonl, and runs without
lm_eval or tiktoken; offline is one quiet line; one-line errors; stdout is line-buffered.
Run: python -m pytest -q tests/test_eval.py
"""
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import ROOT, ctrl_c_on_fifo, needs, run_blocked_on_fifo
from eval import ByteLM, gold_bpb
from model import BOS, ByteUNet, UNetConfig, next_byte_nll

OFFLINE = dict(os.environ, HF_DATASETS_OFFLINE='1', HF_HUB_OFFLINE='1', OMP_NUM_THREADS='1')
QUESTIONS = [ # a tiny multiple-choice task: question, choices, index of the gold one
    ('What is 1 + 1?', ['two', 'three', 'a cat'], 0),
    ('Which is a colour?', ['table', 'blue'], 1),
    ('def f(x): return', [' x', ' (', ' ]]]'], 0),
    ('Where does the sun rise? In the', ['east', 'west', 'sea', 'north'], 0),
    ('A café serves', ['coffee ☕', 'nails'], 0), # non-ASCII: bytes, not characters, count
]
YAML = """task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {path}
output_type: multiple_choice
validation_split: validation
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - {{metric: acc, aggregation: mean, higher_is_better: true}}
  - {{metric: acc_norm, aggregation: mean, higher_is_better: true}}
"""


def request(*args):
    """ a harness request as ByteLM reads it (lm_eval's Instance: only .args), so the adapter tests need no lm_eval """
    return SimpleNamespace(args=args)


def tiny_model(gater='whitespace', seed=0):
    torch.manual_seed(seed)
    cfg = UNetConfig(block_size=64, n_embd=32, n_head=2, n_down=1, n_mid=1, n_up=1, window=16, gater=gater)
    return ByteUNet(cfg).eval()


def direct_ll(model, context, continuation):
    """ the log-likelihood of the continuation's bytes after BOS + the context's, one row, straight from the logits """
    ids = [BOS, *(context + continuation).encode('utf-8')[-(model.config.block_size - 1):]] # BOS + the last bytes
    X = torch.tensor([ids])
    with torch.no_grad():
        nll = next_byte_nll(model(X)['logits'], X)[0]
    n = len(continuation.encode('utf-8'))
    return -nll[len(ids) - 1 - n:].sum().item()


@pytest.fixture(scope='module')
def ckpt(tmp_path_factory):
    """ out_dir/ckpt.pt in train.py's format, a deterministic (whitespace) gater, so a direct computation sees the
        same gates; and a local task folder: the json data and a YAML pointing at it """
    root = tmp_path_factory.mktemp('eval')
    model = tiny_model()
    torch.save(dict(model=model.state_dict(), model_args=asdict(model.config), iter_num=7, best_val_loss=0.0,
                    config=dict(dataset='none', data_dir=str(root), prescribe='', seed=1337)), root / 'ckpt.pt')
    (root / 'tasks').mkdir()
    with open(root / 'tiny_mc.jsonl', 'w') as f:
        for q, c, label in QUESTIONS:
            f.write(json.dumps(dict(question=q, choices=c, label=label)) + '\n')
    (root / 'tasks' / 'tiny_mc.yaml').write_text(YAML.format(path=root / 'tiny_mc.jsonl'))
    return root, model


def run_eval(*args, env=OFFLINE):
    return subprocess.run([sys.executable, 'eval.py', *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def test_adapter_loglikelihoods_equal_the_logits():
    model = tiny_model()
    reqs = [('Question: hi\nAnswer:', ' yes'), ('', 'abc'), ('x' * 100, ' tail'), ('naïve', ' café'), ('a b', ' c')]
    lm = ByteLM(model, batch_size=2) # batches of different lengths: padding must not change a score
    got = lm.loglikelihood([request(*r) for r in reqs])
    for (c, x), (ll, greedy) in zip(reqs, got):
        assert ll == pytest.approx(direct_ll(model, c, x), abs=1e-4) # 'x' * 100: left-truncated to block_size
        assert isinstance(greedy, bool)
    text = 'def f(x):\n    return x + 1\n' * 5 # 140 bytes: rows BOS + 63, 63, 14 bytes
    (rolled,) = lm.loglikelihood_rolling([request(text)])
    data = text.encode()
    parts = [direct_ll(model, '', data[s:s + 63].decode()) for s in range(0, len(data), 63)]
    assert rolled == pytest.approx(sum(parts), abs=1e-4)
    with pytest.raises(NotImplementedError, match='does not generate'):
        lm.generate_until([])


def test_adapter_is_greedy_flag():
    model = tiny_model()
    X = torch.tensor([[BOS, *b'ab']])
    with torch.no_grad():
        best = model(X)['logits'][0, 2, :256].argmax().item() # the model's own next byte after 'ab'
    got = ByteLM(model).loglikelihood([request('ab', chr(b)) for b in range(128)])
    assert [g for _, g in got] == [b == best for b in range(128)] # one-byte characters: greedy iff the argmax


def test_harness_run_on_a_local_task_offline(ckpt):
    needs('lm_eval')
    root, model = ckpt
    r = run_eval(f'--out_dir={root}', '--tasks=tiny_mc', f'--include_path={root / "tasks"}', '--device=cpu',
                 '--batch_size=3')
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.load(open(root / 'eval.json'))
    res = out['tasks']['tiny_mc']
    assert res['n'] == len(QUESTIONS) and 0 <= res['acc'] <= 1 and 0 <= res['acc_norm'] <= 1
    gold = [-direct_ll(model, f'Question: {q}\nAnswer:', ' ' + c[label]) / len((' ' + c[label]).encode()) / math.log(2)
            for q, c, label in QUESTIONS] # the harness joins context and choice with one space
    assert res['bpb'] == pytest.approx(np.mean(gold), abs=1e-5)
    assert res['bpb_se'] == pytest.approx(np.std(gold, ddof=1) / math.sqrt(len(gold)), abs=1e-5)
    lls = [[direct_ll(model, f'Question: {q}\nAnswer:', ' ' + x) for x in c] for q, c, _ in QUESTIONS]
    assert res['acc'] == pytest.approx(np.mean([np.argmax(l) == label for l, (_, _, label) in zip(lls, QUESTIONS)]))
    assert out['iter_num'] == 7 and out['gate_seed'] == 1337 and 'eval.py' in out['command']
    assert 'tiny_mc' in r.stdout and 'deterministic' in r.stdout # the table, and what the gates were


def test_gold_bpb_reads_the_gold_choice_of_logged_samples():
    samples = [dict(target=1, arguments=[('q', ' ab'), ('q', ' abcd')], filtered_resps=[(-1.0, False), (-4.0, True)]),
               dict(target=' x', arguments=[('q', ' x')], filtered_resps=[(-2.0, True)]), # LAMBADA-like
               dict(target='b', arguments=[('q', ' a'), ('q', ' b')], filtered_resps=[(-9.0, 0), (-3.0, 0)])]
    assert gold_bpb(samples) == pytest.approx([4 / 5 / math.log(2), 2 / 2 / math.log(2), 3 / 2 / math.log(2)])


def write_split(path, split, docs):
    os.makedirs(path, exist_ok=True)
    (path / f'{split}.bin').write_bytes(b''.join(docs))
    np.save(path / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))


def test_fineweb_protocol_matches_train_py_val_bpb(tmp_path):
    """ val and test hold the same 8 documents, each shorter than block_size-1 (one row each), and eval_iters *
        batch_size = 8: train.py's val rows are then all 8 in order, batch k seeded seed + k, as eval.py's test rows
        (if train.py's val row rule changes, this is the rule to keep in step) """
    rng = np.random.default_rng(0)
    words = [b'def ', b'return ', b'self', b'.x', b' = ', b'(', b')', b':\n', b'    ', b'if ', b'None', b'1']
    train_docs = [b''.join(rng.choice(words, size=rng.integers(5, 30))) for _ in range(100)]
    test_docs = [b''.join(rng.choice(words, size=rng.integers(3, 12)))[:62] for _ in range(8)]
    for split, docs in (('train', train_docs), ('val', test_docs), ('test', test_docs)):
        write_split(tmp_path / 'tiny', split, docs)
    args = ['--device=cpu', '--dtype=float32', '--block_size=64', '--batch_size=4', '--n_embd=32', '--n_head=2',
            '--n_down=1', '--n_mid=1', '--n_up=1', '--window=16', '--eval_iters=2', '--max_iters=4',
            '--eval_interval=4', '--warmup_iters=1', f'--data_dir={tmp_path}', '--dataset=tiny', f'--out_dir={tmp_path}']
    r = subprocess.run([sys.executable, 'train.py', *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env=OFFLINE) # the sequential gater: stochastic, so the seeding must agree too
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    val = [row for row in map(json.loads, open(tmp_path / 'log.jsonl')) if row['split'] == 'val'][-1]
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert val['iter'] == ckpt['iter_num'] == 4 # the logged val bpb is the saved checkpoint's
    r = run_eval(f'--out_dir={tmp_path}', '--tasks=bpb', '--batch_size=4', '--limit=8', '--device=cpu')
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "bpb: the mean over 8 documents of test of each one's bits per byte, on its first 63 bytes" in r.stdout
    assert "train.py's val bpb is byte-weighted over eval_iters x batch_size rows" in r.stdout # why they differ
    res = json.load(open(tmp_path / 'eval.json'))['tasks']['bpb']
    assert res['n'] == 8 and res['split'] == 'test'
    assert res['corpus_bpb'] == pytest.approx(val['bpb'], abs=1e-6)
    assert res['rate'] == pytest.approx(val['rate'], abs=1e-6)
    assert res['ws_boundary'] == pytest.approx(val['ws_boundary'], abs=1e-6)
    assert 0 <= res['word_boundary'] <= 1 and 0 <= res['boundary_precision'] <= 1 # model.boundary_metrics, tested there
    model = ByteUNet(UNetConfig(**ckpt['model_args'])).eval()
    model.load_state_dict(ckpt['model'])
    per_doc = [] # directly: each batch of 4 rows padded to block_size, seeded 1337 + k, bits over the document's bytes
    for k in range(2):
        docs = test_docs[4 * k:4 * k + 4]
        X = torch.tensor([[BOS, *d] + [0] * (63 - len(d)) for d in docs])
        torch.manual_seed(1337 + k)
        with torch.no_grad():
            nll = next_byte_nll(model(X)['logits'], X)
        per_doc += [nll[i, :len(d)].sum().item() / len(d) / math.log(2) for i, d in enumerate(docs)]
    assert res['bpb'] == pytest.approx(np.mean(per_doc), abs=1e-6)
    assert res['bpb_se'] == pytest.approx(np.std(per_doc) / math.sqrt(8), abs=1e-6)
    assert 'samples them' in r.stdout and '1337' in r.stdout # the output says the gates were sampled, and how
    r = run_eval(f'--out_dir={tmp_path}', '--tasks=fineweb', '--split=val', '--limit=4', '--device=cpu') # the old name
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    runs = [json.loads(line) for line in open(tmp_path / 'eval.jsonl')] # every run, the earlier one kept
    assert [list(run['tasks']) for run in runs] == [['bpb'], ['fineweb']] and runs[0]['tasks']['bpb'] == res
    assert runs[1]['tasks']['fineweb']['split'] == 'val' and json.load(open(tmp_path / 'eval.json')) == runs[1]



@pytest.mark.parametrize('word_rate,note', [(0.0, 'deterministic'), (0.1, 'samples them')])
def test_word_gaters_say_whether_their_gates_are_drawn(tmp_path, word_rate, note):
    """ word_ends alone is a rule; topped up to the rate (word_rate > 0) it draws its extra gates """
    write_split(tmp_path / 'tiny', 'test', [b'def f(x):\n    return x\n', b'if a: b = 1\n'])
    torch.manual_seed(0)
    cfg = UNetConfig(block_size=64, n_embd=32, n_head=2, n_down=1, n_mid=1, n_up=1, window=16, gater='word_ends',
                     word_rate=word_rate)
    torch.save(dict(model=ByteUNet(cfg).state_dict(), model_args=asdict(cfg), iter_num=1, best_val_loss=0.0,
                    config=dict(dataset='tiny', data_dir=str(tmp_path), prescribe='', seed=1337)), tmp_path / 'ckpt.pt')
    r = run_eval(f'--out_dir={tmp_path}', '--tasks=bpb', '--limit=2', '--device=cpu')
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert f'gates: word_ends {note}'.replace('word_ends deterministic', 'word_ends, deterministic') in r.stdout


def gold_mean(model, prompt):
    """ the mean gold-choice bpb of QUESTIONS under a task whose doc_to_text is f'{prompt}: ...\\nAnswer:' """
    return np.mean([-direct_ll(model, f'{prompt}: {q}\nAnswer:', ' ' + c[label]) / len((' ' + c[label]).encode())
                    / math.log(2) for q, c, label in QUESTIONS])


@pytest.mark.slow # (26 s: lm-eval loads a group's tasks)
def test_a_group_or_tag_runs_its_tasks_or_is_refused_in_one_line(ckpt, tmp_path):
    """ a local folder: tiny_a and tiny_b under the tag tiny_tag and the group tiny_group; tiny_gen generates text
        and shares the tag tiny_mixed with tiny_a. A tag and a group become one row per task; tiny_mixed and tiny_gen
        are refused in one line """
    needs('lm_eval')
    root, model = ckpt
    tasks = tmp_path / 'tasks'
    tasks.mkdir()
    for name, prompt, tags in (('tiny_a', 'Question', '[tiny_tag, tiny_mixed]'), ('tiny_b', 'Q', '\n  - tiny_tag')):
        (tasks / f'{name}.yaml').write_text(f'tag: {tags}\n' + YAML.replace('task: tiny_mc', f'task: {name}')
                                            .replace('Question:', f'{prompt}:').format(path=root / 'tiny_mc.jsonl'))
    (tasks / 'tiny_gen.yaml').write_text(f"task: tiny_gen\ntag: tiny_mixed\ndataset_path: json\ndataset_kwargs:\n"
        f"  data_files:\n    validation: {root / 'tiny_mc.jsonl'}\noutput_type: generate_until\nvalidation_split: "
        "validation\ndoc_to_text: '{{question}}'\ndoc_to_target: '{{choices[label]}}'\ngeneration_kwargs:\n"
        "  until: ['\\n']\nmetric_list:\n  - {metric: exact_match, aggregation: mean, higher_is_better: true}\n")
    (tasks / '_tiny_group.yaml').write_text('group: tiny_group\ntask:\n  - tiny_a\n  - tiny_b\n')
    outs = []
    for name in ('tiny_tag', 'tiny_group', 'tiny_mixed', 'tiny_gen'):
        outs.append(tmp_path / name)
        outs[-1].mkdir()
        shutil.copy(root / 'ckpt.pt', outs[-1])
    procs = [subprocess.Popen([sys.executable, 'eval.py', f'--out_dir={out}', f'--tasks={out.name}', '--device=cpu',
                               f'--include_path={tasks}'], cwd=ROOT, env=OFFLINE, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for out in outs] # at once
    (out1, err1), (out2, err2), (_, err3), (_, err4) = [p.communicate(timeout=1800) for p in procs]
    for out, kind, stdout, err, p in zip(outs, ('tag', 'group'), (out1, out2), (err1, err2), procs):
        assert p.returncode == 0, stdout[-2000:] + err[-3000:]
        res = json.load(open(out / 'eval.json'))['tasks']
        assert sorted(res) == ['tiny_a', 'tiny_b'] and res['tiny_a']['n'] == res['tiny_b']['n'] == len(QUESTIONS)
        assert res['tiny_a']['bpb'] == pytest.approx(gold_mean(model, 'Question'), abs=1e-5) # each task its own row
        assert res['tiny_b']['bpb'] == pytest.approx(gold_mean(model, 'Q'), abs=1e-5)
        assert f'{out.name}: a {kind} of 2 tasks: ' in stdout
    assert procs[2].returncode == 1 and 'Traceback' not in err3 and len(err3.strip().splitlines()) == 1, err3
    assert "tag 'tiny_mixed' holds 2 tasks (tiny_a, tiny_gen)" in err3 and 'tiny_gen generate' in err3
    assert '--tasks=tiny_a' in err3 and not (outs[2] / 'eval.json').exists()
    assert procs[3].returncode == 1 and len(err4.strip().splitlines()) == 1, err4  # a task that generates: refused
    assert err4.startswith("eval.py: task 'tiny_gen' generates text (generate_until)")


def test_fineweb_and_sample_run_without_the_optional_packages(ckpt, lean, tmp_path):
    """ lm_eval, tiktoken, datasets, tqdm, matplotlib and wandb fail to import (lean's stubs): the fineweb bpb runs and
        shows the dataset's meta.json; a harness task says in one line what to install """
    root, model = ckpt
    docs = [b'def f(x):\n    return x\n', b'hello world ' * 3, b'a = 1\n']
    write_split(tmp_path / 'lean', 'test', docs)
    meta = dict(name='lean', source='/src/corpus', revision=None, args=dict(val_every=20),
                splits=dict(test=dict(docs=3, bytes=sum(map(len, docs)))))
    (tmp_path / 'lean' / 'meta.json').write_text(json.dumps(meta))
    shutil.copy(root / 'ckpt.pt', tmp_path)
    env = dict(OFFLINE, PYTHONPATH=str(lean))
    r = run_eval(f'--out_dir={tmp_path}', '--tasks=fineweb', f'--data_dir={tmp_path}', '--dataset=lean', env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.load(open(tmp_path / 'eval.json'))
    X = torch.tensor([[BOS, *d] + [0] * (63 - len(d)) for d in docs]) # the fineweb protocol, one batch, by hand
    torch.manual_seed(1337)
    with torch.no_grad():
        nll = next_byte_nll(model(X)['logits'], X)
    bpb = np.mean([nll[i, :len(d)].sum().item() / len(d) / math.log(2) for i, d in enumerate(docs)])
    assert out['tasks']['fineweb']['n'] == 3 and out['tasks']['fineweb']['bpb'] == pytest.approx(bpb, abs=1e-5)
    assert out['data'] == meta # prepare.py's record, kept beside the numbers
    assert f"data {tmp_path / 'lean'}: source /src/corpus, revision not pinned, prepare.py --val_every=20" in r.stdout
    os.remove(tmp_path / 'eval.json')
    r = run_eval(f'--out_dir={tmp_path}', '--tasks=fineweb,piqa', f'--data_dir={tmp_path}', '--dataset=lean', env=env)
    assert r.returncode == 1 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert 'needs lm-evaluation-harness' in r.stderr and 'pip install lm-eval' in r.stderr
    assert not (tmp_path / 'eval.json').exists() and len(open(tmp_path / 'eval.jsonl').readlines()) == 1 # the first


def test_offline_hub_task_is_one_line(ckpt, tmp_path):
    """ no network (a hub address that never resolves, RFC 6761 .invalid) and nothing cached: eval.py notices before
        the harness loads anything and runs it offline, so piqa fails at once in one line, with no retry lines """
    needs('lm_eval')
    root, _ = ckpt
    env = {k: v for k, v in os.environ.items() if not k.startswith('HF_')} # no HF_HUB_OFFLINE: eval.py must find out
    env.update(OMP_NUM_THREADS='1', HF_ENDPOINT='https://nanotok.invalid', HF_HOME=str(tmp_path / 'hf'))
    r = run_eval(f'--out_dir={root}', '--tasks=piqa', '--device=cpu', env=env)
    assert r.returncode == 1 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("eval.py: cannot fetch the data of task 'piqa'") and 'no network' in r.stderr


def test_one_line_errors(ckpt, tmp_path):
    """ each bad input: exit 1, one line on stderr naming the value and the fix, no traceback, no eval.json """
    root, _ = ckpt
    shutil.copy(root / 'ckpt.pt', tmp_path)
    for name in ('none', 'pycode', 'broken'): # datasets without a test split (pycode never has one)
        write_split(tmp_path / name, 'val', [b'abc'])
    (tmp_path / 'broken' / 'meta.json').write_text('{"source": ') # cut short
    (tmp_path / 'hub').mkdir() # piqa's own data source, the hub, with the network switched off
    (tmp_path / 'hub' / 'hub_piqa.yaml').write_text('task: hub_piqa\ndataset_path: baber/piqa\n' # as lm-eval's piqa
        "output_type: multiple_choice\nvalidation_split: validation\ndoc_to_text: '{{goal}}'\ndoc_to_target: label\n"
        "doc_to_choice: '{{[sol1, sol2]}}'\n")
    n_gpu = torch.cuda.device_count()
    (tmp_path / 'pickled').mkdir()
    torch.save(SimpleNamespace(lr=1), tmp_path / 'pickled' / 'ckpt.pt') # a pickle, not a nanotok checkpoint
    cases = [(('--tasks=fineweb',), ['none has no test split', '--split=val'], 'python prepare.py'),
             (('--tasks=bpb', f'--out_dir={tmp_path / "pickled"}'), ['is truncated or not a nanotok checkpoint'],
              'weights_only'),
             (('--tasks=bpb', '--out_dir=/proc/nanotok'), ['--out_dir=/proc/nanotok: cannot write in /proc'], None),
             (('--tasks=bpb', '--limit=0'), ['--limit=0 must be > 0'], None),
             (('--tasks=fineweb', '--dataset=pycode'), ['pycode has no test split', '--split=val'], 'python prepare.py'),
             (('--tasks=fineweb', '--dataset=broken', '--split=val'), [f"cannot read {tmp_path / 'broken'}"], None),
             (('--tasks=fineweb', '--split=tset'), ['no tset split', '(it has val)', '--split=val'], None),
             (('--tasks=piqa_typo,fineweb', '--split=val'), ["unknown task 'piqa_typo'", 'closest: piqa'], None),
             (('--tasks=tiny_mc', f'--include_path={tmp_path / "nowhere"}'), ['is not a folder'], None),
             (('--tasks=fineweb', '--device=nonsense'), ['--device=nonsense is not a device'], None),
             (('--tasks=fineweb', f'--device=cuda:{n_gpu}'), [f'--device=cuda:{n_gpu} but'], None),
             (('--tasks=fineweb', '--task_limit=-1'), ['--task_limit=-1 must be >= 0'], None)]
    if not torch.backends.mps.is_available():
        cases.append((('--tasks=fineweb', '--device=mps'), ['MPS (Apple silicon) is not available'], None))
    if importlib.util.find_spec('lm_eval'): # (without it: test_fineweb_and_sample_run_without_the_optional_packages)
        cases.append((('--tasks=hub_piqa', f'--include_path={tmp_path / "hub"}'), ['no network', 'dataset_path: json'],
                      None))
    procs = [subprocess.Popen([sys.executable, 'eval.py', f'--out_dir={tmp_path}', f'--data_dir={tmp_path}', *args],
                              cwd=ROOT, env=OFFLINE, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for args, _, _ in cases] # at once: each is mostly an import of torch
    for (args, says, never), p in zip(cases, procs):
        err = p.communicate(timeout=1800)[1]
        assert p.returncode == 1 and 'Traceback' not in err and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith('eval.py: ') and all(s in err for s in says) and (never is None or never not in err), \
            (args, err)
    assert not (tmp_path / 'eval.json').exists()


def test_stdout_reaches_a_pipe_line_by_line(ckpt, tmp_path):
    """ meta.json is a FIFO, so eval.py blocks reading it: the lines printed before that must already be in the pipe
        (a block-buffered stdout would hold them until exit, and this test would wait out its hang guard) """
    root, _ = ckpt
    write_split(tmp_path / 'fifo', 'test', [b'abc def'])
    os.mkfifo(tmp_path / 'fifo' / 'meta.json')
    first, running, out, err, rc = run_blocked_on_fifo(
        [sys.executable, 'eval.py', f'--out_dir={root}', '--tasks=fineweb', f'--data_dir={tmp_path}', '--dataset=fifo'],
        tmp_path / 'fifo' / 'meta.json', '{"source": "fifo"}', cwd=ROOT, env=OFFLINE)
    assert first.startswith('Overriding: ') and running # printed while eval.py waited on the FIFO
    assert rc == 0 and 'source fifo' in out, err[-3000:]


def test_ctrl_c_is_one_line_and_writes_nothing(ckpt, tmp_path):
    """ a Ctrl-C, here while eval.py reads the data's meta.json (a FIFO): one line, not a traceback, and no eval.json
        (the results are written at the end, whole) """
    (tmp_path / 'out').mkdir()
    shutil.copy(ckpt[0] / 'ckpt.pt', tmp_path / 'out')
    write_split(tmp_path / 'fifo', 'test', [b'abc def'])
    os.mkfifo(tmp_path / 'fifo' / 'meta.json')
    out, err, rc = ctrl_c_on_fifo([sys.executable, 'eval.py', f'--out_dir={tmp_path / "out"}', '--tasks=bpb',
                                   f'--data_dir={tmp_path}', '--dataset=fifo'], tmp_path / 'fifo' / 'meta.json',
                                  cwd=ROOT, env=OFFLINE)
    assert rc == 1 and err.splitlines() == ['eval.py: interrupted (Ctrl-C); nothing was written'], err[-3000:]
    assert os.listdir(tmp_path / 'out') == ['ckpt.pt']
