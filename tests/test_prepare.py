"""prepare.py: the document filters, the split rule and byte budget, resuming an interrupted run byte for byte,
meta.json, the text column only, the file format, pycode, files, the progress lines and the error lines, and a
finished dataset never replaced silently."""
import json
import os
import re
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import prepare  # noqa: E402


def load(out_dir, split):
    """The documents of one split, after checking the format prepare.py promises."""
    data = (Path(out_dir) / f'{split}.bin').read_bytes()
    off = np.load(Path(out_dir) / f'{split}_offsets.npy')
    assert off.dtype == np.int64 and off[0] == 0 and off[-1] == len(data)
    assert np.all(np.diff(off) > 0)  # strictly increasing: no empty documents
    assert not list(Path(out_dir).glob('*.tmp'))  # nothing half-written left behind
    return [data[off[i]:off[i + 1]] for i in range(len(off) - 1)]


def run(*args, **env):
    """prepare.py as a user runs it, offline."""
    return subprocess.run([sys.executable, str(ROOT / 'prepare.py'), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=1800, env={**os.environ, 'HF_HUB_OFFLINE': '1', **env})


# UTF-8 byte lengths differ from character counts here, so a filter counting characters fails the boundary cases
DOCS = [
    'é' * 2048,               # exactly 4096 bytes (2048 characters): out for fineweb, in for codeparrot
    'a' * 4096,               # exactly 4096 bytes, ASCII
    'a' * 4095 + '€',         # 4098 bytes: in for both
    'x' * 4097,               # 4097 bytes: in for both
    'a' * 4000 + '😀' * 30,   # 4120 bytes but 4030 characters: in for both
    'é' * 2047 + 'a',         # 4095 bytes: out for both
    'short doc, ünïcödé',     # out for both
    'ab' * 6000,              # 12000 bytes: in for both, truncated to 4095 by default
] + [f'doc {i} ' + 'Grüße, 世界! ' * (300 + 50 * i) for i in range(12)]  # 4.8 kB to 17 kB: in for both


def kept(min_bytes):
    return [d.encode() for d in DOCS if len(d.encode()) >= min_bytes]


def write_jsonl(path, field):
    with open(path, 'w', encoding='utf-8') as f:
        for d in DOCS:
            f.write(json.dumps({'id': 'x', field: d}) + '\n')
    return str(path)


@pytest.mark.parametrize('name, field, min_bytes', [('fineweb', 'text', 4097), ('codeparrot', 'content', 4096)])
def test_hub_filter_and_splits(tmp_path, name, field, min_bytes):
    src = write_jsonl(tmp_path / 'src.jsonl', field)
    prepare.main([name, f'--source={src}', f'--out_dir={tmp_path}/out', '--test_docs=4', '--val_docs=3',
                  '--max_doc_bytes=0'])
    test, val, train = (load(tmp_path / 'out', s) for s in ('test', 'val', 'train'))
    assert len(test) == 4 and len(val) == 3 and len(train) == len(kept(min_bytes)) - 7
    # exactly the long-enough docs, byte for byte, each in one split only: test, val and train are disjoint
    assert Counter(test + val + train) == Counter(kept(min_bytes))
    assert ('é' * 2048).encode() in train + val + test if name == 'codeparrot' else ('é' * 2048).encode() not in train


def test_hub_truncation_budget_and_determinism(tmp_path):
    src = write_jsonl(tmp_path / 'src.jsonl', 'text')
    outs = [tmp_path / 'a', tmp_path / 'b']
    for out in outs:  # default --max_doc_bytes=4095: every kept doc is a 4095-byte prefix, so 10 fit the budget
        prepare.main(['fineweb', f'--source={src}', f'--out_dir={out}', '--test_docs=3', '--val_docs=2',
                      f'--max_bytes={10 * 4095 + 100}'])
    test, val, train = (load(outs[0], s) for s in ('test', 'val', 'train'))
    assert len(test) == 3 and len(val) == 2 and len(train) == 5  # the budget covers all three splits
    prefixes = Counter(d[:4095] for d in kept(4097))
    assert all(len(d) == 4095 and prefixes[d] > 0 for d in test + val + train)
    for f in [f'{s}{x}' for s in ('test', 'val', 'train') for x in ('.bin', '_offsets.npy')]:  # seeded: the same twice
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes()


def write_parquet_folder(path, n_files, docs, field):
    import pyarrow as pa
    import pyarrow.parquet as pq
    path.mkdir()
    for i in range(n_files):  # a folder of shards, as a local copy of the hub dataset would be
        pq.write_table(pa.table({field: docs[i::n_files]}), path / f'part{i}.parquet')


def test_hub_parquet_folder(tmp_path):
    write_parquet_folder(tmp_path / 'src', 2, DOCS, 'content')
    prepare.main(['codeparrot', f'--source={tmp_path}/src', f'--out_dir={tmp_path}/out', '--test_docs=2',
                  '--val_docs=1'])
    docs = load(tmp_path / 'out', 'test') + load(tmp_path / 'out', 'val') + load(tmp_path / 'out', 'train')
    assert Counter(docs) == Counter(d[:4095] for d in kept(4096))


def test_pycode(tmp_path):
    for out in ['a', 'b']:
        prepare.main(['pycode', f'--out_dir={tmp_path}/{out}'])
    val, train = load(tmp_path / 'a', 'val'), load(tmp_path / 'a', 'train')
    assert len(train) > 500 and len(val) > 10 and sum(map(len, train)) > 5e6  # the stdlib is thousands of files
    stdlib = Path(sysconfig.get_paths()['stdlib'])
    assert (stdlib / 'os.py').read_bytes() in val + train  # whole files, unmodified
    for f in ['val.bin', 'train.bin', 'val_offsets.npy', 'train_offsets.npy']:  # deterministic
        assert (tmp_path / 'a' / f).read_bytes() == (tmp_path / 'b' / f).read_bytes()
    meta = json.loads((tmp_path / 'a' / 'meta.json').read_text())
    assert meta['source'] == str(stdlib) and meta['revision'] == f'python {sys.version.split()[0]}'
    assert meta['splits']['train'] == {'docs': len(train), 'bytes': sum(map(len, train))}


def test_files(tmp_path):
    src = {'a.txt': 'héllo wörld\n'.encode(), 'b.bin': b'\xff\xfe\x00not utf-8 \x80\xc3', 'sub/c.md': b'# c\n',
           'sub/deeper/d.txt': b'dddd', 'empty.txt': b'', '.git/objects/e': b'hidden: skipped'}
    for rel, data in src.items():
        (tmp_path / 'in' / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / 'in' / rel).write_bytes(data)
    prepare.main(['files', f'--path={tmp_path}/in', f'--out_dir={tmp_path}/out'])
    val, train = load(tmp_path / 'out', 'val'), load(tmp_path / 'out', 'train')
    assert len(val) >= 1 and len(train) >= 1
    wanted = [d for r, d in src.items() if d and not r.startswith('.')]  # empty and hidden files skipped
    assert Counter(val + train) == Counter(wanted)  # invalid UTF-8 kept byte for byte
    assert train == [d for d in wanted if d in train]  # sorted path order
    meta = json.loads((tmp_path / 'out' / 'meta.json').read_text())
    assert meta['name'] == 'files' and meta['source'] == str(tmp_path / 'in') and meta['revision'] is None
    assert meta['args']['path'] == f'{tmp_path}/in' and meta['splits']['val']['docs'] == len(val)
    assert meta['splits']['train']['bytes'] == sum(map(len, train))
    prepare.main(['files', f'--path={tmp_path}/in', '--glob=**/*.txt', f'--out_dir={tmp_path}/txt'])
    assert sorted(load(tmp_path / 'txt', 'val') + load(tmp_path / 'txt', 'train')) == [b'dddd', src['a.txt']]
    prepare.main(['files', f'--path={tmp_path}/in', '--glob=**/*.txt', '--val_every=1', f'--out_dir={tmp_path}/v1'])
    assert load(tmp_path / 'v1', 'val') and load(tmp_path / 'v1', 'train')  # every file hashed to val: one is train


@pytest.mark.parametrize('args, words', [
    (['nope'], ['nope', 'fineweb', 'codeparrot', 'pycode', 'files']),
    (['files', '--path=/no/such/dir'], ['--path', '/no/such/dir']),
    (['files', '--path={empty}'], ['no non-empty files', '{empty}']),
    (['fineweb'], ['Hugging Face hub', 'HuggingFaceFW/fineweb', '--source']),
    (['codeparrot', '--source=/no/such/file.jsonl'], ['/no/such/file.jsonl', 'does not exist']),
    (['fineweb', '--source={bad}'], ['could not read', '{bad}']),
    (['files', '--path={one}'], ['{one}', 'has 1 non-empty file', 'val and train need 2', 'add files']),
    (['fineweb', '--source={one}', '--test_docs=1', '--val_docs=1'], ['{one}', '1 documents kept', 'left for val']),
    (['fineweb', '--source={one}', '--val_docs=0'], ['--val_docs=0', '>= 1']),
    (['fineweb', '--source={one}', '--num_proc=4'], ['--num_proc=4']),
    (['files', '--path={one}', '--max_doc_bytes=-5'], ['--max_doc_bytes=-5 must be >= 0']),  # cut 5 bytes off each
    (['fineweb', '--source={one}', '--max_bytes=inf'], ['--max_bytes', "'inf'"]),
    (['files', '--path={one}', '--out_dir=/proc/nanotok'], ['--out_dir=/proc/nanotok: cannot write in /proc']),
    (['files', '--path={one}', '--out_dir={bad}'], ['--out_dir={bad}', 'bad.jsonl is a file, not a folder']),
])
def test_errors(tmp_path, args, words):
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'one').mkdir()
    (tmp_path / 'one' / 'a.jsonl').write_text(json.dumps({'text': 'x' * 5000}) + '\n')  # one document in one file
    (tmp_path / 'bad.jsonl').write_text('{"text": "unterminated\n')
    fill = lambda s: s.format(empty=tmp_path / 'empty', bad=tmp_path / 'bad.jsonl', one=tmp_path / 'one')
    r = run(f'--out_dir={tmp_path}/out', *map(fill, args))  # (a later --out_dir wins)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr
    assert all(fill(w) in lines[0] for w in words), lines[0]
    assert not (tmp_path / 'out').exists()  # no files, not even an empty folder that looks like a dataset


