"""
Prepare a byte-level dataset: documents as their raw bytes, concatenated, plus the document boundaries.

    python prepare.py pycode                        # this Python's standard-library sources, no network
    python prepare.py pydocs                        # their docstrings: English prose, no network
    python prepare.py files --path=DIR [--glob='**/*.txt']
    python prepare.py fineweb [--max_bytes=4e9] [--test_docs=32768] [--val_docs=256] [--max_doc_bytes=4095]
    python prepare.py codeparrot --source=PATH [--num_proc=4]   # a local json/jsonl/parquet copy (file or folder)

Writes data/NAME/{train,val}.bin (uint8, the documents concatenated) and data/NAME/{train,val}_offsets.npy
(int64, n_docs+1 boundaries: offsets[0] = 0, strictly increasing, document i is bin[offsets[i]:offsets[i+1]]);
fineweb and codeparrot also test.bin and test_offsets.npy, the paper's held-out documents for eval.py.
"""
import argparse
import ast
import multiprocessing as mp
import os
import sys
import sysconfig
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

import numpy as np
from tqdm import tqdm

HUB = {  # name -> (hub repo, config, text field, minimum UTF-8 bytes kept)
    'fineweb': ('HuggingFaceFW/fineweb', 'sample-100BT', 'text', 4097),  # the paper's filter: len > 4096
    'codeparrot': ('transformersbook/codeparrot', None, 'content', 4096),  # the paper's filter: len >= 4096
}
NAMES = [*HUB, 'pycode', 'pydocs', 'files']
SOURCE_EXTS = ('.json', '.jsonl', '.json.gz', '.jsonl.gz', '.parquet')
# not the standard library, or deliberately broken test inputs
PYCODE_SKIP = {'site-packages', 'dist-packages', '__pycache__', 'tokenizedata', 'encoded_modules'}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = lambda message: sys.exit(f'prepare.py: {message}')  # bad input is one line, no usage dump
    p.add_argument('name', help=' | '.join(NAMES))
    p.add_argument('--out_dir', default=None, help='default: data/NAME next to this file')
    p.add_argument('--path', default=None, help='files: the folder to read')
    p.add_argument('--glob', default='**/*', help='files: which files under --path (hidden ones skipped)')
    p.add_argument('--val_every', type=int, default=20, help='pycode/files: 1 in N files to val, by path hash')
    p.add_argument('--source', default=None, help='fineweb/codeparrot: local json/jsonl/parquet file or folder')
    # 4e9 covers the paper's 73M/90M budget of 3.4e9 training bytes; 346M needs 1.6e10
    p.add_argument('--max_bytes', type=lambda s: int(float(s)), default=int(4e9), help='fineweb/codeparrot budget')
    p.add_argument('--test_docs', type=int, default=32768, help='fineweb/codeparrot: documents in test (paper: 32768)')
    p.add_argument('--val_docs', type=int, default=256, help='fineweb/codeparrot: documents in val (paper: 256)')
    p.add_argument('--seed', type=int, default=42, help='fineweb/codeparrot: shuffle seed (paper: 42)')
    p.add_argument('--num_proc', type=int, default=1, help='fineweb/codeparrot: processes, each a share of the files')
    # the paper trains on one 4095-byte window of each document (block 4096), so fineweb/codeparrot keep 4095;
    # 0 keeps whole documents (default for pycode/files), whose later windows become more rows of train.py
    p.add_argument('--max_doc_bytes', type=int, default=None, help='truncate documents; 0 = whole')
    a = p.parse_args(argv)
    if a.name not in NAMES:
        sys.exit(f"prepare.py: unknown dataset '{a.name}'; choose one of: {', '.join(NAMES)}")
    if min(a.test_docs, a.val_docs, a.num_proc - 1) < 0:
        sys.exit(f'prepare.py: --test_docs={a.test_docs} and --val_docs={a.val_docs} need >= 0, --num_proc >= 1')
    if a.max_doc_bytes is None:
        a.max_doc_bytes = 4095 if a.name in HUB else 0
    a.out_dir = a.out_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', a.name)
    return a


