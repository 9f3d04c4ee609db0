"""prepare.py: the document filters, the test/val/train splits and byte budget, the file format, --num_proc, pycode,
files, and the error lines."""
import json
import os
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
                          cwd=ROOT, timeout=120, env={**os.environ, 'HF_HUB_OFFLINE': '1', **env})


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


def test_num_proc_reads_disjoint_shares_of_the_files_into_the_same_documents(tmp_path):
    docs = [f'doc {i}: '.encode() + bytes(np.random.default_rng(i).integers(97, 123, size=4200 + i, dtype=np.uint8))
            for i in range(60)]
    write_parquet_folder(tmp_path / 'src', 4, [d.decode() for d in docs], 'text')
    args = lambda out, n: ['fineweb', f'--source={tmp_path}/src', f'--out_dir={tmp_path / out}', f'--num_proc={n}',
                           '--test_docs=7', '--val_docs=5', '--max_doc_bytes=0']
    for out, n in (('one', 1), ('two', 2), ('two_again', 2)):
        prepare.main(args(out, n))
    splits = {out: [load(tmp_path / out, s) for s in ('test', 'val', 'train')] for out in ('one', 'two', 'two_again')}
    for out, (test, val, train) in splits.items():
        assert len(test) == 7 and len(val) == 5 and len(train) == 48
        assert Counter(test + val + train) == Counter(docs)  # every document once, whatever the process count
    assert splits['two'] == splits['two_again']  # the shares are taken in turn: deterministic
    r = run(*args('three', 5)[:-1])
    assert r.returncode != 0 and '4 .json/' in r.stderr and 'fewer than --num_proc=5' in r.stderr, r.stderr


def test_pycode(tmp_path):
    for out in ['a', 'b']:
        prepare.main(['pycode', f'--out_dir={tmp_path}/{out}'])
    val, train = load(tmp_path / 'a', 'val'), load(tmp_path / 'a', 'train')
    assert len(train) > 500 and len(val) > 10 and sum(map(len, train)) > 5e6  # the stdlib is thousands of files
    stdlib = Path(sysconfig.get_paths()['stdlib'])
    assert (stdlib / 'os.py').read_bytes() in val + train  # whole files, unmodified
    for f in ['val.bin', 'train.bin', 'val_offsets.npy', 'train_offsets.npy']:  # deterministic
        assert (tmp_path / 'a' / f).read_bytes() == (tmp_path / 'b' / f).read_bytes()


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
    prepare.main(['files', f'--path={tmp_path}/in', '--glob=**/*.txt', f'--out_dir={tmp_path}/txt'])
    assert sorted(load(tmp_path / 'txt', 'val') + load(tmp_path / 'txt', 'train')) == [b'dddd', src['a.txt']]


@pytest.mark.parametrize('args, words', [
    (['nope'], ['nope', 'fineweb', 'codeparrot', 'pycode', 'files']),
    (['files', '--path=/no/such/dir'], ['--path', '/no/such/dir']),
    (['files', '--path={empty}'], ['no non-empty files', '{empty}']),
    (['fineweb'], ['Hugging Face hub', 'HuggingFaceFW/fineweb', '--source']),
    (['codeparrot', '--source=/no/such/file.jsonl'], ['/no/such/file.jsonl', 'does not exist']),
    (['fineweb', '--source={bad}'], ['could not read', '{bad}']),
])
def test_errors(tmp_path, args, words):
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'bad.jsonl').write_text('{"text": "unterminated\n')
    fill = lambda s: s.format(empty=tmp_path / 'empty', bad=tmp_path / 'bad.jsonl')
    r = run(*map(fill, args), f'--out_dir={tmp_path}/out')
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr
    assert all(fill(w) in lines[0] for w in words), lines[0]
    assert not (tmp_path / 'out').exists()  # no files, not even an empty folder that looks like a dataset


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