def test_a_dataset_is_not_replaced_silently(tmp_path):
    """Rerunning the command that made a dataset does nothing; other arguments, or a folder of datasets that
    prepare.py did not record, are refused in one line, as a model trained on it needs it as it was; --restart
    replaces it. A '~' in a path is the home folder."""
    (tmp_path / 'in').mkdir()
    for i in range(6):
        (tmp_path / 'in' / f'{i}.txt').write_text(f'document {i} ' * (i + 1))
    args = ['files', '--path=~/in', '--out_dir=~/out']
    home = {'HOME': str(tmp_path)}
    assert run(*args, **home).returncode == 0
    made = {f: (tmp_path / 'out' / f).read_bytes() for f in os.listdir(tmp_path / 'out')}
    r = run(*args, **home)
    assert r.returncode == 0 and 'nothing to do' in r.stdout and 'Traceback' not in r.stderr, r.stderr
    r = run(*args, '--val_every=2', **home)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and '--val_every=20 (now --val_every=2)' in lines[0], r.stderr
    assert '--restart' in lines[0] and {f: (tmp_path / 'out' / f).read_bytes() for f in made} == made
    assert sorted(os.listdir(tmp_path / 'out')) == sorted(made)  # nothing added either
    r = run('pycode', '--out_dir=~/out', **home)  # another dataset's name
    assert r.returncode == 1 and 'made from files (now pycode)' in r.stderr, r.stderr
    (tmp_path / 'out' / 'meta.json').unlink()  # its record gone: whose is it?
    r = run(*args, **home)
    assert r.returncode == 1 and 'no readable meta.json' in r.stderr and '--restart' in r.stderr, r.stderr
    r = run(*args, '--val_every=2', '--restart', **home)
    assert r.returncode == 0 and json.loads((tmp_path / 'out' / 'meta.json').read_text())['args']['val_every'] == 2