def write(out_dir, split, docs, bar):
    """Writes split.bin and split_offsets.npy under .tmp names; returns [(tmp, final), ...] for os.replace."""
    bin_path, off_path = os.path.join(out_dir, f'{split}.bin'), os.path.join(out_dir, f'{split}_offsets.npy')
    offsets = [0]
    with open(bin_path + '.tmp', 'wb') as f:
        for doc in docs:  # never empty (list_files skips empty files), so offsets strictly increase
            f.write(doc)
            offsets.append(offsets[-1] + len(doc))
            bar.set_postfix_str(f'{split}: {len(offsets) - 1:,} docs', refresh=False)
            bar.update(len(doc))
    with open(off_path + '.tmp', 'wb') as f:  # a file object, so np.save adds no second .npy
        np.save(f, np.array(offsets, dtype=np.int64))
    bar.write(f'{split}: {len(offsets) - 1:,} docs, {offsets[-1]:,} bytes')
    return [(bin_path + '.tmp', bin_path), (off_path + '.tmp', off_path)]


def hub_stream(a, share=0):
    """The kept documents of share `share` of --num_proc (a disjoint part of the source files) as bytes, shuffled."""
    import datasets  # only here: pycode and files need no datasets
    from huggingface_hub.utils import logging as hub_logging
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its errors reach the user as our one line
    hub_logging.set_verbosity_error()  # and so do the hub's retries, once they give up
    repo, config, field, min_bytes = HUB[a.name]
    if a.source:
        fmt = 'parquet' if all(f.endswith('.parquet') for f in a.files) else 'json'
        ds = datasets.load_dataset(fmt, data_files=a.files, split='train', streaming=True)
    else:
        if share == 0:
            tqdm.write(f'{a.name}: streaming {repo} {config or ""} from the Hugging Face hub')
        ds = datasets.load_dataset(repo, config, split='train', streaming=True)
    ds = ds.shard(a.num_proc, share) if a.num_proc > 1 else ds  # contiguous, disjoint runs of the files
    # a stream can only be shuffled through a buffer; its first test_docs, then val_docs, are the held-out splits
    ds = ds.select_columns([field]).filter(lambda ex: len(ex[field].encode('utf-8')) >= min_bytes)
    for ex in ds.shuffle(seed=a.seed, buffer_size=10_000):
        doc = ex[field].encode('utf-8')
        yield doc[:a.max_doc_bytes] if a.max_doc_bytes else doc


def worker(a, share, q):
    """One of --num_proc processes: its share's documents into q, 256 at a time, then None (a str: its error)."""
    try:
        docs = hub_stream(a, share)
        while chunk := list(islice(docs, 256)):
            q.put(chunk)
    except Exception as e:
        q.put(f'{type(e).__name__}: {e}')
    q.put(None)


def shares(a):
    """The documents of the --num_proc shares, 256 from each in turn: a fixed order, so the same files give the
    same splits. --num_proc=1 reads the one stream here, in this process."""
    if a.num_proc == 1:
        yield from hub_stream(a)
        return
    qs = [mp.Queue(8) for _ in range(a.num_proc)]
    procs = [mp.Process(target=worker, args=(a, i, q), daemon=True) for i, q in enumerate(qs)]
    try:
        for p in procs:
            p.start()
        while qs:
            for q in list(qs):
                if isinstance(chunk := q.get(), str):
                    raise RuntimeError(chunk)  # a worker's error reaches the user as our one line
                if chunk is None:
                    qs.remove(q)  # this share is done
                yield from chunk or ()
    finally:
        for p in procs:
            p.terminate()


def hub_docs(a):
    """The kept documents until --max_bytes is spent: the kept bytes never exceed it."""
    total = 0
    for doc in shares(a):
        if (total := total + len(doc)) > a.max_bytes:
            return
        yield doc


def list_files(root, pattern, skip=()):
    """The non-empty, non-hidden files under root that match pattern, as (relative posix path, path), sorted."""
    found = [(p.relative_to(root), p) for p in Path(root).glob(pattern) if p.is_file() and p.stat().st_size > 0]
    return sorted((r.as_posix(), p) for r, p in found if not any(s in skip or s[0] == '.' for s in r.parts))