def test_the_same_command_says_when_the_input_files_changed(tmp_path, capsys):
    """The same command again, after the folder's files changed (an edit, a new file): one line says so and how to
    make the dataset again, which stays as it was (a model trained on it needs it). A dataset from before meta.json
    held the fingerprint of its inputs: nothing to do, as before."""
    (tmp_path / 'in').mkdir()
    for i in range(6):
        (tmp_path / 'in' / f'{i}.txt').write_text(f'document {i} ' * (i + 1))
    args, out = ['files', f'--path={tmp_path}/in', f'--out_dir={tmp_path}/out'], tmp_path / 'out'
    prepare.main(args)
    made = {f: (out / f).read_bytes() for f in os.listdir(out)}
    assert json.loads(made['meta.json'])['inputs']['files'] == 6
    capsys.readouterr()
    prepare.main(args)
    assert 'made by the same arguments: nothing to do' in capsys.readouterr().out
    (tmp_path / 'in' / '3.txt').write_text('an edited document')
    prepare.main(args)
    said = capsys.readouterr().out
    assert 'from input files that have changed since (6 files then, 6 now)' in said and '--restart' in said, said
    (tmp_path / 'in' / '6.txt').write_text('a new document')
    prepare.main(args)
    assert '(6 files then, 7 now)' in capsys.readouterr().out
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == made  # kept as it is
    meta = json.loads(made['meta.json'])
    del meta['inputs']  # as prepare.py wrote it before
    (out / 'meta.json').write_text(json.dumps(meta))
    prepare.main(args)
    assert 'nothing to do' in capsys.readouterr().out
    prepare.main([*args, '--restart'])
    assert len(load(out, 'val') + load(out, 'train')) == 7
    prepare.main(args)
    assert 'nothing to do' in capsys.readouterr().out


def test_ctrl_c_while_the_files_are_read_leaves_nothing(tmp_path, monkeypatch):
    """pycode, pydocs, files: a Ctrl-C while they read (here the third file's read raises it): one line, and no .tmp
    file, no folder; then the same command makes the dataset."""
    (tmp_path / 'in').mkdir()
    for i in range(40):
        (tmp_path / 'in' / f'{i}.txt').write_text(f'document {i} ' * 100)
    reads, read_bytes = [], Path.read_bytes

    def ctrl_c(path):
        reads.append(path)
        if len(reads) == 3:
            raise KeyboardInterrupt
        return read_bytes(path)
    monkeypatch.setattr(Path, 'read_bytes', ctrl_c)
    args = ['files', f'--path={tmp_path}/in', f'--out_dir={tmp_path}/out']
    try:
        prepare.main(args)
    except BaseException as e:  # (a KeyboardInterrupt let through would stop pytest itself)
        said = getattr(e, 'code', repr(e))
    assert said == 'prepare.py: files: interrupted; nothing was written (the same command makes it)'
    assert not (tmp_path / 'out').exists()
    monkeypatch.setattr(Path, 'read_bytes', read_bytes)
    prepare.main(args)
    assert len(load(tmp_path / 'out', 'val') + load(tmp_path / 'out', 'train')) == 40


def test_docstrings():
    src = (b'"""Module doc."""\nx = "a string, not a docstring"\nclass A:\n    """Class doc."""\n'
           b'    def f(self):\n        """Method\n        doc, d\xc3\xa9dented."""\n        return 1\n'
           b'async def g():\n    """G doc."""\ndef h():\n    pass\n')
    assert prepare.docstrings(src) == 'Module doc.\n\nClass doc.\n\nMethod\ndoc, dédented.\n\nG doc.'.encode()
    assert prepare.docstrings(b'def f(:\n') == b''  # does not parse: no document
    assert prepare.docstrings(b'x = 1\n') == b''  # no docstrings: no document


@pytest.mark.slow
def test_pydocs(tmp_path):
    prepare.main(['pydocs', f'--out_dir={tmp_path}'])
    val, train = load(tmp_path, 'val'), load(tmp_path, 'train')
    assert len(train) > 500 and len(val) > 10 and sum(map(len, train)) > 1e6  # megabytes of English prose
    stdlib = Path(sysconfig.get_paths()['stdlib'])
    assert prepare.docstrings((stdlib / 'textwrap.py').read_bytes()) in val + train  # one document per file
    assert b'Text wrapping and filling' in b''.join(val + train)


# ---------------------------------------------------------------------------------------------------------------
# fineweb/codeparrot: the split rule, resuming, meta.json, the text column only, the error wording