def docstrings(src):
    """Python source (bytes) -> the docstrings of its module, classes and functions in source order, joined by blank
    lines, as UTF-8: English prose where word edges are plain (pydocs); b'' if none or the file does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # invalid escapes in old sources are warnings, not our business
            tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return b''
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    docs = [ast.get_docstring(n) for n in [tree] + sorted(defs, key=lambda n: n.lineno)]
    return '\n\n'.join(d for d in docs if d).encode('utf-8', errors='surrogateescape')


def local_splits(a, files, pool):
    """(val, train) byte streams; a file is in val when the hash of its path says so (stable as files change)."""
    is_val = [zlib.crc32(rel.encode()) % a.val_every == 0 for rel, _ in files]
    if len(files) > 1 and not any(is_val):
        is_val[-1] = True  # a small folder still gets one val document
    # bytes, not text: invalid UTF-8 is data too
    read = lambda p: (docstrings(p.read_bytes()) if a.name == 'pydocs' else p.read_bytes())[:a.max_doc_bytes or None]
    paths = [[p for (_, p), v in zip(files, is_val) if v == want] for want in (True, False)]
    return ((d for d in pool.map(read, ps) if d) for ps in paths)  # a file without docstrings gives no document


def main(argv=None):
    a = parse(argv)
    if a.name == 'files' and not (a.path and os.path.isdir(a.path)):
        sys.exit(f'prepare.py: files needs --path=DIR, a folder that exists (got {a.path!r})')
    if a.source and not os.path.exists(a.source):
        sys.exit(f'prepare.py: --source={a.source} does not exist')
    if a.source:
        src = Path(a.source)
        a.files = [a.source] if src.is_file() else sorted(str(f) for f in src.rglob('*') if str(f).endswith(SOURCE_EXTS))
        if not a.files or a.num_proc > len(a.files):
            sys.exit(f'prepare.py: --source={a.source}: {len(a.files)} {"/".join(SOURCE_EXTS)} files there, '
                     f'fewer than --num_proc={a.num_proc}')
    bar = tqdm(total=a.max_bytes if a.name in HUB else None, desc=a.name, unit='B', unit_scale=True,
               unit_divisor=1000, file=sys.stdout)  # bytes, rate and ETA; stderr stays for the one-line errors
    with ThreadPoolExecutor(16) as pool:  # reading many small files is I/O-bound: threads overlap it
        if a.name in HUB:  # the paper's order: test, then val, then train from one shuffled stream
            docs = hub_docs(a)
            splits = {'test': islice(docs, a.test_docs), 'val': islice(docs, a.val_docs), 'train': docs}
            splits = {k: v for k, v in splits.items() if k != 'test' or a.test_docs}
        else:
            root = sysconfig.get_paths()['stdlib'] if a.name in ('pycode', 'pydocs') else a.path
            pattern, skip = ('**/*.py', PYCODE_SKIP) if a.name in ('pycode', 'pydocs') else (a.glob, set())
            files = list_files(root, pattern, skip)
            if not files:
                sys.exit(f'prepare.py: no non-empty files match {pattern!r} under {root}')
            bar.total = sum(p.stat().st_size for _, p in files) if a.name != 'pydocs' else None  # unknown
            splits = dict(zip(('val', 'train'), local_splits(a, files, pool)))
        made = not os.path.isdir(a.out_dir)
        os.makedirs(a.out_dir, exist_ok=True)
        try:
            renames = [r for split, docs in splits.items() for r in write(a.out_dir, split, docs, bar)]
        except Exception as e:  # no network, a bad --source, an unreadable file: one line, not a traceback
            bar.close()
            for f in Path(a.out_dir).glob('*.tmp'):
                f.unlink()  # leave no half-written files behind
            if made and not os.listdir(a.out_dir):
                os.rmdir(a.out_dir)  # nor an empty folder that looks like a dataset
            if a.name not in HUB and not isinstance(e, OSError):
                raise  # a bug, not bad input
            msg = f'{type(e).__name__}: {e}'.replace('\n', ' ')[:300]
            if a.name not in HUB or a.source:
                sys.exit(f'prepare.py: {a.name}: could not read {a.source or a.path or "a file"} ({msg})')
            sys.exit(f'prepare.py: {a.name}: datasets could not reach the Hugging Face hub for {HUB[a.name][0]} '
                     f'({msg}); no network? point it at a local json/jsonl/parquet copy with --source=PATH')
    bar.close()
    for tmp, final in renames:  # only now do the files appear complete
        os.replace(tmp, final)


if __name__ == '__main__':
    main()