def fineweb_like(path, n_files, rows, row_group, seed=0, junk=0):
    """A folder of FineWeb-shaped parquet files (its nine columns, several row groups per file); document lengths
    2-9 kB, so about half pass the 4097-byte filter. junk > 0 adds a column of that many random bytes per row.
    Returns the texts of each file in row order."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    texts = {}
    for i in range(n_files):
        name = f'{i:03d}_00000.parquet'
        lens = rng.integers(2000, 9000, size=rows)
        letters = rng.integers(97, 123, size=int(lens.sum()), dtype=np.uint8)
        letters[rng.random(letters.size) < 0.15] = 32  # words
        cuts = np.concatenate([[0], np.cumsum(lens)])
        head = lambda r: f'{name} row {r}: ' + 'é' * (r % 3)  # UTF-8 bytes != characters
        texts[name] = [head(r) + letters[cuts[r]:cuts[r + 1]].tobytes().decode() for r in range(rows)]
        cols = {'text': texts[name], 'id': [f'<urn:uuid:{i}-{r}>' for r in range(rows)],
                'dump': ['CC-MAIN-2024-10'] * rows,
                'url': [f'https://example.com/{i}/{r}' for r in range(rows)], 'date': ['2024-02-20T00:00:00Z'] * rows,
                'file_path': [f's3://commoncrawl/{i}.warc.gz'] * rows, 'language': ['en'] * rows,
                'language_score': rng.random(rows), 'token_count': (lens // 4).astype(np.int64)}
        if junk:
            cols['junk'] = [rng.bytes(junk) for _ in range(rows)]
        pq.write_table(pa.table(cols), path / name, row_group_size=row_group)
    return texts


SPLIT_FILES = [f'{s}{x}' for s in ('test', 'val', 'train') for x in ('.bin', '_offsets.npy')]


def same_output(a, b):
    """Every .bin and _offsets.npy byte for byte, and the same meta.json apart from out_dir."""
    assert all((Path(a) / f).read_bytes() == (Path(b) / f).read_bytes() for f in SPLIT_FILES)
    ma, mb = (json.loads((Path(d) / 'meta.json').read_text()) for d in (a, b))
    for m in (ma, mb):
        m['args'].pop('out_dir')
        m['args'].pop('restart')
    assert ma == mb
    assert not [f for f in os.listdir(b) if 'partial' in f or 'manifest' in f or f.endswith('.tmp')]


def test_split_rule_is_the_docstrings(tmp_path):
    """Replays prepare.py's docstring rule here: seeded file order, --interleave files round-robin one row group
    each, the kept documents cut and dealt test, val, train in that order until --max_bytes."""
    import random
    texts = fineweb_like(tmp_path / 'src', 5, 30, 7)  # 5 row groups per file, the last one short
    args = ['fineweb', f'--source={tmp_path}/src', '--test_docs=9', '--val_docs=4', '--interleave=2', '--seed=7',
            '--max_doc_bytes=5000', '--max_bytes=200000']
    prepare.main(args + [f'--out_dir={tmp_path}/out'])
    order = sorted(texts)
    random.Random(7).shuffle(order)
    live, want = [], []
    while order or live:  # a round: the next piece of every open file, then the finished ones are replaced
        while len(live) < 2 and order:
            live.append([order.pop(0), 0])
        for s in live:
            want += texts[s[0]][s[1]:s[1] + 7]
            s[1] += 7
        live = [s for s in live if s[1] < 30]
    want = [t.encode()[:5000] for t in want if len(t.encode()) >= 4097]
    spent = np.cumsum([len(d) for d in want])
    want = want[:int(np.searchsorted(spent, 200000, side='right'))]
    assert len(want) > 13 and sum(map(len, want)) <= 200000 < sum(map(len, want)) + 5000
    got = [load(tmp_path / 'out', s) for s in ('test', 'val', 'train')]
    assert got == [want[:9], want[9:13], want[13:]]
    meta = json.loads((tmp_path / 'out' / 'meta.json').read_text())
    assert meta['name'] == 'fineweb' and meta['source'] == str((tmp_path / 'src').resolve())
    assert meta['revision'] is None and meta['args']['max_bytes'] == 200000 and meta['args']['seed'] == 7
    sizes = {s: {'docs': len(d), 'bytes': sum(map(len, d))} for s, d in zip(('test', 'val', 'train'), got)}
    assert meta['splits'] == sizes


def gz_jsonl(path, n_files, field):
    """codeparrot-shaped: json lines in gzip files, one piece each."""
    import gzip
    path.mkdir()
    for i in range(n_files):
        with gzip.open(path / f'file-{i:012d}.json.gz', 'wt', encoding='utf-8') as f:
            for d in DOCS[i::n_files]:
                f.write(json.dumps({'repo_name': 'r', 'path': 'p.py', field: d, 'license': 'mit'}) + '\n')


@pytest.mark.parametrize('name', ['fineweb', 'codeparrot'])
def test_resume_after_interrupt_is_byte_identical(tmp_path, name):
    if name == 'fineweb':
        fineweb_like(tmp_path / 'src', 4, 24, 5)  # 20 pieces
    else:
        gz_jsonl(tmp_path / 'src', 6, 'content')  # 6 pieces
    args = lambda out, *more: [name, f'--source={tmp_path}/src', f'--out_dir={tmp_path / out}', '--test_docs=5',
                               '--val_docs=3', '--interleave=3', *more]
    assert run(*args('whole')).returncode == 0
    stops = [1, 4, 9] if name == 'fineweb' else [2, 1]
    for stop in stops:  # interrupted inside a piece, again and again
        r = run(*args('cut'), NANOTOK_PREPARE_STOP_AFTER=str(stop))
        assert r.returncode != 0 and 'interrupted' in r.stderr and 'rerun the same command to resume' in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr, r.stderr
        assert (tmp_path / 'cut' / 'manifest.json').exists() and not (tmp_path / 'cut' / 'train.bin').exists()
    r = run(*args('cut'))
    assert r.returncode == 0 and 'resuming' in r.stdout, r.stdout + r.stderr
    same_output(tmp_path / 'whole', tmp_path / 'cut')


@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM'])
def test_resume_after_a_real_signal(tmp_path, sig):
    import signal
    import time
    fineweb_like(tmp_path / 'src', 3, 20, 4)  # 15 pieces
    args = lambda out: [sys.executable, str(ROOT / 'prepare.py'), 'fineweb', f'--source={tmp_path}/src',
                        f'--out_dir={tmp_path / out}', '--test_docs=4', '--val_docs=2']
    subprocess.run(args('whole'), check=True, capture_output=True, timeout=1800)
    p = subprocess.Popen(args('cut'), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, 'NANOTOK_PREPARE_PAUSE_AFTER': '6'})  # waits after 6 pieces
    man, t0 = tmp_path / 'cut' / 'manifest.json', time.monotonic()
    while not (man.exists() and json.loads(man.read_text())['pieces'] == 6):
        assert p.poll() is None and time.monotonic() - t0 < 1800  # a hang guard, not a speed check
        time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=1800)
    assert p.returncode != 0 and err.count('\n') == 1 and 'interrupted after 6 pieces' in err, err
    r = subprocess.run(args('cut'), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and 'resuming' in r.stdout and 'after 6 pieces' in r.stdout, r.stdout + r.stderr
    same_output(tmp_path / 'whole', tmp_path / 'cut')


def test_changed_arguments_are_refused_and_restart_starts_over(tmp_path):
    fineweb_like(tmp_path / 'src', 2, 20, 5)
    args = lambda out, *more: ['fineweb', f'--source={tmp_path}/src', f'--out_dir={tmp_path / out}', '--test_docs=3',
                               '--val_docs=2', *more]
    prepare.main(args('whole'))
    assert run(*args('cut'), NANOTOK_PREPARE_STOP_AFTER='3').returncode != 0
    before = {f: (tmp_path / 'cut' / f).read_bytes() for f in os.listdir(tmp_path / 'cut')}
    for more, word in ((['--val_docs=5'], '--val_docs=2'), (['--seed=1'], '--seed=42'),
                       (['--max_doc_bytes=0'], '--max_doc_bytes=4095')):
        r = run(*args('cut', *more))
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1 and word in lines[0] and '--restart' in lines[0], r.stderr
        assert {f: (tmp_path / 'cut' / f).read_bytes() for f in os.listdir(tmp_path / 'cut')} == before  # untouched
    (tmp_path / 'src' / '001_00000.parquet').rename(tmp_path / 'src' / '009_00000.parquet')  # the files changed
    r = run(*args('cut'))
    assert r.returncode != 0 and 'other files' in r.stderr and '--restart' in r.stderr, r.stderr
    (tmp_path / 'src' / '009_00000.parquet').rename(tmp_path / 'src' / '001_00000.parquet')
    r = run(*args('cut', '--val_docs=4', '--restart'))
    assert r.returncode == 0 and 'resuming' not in r.stdout
    assert len(load(tmp_path / 'cut', 'val')) == 4 and not (tmp_path / 'cut' / 'manifest.json').exists()
    r = run(*args('cut', '--restart'))  # and back: the same as the uninterrupted run
    same_output(tmp_path / 'whole', tmp_path / 'cut')


def test_only_the_text_column_is_read(tmp_path, monkeypatch):
    """A parquet file whose other column is nine tenths of it: the bytes read are about the text column's."""
    fineweb_like(tmp_path / 'src', 1, 40, 8, junk=60_000)
    size = (tmp_path / 'src' / '000_00000.parquet').stat().st_size
    seen, opened = [], prepare.open_source

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            b = self.f.read(n)
            seen.append(len(b))
            return b

        def __getattr__(self, k):
            return getattr(self.f, k)

    monkeypatch.setattr(prepare, 'open_source', lambda a, rel: Counting(opened(a, rel)))
    prepare.main(['fineweb', f'--source={tmp_path}/src', f'--out_dir={tmp_path}/out', '--test_docs=2', '--val_docs=2'])
    import pyarrow.parquet as pq
    md = pq.ParquetFile(tmp_path / 'src' / '000_00000.parquet').metadata
    chunk = lambda j: sum(md.row_group(i).column(j).total_compressed_size for i in range(md.num_row_groups))
    text, junk = chunk(0), chunk(md.num_columns - 1)  # the text column, the junk column (last)
    assert junk > 0.8 * size and text < sum(seen) < text + 0.05 * junk, (sum(seen), text, junk)  # footer reads aside
    assert len(load(tmp_path / 'out', 'test')) == 2


def test_progress_bar(tmp_path, monkeypatch, capsys):
    """fineweb's tqdm bar counts the kept bytes against --max_bytes and shows the source read and the documents per
    split; this source runs out before the budget, so the bar's total falls to what the source gives and it ends at
    100% (its time left is the source's, not the budget's)."""
    pytest.importorskip('tqdm')
    fineweb_like(tmp_path / 'src', 2, 10, 5)
    monkeypatch.setattr(prepare, 'PROGRESS_EVERY', 0.0)  # every update redrawn: the bar's content, not its timing
    prepare.main(['fineweb', f'--source={tmp_path}/src', f'--out_dir={tmp_path}/out', '--test_docs=2', '--val_docs=1',
                  '--max_bytes=1e6'])
    out = capsys.readouterr().out
    bars = [line for line in re.split('[\r\n]', out) if line.startswith('fineweb: ')]
    assert any('/1.00M ' in b for b in bars), bars  # the budget, before the source's end is foreseen
    read = [int(b.split('source ')[1].split('%')[0]) for b in bars if 'source ' in b]
    assert read == sorted(read) and read[-1] == 100, read
    n = {s: len(load(tmp_path / 'out', s)) for s in ('test', 'val', 'train')}
    assert bars[-1].startswith('fineweb: 100%') and bars[-1].endswith(f"docs: test {n['test']} val {n['val']} "
                                                                      f"train {n['train']}]"), bars[-1]
    assert out.rstrip().endswith(f"train: {n['train']:,} docs, {sum(map(len, load(tmp_path / 'out', 'train'))):,} bytes")


def test_why_names_the_cause():
    import errno

    class Response:
        status_code = 429

    class HTTPError(Exception):
        response = Response()

    class ConnectError(Exception):
        pass

    full = OSError(errno.ENOSPC, 'No space left on device')
    assert 'no space left on device (disk full)' in prepare.why(full) and 'resume' in prepare.why(full)
    assert prepare.why(HTTPError('boom')) == ('HTTP 429 Too Many Requests from the Hugging Face hub: rate limited, '
                                              'rerun later to resume')
    for e in (ConnectError('[Errno -3] Temporary failure in name resolution'), ConnectionResetError('reset')):
        assert 'could not reach the Hugging Face hub' in prepare.why(e) and 'no network?' in prepare.why(e)
    try:  # the cause is found through the chain of a wrapping error
        try:
            raise full
        except OSError as e:
            raise RuntimeError('writing failed') from e
    except RuntimeError as e:
        assert 'disk full' in prepare.why(e)
    assert prepare.why(ValueError('a bad row')) == 'ValueError: a bad row'
    errors = pytest.importorskip('huggingface_hub.errors')  # the hub's own error, as HfFileSystem raises it
    web = sys.modules[errors.Response.__module__.split('.')[0]]  # httpx, or the fork this version uses
    resp = web.Response(503, request=web.Request('GET', 'https://huggingface.co/api/datasets/x'))
    assert prepare.why(errors.HfHubHTTPError('503 Server Error', response=resp)).startswith(
        'HTTP 503 Service Unavailable from the Hugging Face hub')


def test_hub_listing_pins_and_records_the_revision(tmp_path, monkeypatch):
    """The Hub path through a stand-in huggingface_hub over a local folder: the resolved commit is what is read and
    recorded, a resume reads the commit its run started on, and the documents equal a --source run's."""
    import types
    fineweb_like(tmp_path / 'repo' / 'sample' / '100BT', 3, 12, 4)
    (tmp_path / 'repo' / 'README.md').write_text('the card: not a data file')
    (tmp_path / 'repo' / 'dataset_info.json').write_text('{"nor": "this"}')  # the fake lists the whole repo
    asked, prefix = [], 'datasets/HuggingFaceFW/fineweb@c0ffee/'

    class HfApi:
        def dataset_info(self, repo, revision=None):
            asked.append((repo, revision))
            return types.SimpleNamespace(sha='c0ffee' if revision in (None, 'main') else revision)

    class HfFileSystem:
        def find(self, path, detail=False):
            assert path == prefix + 'sample/100BT' and detail
            return {prefix + p.relative_to(tmp_path / 'repo').as_posix(): {'size': p.stat().st_size}
                    for p in (tmp_path / 'repo').rglob('*')}

        def open(self, path, mode):
            assert path.startswith(prefix)
            return open(tmp_path / 'repo' / path[len(prefix):], mode)

    monkeypatch.setitem(sys.modules, 'huggingface_hub', types.SimpleNamespace(HfApi=HfApi, HfFileSystem=HfFileSystem))
    args = lambda out: ['fineweb', f'--out_dir={tmp_path / out}', '--test_docs=3', '--val_docs=2']
    prepare.main(args('local')[:1] + [f'--source={tmp_path}/repo/sample/100BT'] + args('local')[1:])
    monkeypatch.setenv('NANOTOK_PREPARE_STOP_AFTER', '2')
    with pytest.raises(SystemExit):
        prepare.main(args('hub'))
    monkeypatch.delenv('NANOTOK_PREPARE_STOP_AFTER')
    prepare.main(args('hub'))
    assert asked == [('HuggingFaceFW/fineweb', None), ('HuggingFaceFW/fineweb', 'c0ffee')]
    meta = json.loads((tmp_path / 'hub' / 'meta.json').read_text())
    assert meta['source'] == 'HuggingFaceFW/fineweb' and meta['revision'] == 'c0ffee'
    assert all((tmp_path / 'hub' / f).read_bytes() == (tmp_path / 'local' / f).read_bytes() for f in SPLIT_FILES)


def test_a_lost_connection_keeps_what_is_done_and_resumes(tmp_path, monkeypatch, capsys):
    fineweb_like(tmp_path / 'src', 4, 12, 4)  # 12 pieces; the third file opens after the first two are read
    args = lambda out: ['fineweb', f'--source={tmp_path}/src', f'--out_dir={tmp_path / out}', '--test_docs=3',
                        '--val_docs=2', '--interleave=2']
    prepare.main(args('whole'))
    opened, calls = prepare.open_source, []

    def flaky(a, rel):
        calls.append(rel)
        if len(calls) == 3:
            raise ConnectionError('[Errno 101] Network is unreachable')
        return opened(a, rel)

    monkeypatch.setattr(prepare, 'open_source', flaky)
    with pytest.raises(SystemExit) as e:
        prepare.main(args('cut'))
    assert 'no network?' in str(e.value) and 'rerun the same command to resume' in str(e.value)
    assert json.loads((tmp_path / 'cut' / 'manifest.json').read_text())['pieces'] == 6  # kept for the rerun
    capsys.readouterr()
    prepare.main(args('cut'))
    assert 'resuming' in capsys.readouterr().out
    same_output(tmp_path / 'whole', tmp_path / 'cut')


def test_local_datasets_need_only_numpy(tmp_path):
    """pycode, pydocs and files run where tqdm, pyarrow, huggingface_hub and datasets are missing (a lean venv)."""
    for i in range(3):
        (tmp_path / 'in' / f'{i}.txt').parent.mkdir(exist_ok=True)
        (tmp_path / 'in' / f'{i}.txt').write_text(f'file {i}\n')
    code = ("import sys; sys.modules.update(dict.fromkeys(['tqdm', 'pyarrow', 'huggingface_hub', 'datasets'])); "
            f"sys.path.insert(0, {str(ROOT)!r}); import prepare; "
            f"prepare.main(['files', '--path={tmp_path}/in', '--out_dir={tmp_path}/out'])")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and 'train: ' in r.stdout, r.stderr
    assert len(load(tmp_path / 'out', 'val') + load(tmp_path / 'out', 'train')) == 3
