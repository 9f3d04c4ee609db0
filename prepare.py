"""
Prepare a byte-level dataset: documents as their raw bytes, concatenated, plus the document boundaries.

    python prepare.py pycode                        # this Python's standard-library sources, no network
    python prepare.py pydocs                        # their docstrings: English prose, no network
    python prepare.py files --path=DIR [--glob='**/*.txt']
    python prepare.py fineweb [--max_bytes=4e9] [--test_docs=32768] [--val_docs=256] [--max_doc_bytes=4095]
    python prepare.py fineweb --revision=SHA        # pin the Hub commit (default: the one resolved now, recorded)
    python prepare.py codeparrot --source=PATH      # a local json/jsonl(.gz)/parquet copy (file or folder)

Writes data/NAME/{train,val}.bin (uint8, the documents concatenated) and data/NAME/{train,val}_offsets.npy
(int64, n_docs+1 boundaries: offsets[0] = 0, strictly increasing, document i is bin[offsets[i]:offsets[i+1]]);
fineweb and codeparrot also test.bin and test_offsets.npy, the held-out documents for eval.py. Every dataset gets
data/NAME/meta.json: {"name", "source", "revision", "args", "splits": {split: {"docs", "bytes"}}}.

fineweb / codeparrot, the split rule (the paper instead split its whole filtered sample, 29.3M FineWeb documents,
with datasets' train_test_split(test_size=32768, seed=42); ours never needs the whole sample):
  1. the data files (the Hub repo's sample/100BT/*.parquet for fineweb, its *.json.gz for codeparrot, at the
     pinned revision; or the --source files), sorted by path, are permuted by random.Random(--seed).shuffle;
  2. they are read --interleave (16) at a time, round-robin one piece each: a piece is one parquet row group, or a
     whole json/jsonl(.gz) file (a gzip stream cannot be entered in the middle); a round takes the next piece of
     every open file in order, then finished files close and the next files of the permutation open;
  3. the documents of at least 4097 (fineweb: the paper's len > 4096) or 4096 (codeparrot) UTF-8 bytes are kept
     in that order, cut to --max_doc_bytes (4095: one row of block 4096);
  4. the first --test_docs kept documents are test, the next --val_docs val, the rest train, until the kept bytes
     would pass --max_bytes (all three splits count). Each split keeps that order (train.py shuffles its rows).
Only the text column is read (parquet: that column's byte ranges only, also through the Hub's HfFileSystem).

Resuming: fineweb/codeparrot append to DIR/{split}.bin.partial and write DIR/manifest.json (atomically) after every
finished piece. Interrupted (Ctrl-C, SIGTERM, a lost connection, a full disk), the same command resumes after the
last finished piece, and the result is byte-identical to an uninterrupted run; other arguments are refused
(--restart starts over). Reading is sequential in one process (the order above is the data; there is no --num_proc).
"""
import argparse
import ast
import errno
import gzip
import hashlib
import http
import json
import os
import random
import signal
import socket
import sys
import sysconfig
import tempfile
import time
import types
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path

try:
    import numpy as np
except KeyboardInterrupt:  # Ctrl-C while numpy loads, the first few tenths of a second: one line, as anywhere else
    sys.exit('prepare.py: interrupted; nothing was written')

HUB = {  # name -> (hub repo, its data files, text field, minimum UTF-8 bytes kept)
    'fineweb': ('HuggingFaceFW/fineweb', 'sample/100BT/*.parquet', 'text', 4097),  # config sample-100BT; len > 4096
    'codeparrot': ('transformersbook/codeparrot', '*.json.gz', 'content', 4096),  # the paper's filter: len >= 4096
}
NAMES = [*HUB, 'pycode', 'pydocs', 'files']
SOURCE_EXTS = ('.json', '.jsonl', '.json.gz', '.jsonl.gz', '.parquet')
# not the standard library, or deliberately broken test inputs
PYCODE_SKIP = {'site-packages', 'dist-packages', '__pycache__', 'tokenizedata', 'encoded_modules'}
PROGRESS_EVERY = 5.0  # seconds between redraws of the progress bar: a piped log shows progress without flooding
# what makes a fineweb/codeparrot output: a rerun resumes only when all of these are the same
KEY = ('name', 'source', 'revision', 'files', 'max_bytes', 'test_docs', 'val_docs', 'seed', 'max_doc_bytes',
       'interleave')
# the arguments that make a finished dataset, by kind: rerun with others, prepare.py refuses to replace it
MADE_BY = {'hub': ('name', 'source', 'revision', *KEY[4:]),
           'local': ('name', 'path', 'glob', 'val_every', 'max_doc_bytes')}
LEAST = {'test_docs': 0, 'val_docs': 1, 'val_every': 1, 'interleave': 1, 'max_bytes': 1, 'max_doc_bytes': 0}  # >= these


def whole(s):
    """--max_bytes: a whole number, 4e9 too."""
    v = float(s)
    if not v.is_integer():  # also inf and nan
        raise ValueError(s)
    return int(v)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = lambda message: sys.exit(f'prepare.py: {message}')  # bad input is one line, no usage dump
    p.add_argument('name', help=' | '.join(NAMES))
    p.add_argument('--out_dir', default=None, help='default: data/NAME next to this file')
    p.add_argument('--path', default=None, help='files: the folder to read')
    p.add_argument('--glob', default='**/*', help='files: which files under --path (hidden ones skipped)')
    p.add_argument('--val_every', type=int, default=20, help='pycode/files: 1 in N files to val, by path hash')
    p.add_argument('--source', default=None, help='fineweb/codeparrot: local json/jsonl/parquet file or folder')
    p.add_argument('--revision', default=None, help='fineweb/codeparrot: Hub branch, tag or commit (default: main)')
    # 4e9 covers the paper's 73M/90M budget of 3.4e9 training bytes; 346M needs 1.6e10
    p.add_argument('--max_bytes', type=whole, default=int(4e9), help='fineweb/codeparrot budget')
    p.add_argument('--test_docs', type=int, default=32768, help='fineweb/codeparrot: documents in test (paper: 32768)')
    p.add_argument('--val_docs', type=int, default=256, help='fineweb/codeparrot: documents in val (paper: 256)')
    p.add_argument('--seed', type=int, default=42, help='fineweb/codeparrot: the file order (paper: 42)')
    p.add_argument('--interleave', type=int, default=16, help='fineweb/codeparrot: files read round-robin at a time')
    # the paper trains on one 4095-byte window of each document (block 4096), so fineweb/codeparrot keep 4095;
    # 0 keeps whole documents (default for pycode/files), whose later windows become more rows of train.py
    p.add_argument('--max_doc_bytes', type=int, default=None, help='truncate documents; 0 = whole')
    p.add_argument('--restart', action='store_true', help='start over: drop an unfinished run, replace a dataset')
    a = p.parse_args(argv)
    if a.name not in NAMES:
        sys.exit(f"prepare.py: unknown dataset '{a.name}'; choose one of: {', '.join(NAMES)}")
    for k, least in LEAST.items():
        if getattr(a, k) is not None and getattr(a, k) < least:  # -5 bytes of a document would cut 5 off each one
            sys.exit(f'prepare.py: --{k}={getattr(a, k)} must be >= {least}')
    if a.max_doc_bytes is None:
        a.max_doc_bytes = 4095 if a.name in HUB else 0
    if a.out_dir == '':
        sys.exit('prepare.py: --out_dir is empty; name a folder, or leave it out for data/NAME')
    a.out_dir = a.out_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', a.name)
    a.out_dir, a.path, a.source = (os.path.expanduser(p) if p else p for p in (a.out_dir, a.path, a.source))
    check_folder(a.out_dir, 'out_dir', 'prepare.py')
    a.args = dict(vars(a))  # as given, for meta.json
    return a


def progress(name, total, done=0):
    """A tqdm bar of the bytes written, on stdout, redrawn at most every PROGRESS_EVERY seconds (through a pipe, each
    redraw after a carriage return); where tqdm is not installed (a lean venv: pycode and files need only numpy), a
    stand-in that shows nothing."""
    try:
        from tqdm import tqdm
    except ImportError:
        return types.SimpleNamespace(total=total, update=lambda n: None, set_postfix_str=lambda s, refresh=True: None,
                                     close=lambda: None)
    return tqdm(desc=name, total=total, initial=done, unit='B', unit_scale=True, mininterval=PROGRESS_EVERY,
                file=sys.stdout)


def write_json(path, obj):
    """Atomic: a reader (or a rerun after a kill) sees the old file or the new one, never half of one."""
    with open(path + '.tmp', 'w') as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + '.tmp', path)


def check_folder(path, key, script):
    """An output folder: one line now, before any work, when it is a file or cannot be made or written in. Shared
    by train.py and eval.py through common.py (here, as prepare.py runs without torch)."""
    there = path
    while not os.path.exists(there):  # the nearest part of the path that is there
        there = os.path.dirname(there) or '.'
    if not os.path.isdir(there):
        sys.exit(f'{script}: --{key}={path}: {there} is a file, not a folder')
    try:
        os.rmdir(tempfile.mkdtemp(dir=there))  # as its files will be: the one test that /proc or a full disk fails
    except OSError as e:
        sys.exit(f'{script}: --{key}={path}: cannot write in {there} ({e.strerror})')


def write_meta(a, source, revision, splits, inputs=None):
    """data/NAME/meta.json: where the data came from and how it was made (eval.py shows it); pycode, pydocs and files
    also the fingerprint of their input files."""
    write_json(os.path.join(a.out_dir, 'meta.json'), {'name': a.name, 'source': source, 'revision': revision,
                                                      'args': a.args, 'splits': splits,
                                                      **({'inputs': inputs} if inputs else {})})


@contextmanager
def uninterrupted():
    """Ctrl-C and SIGTERM ignored while the block runs: the renames that make a dataset appear at once, or the removal
    of a stopped one's files. The folder holds the whole dataset or none of it, never half."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


# ---------------------------------------------------------------------------------------------------------------
# fineweb / codeparrot: the Hub (or a local copy), resumable

def why(e):
    """One line for an error on the fineweb/codeparrot path, its cause named: a full disk, an HTTP status, no
    network; anything else as what it is (type and message)."""
    seen, x = [], e
    while x is not None and x not in seen:  # the exception and what it was raised from
        seen.append(x)
        x = x.__cause__ or x.__context__
    for x in seen:
        if isinstance(x, OSError) and x.errno == errno.ENOSPC:
            return 'no space left on device (disk full): free some space and rerun the same command to resume'
    for x in seen:
        code = getattr(getattr(x, 'response', None), 'status_code', None)
        if isinstance(code, int) and code >= 400:
            phrase = http.HTTPStatus(code).phrase if code in http.HTTPStatus._value2member_map_ else ''
            hint = {429: 'rate limited, rerun later to resume',
                    401: 'not authorized: log in (hf auth login, or set HF_TOKEN) and rerun to resume',
                    403: 'forbidden: accept the dataset terms on its page, log in, and rerun to resume',
                    404: 'not found: check --revision'}.get(code, 'rerun later to resume')
            return f'HTTP {code} {phrase} from the Hugging Face hub: {hint}'
    for x in seen:
        if isinstance(x, (ConnectionError, TimeoutError, socket.gaierror)) or \
                any(w in type(x).__name__ for w in ('Connect', 'Timeout', 'Offline', 'Network')):
            return (f'could not reach the Hugging Face hub ({type(x).__name__}: {x}); no network? rerun the same '
                    f'command to resume when it is back, or point it at a local copy with --source=PATH')
    return f'{type(e).__name__}: {e}'


def list_source(a):
    """(source, resolved revision or None, data files relative to a.root, sorted); sets a.root (and a.fs)."""
    if a.source:
        src = Path(a.source).resolve()
        if src.is_file():
            a.root, files = str(src.parent), [src.name]
        else:
            a.root = str(src)
            files = sorted(f.relative_to(src).as_posix() for f in src.rglob('*') if f.name.endswith(SOURCE_EXTS))
        a.sizes = {rel: os.path.getsize(os.path.join(a.root, rel)) for rel in files}  # for the progress lines
        return str(src), None, files
    from huggingface_hub import HfApi, HfFileSystem  # only here: pycode and files need no hub
    repo, pattern = HUB[a.name][:2]
    revision = HfApi().dataset_info(repo, revision=a.revision).sha  # a branch or tag pinned to its commit
    a.fs, a.root = HfFileSystem(), f'datasets/{repo}@{revision}'
    found = a.fs.find(f'{a.root}/{os.path.dirname(pattern)}'.rstrip('/'), detail=True)  # path -> info, with its size
    found = {p.split('/', 3)[3]: info['size'] for p, info in found.items()}  # relative to a.root
    a.sizes = {rel: size for rel, size in found.items() if fnmatch(rel, pattern)}  # not the card or its metadata
    return repo, revision, sorted(a.sizes)


def open_source(a, rel):
    """One data file as a binary file object; on the Hub HfFileSystem reads byte ranges, so parquet fetches only the
    column chunks asked for (json is read whole: one streamed request)."""
    if not a.fs:
        return open(os.path.join(a.root, rel), 'rb')
    return a.fs.open(f'{a.root}/{rel}', 'rb', **({} if rel.endswith('.parquet') else {'block_size': 0}))


def parquet(a, rel):
    """The open parquet file rel, kept open while its pieces are read."""
    if rel not in a.open:
        import pyarrow.parquet as pq
        f = open_source(a, rel)
        a.open[rel] = (f, pq.ParquetFile(f))
    return a.open[rel][1]


def count_pieces(a, rel):
    """The pieces of one data file: its row groups, or 1 for json (read whole)."""
    a.current = rel  # named by an error
    return parquet(a, rel).num_row_groups if rel.endswith('.parquet') else 1


def piece_order(a, counts):
    """(file, piece index) in the order of the docstring's rule; counts(file) gives a file's number of pieces."""
    order = list(a.files)
    random.Random(a.seed).shuffle(order)
    todo, live = iter(order), []  # live: [file, next piece, pieces] of the open files
    while True:
        while len(live) < a.interleave and (rel := next(todo, None)) is not None:
            if n := counts(rel):  # a parquet file without row groups has no pieces
                live.append([rel, 0, n])
        if not live:
            return
        for s in live:
            yield s[0], s[1]
            s[1] += 1
        live = [s for s in live if s[1] < s[2]]


def read_piece(a, rel, i):
    """The kept documents of piece i of file rel, in file order, cut to --max_doc_bytes, as bytes."""
    field, min_bytes = HUB[a.name][2:]
    cut, a.current = a.max_doc_bytes or None, rel
    if rel.endswith('.parquet'):
        import pyarrow.compute as pc
        pf = parquet(a, rel)
        if field not in pf.schema_arrow.names:
            raise ValueError(f"{rel} has no column '{field}' (it has {', '.join(pf.schema_arrow.names)})")
        col = pf.read_row_group(i, columns=[field]).column(0)  # only the text column is read
        col = col.filter(pc.greater_equal(pc.binary_length(col), min_bytes))  # UTF-8 bytes, not characters
        for text in col.to_pylist():
            yield text.encode()[:cut]
        if i == pf.num_row_groups - 1:  # the file's last piece: close it
            a.open.pop(rel)[0].close()
        return
    with open_source(a, rel) as f, (gzip.open(f) if rel.endswith('.gz') else f) as lines:
        for n, line in enumerate(lines, 1):
            try:
                text = json.loads(line)[field] if line.strip() else None
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f'{rel} line {n}: {type(e).__name__}: {e}') from e
            doc = text.encode('utf-8', 'surrogatepass') if isinstance(text, str) else b''
            if len(doc) >= min_bytes:
                yield doc[:cut]


def interrupt(*_):
    raise KeyboardInterrupt


def hub(a):
    """fineweb / codeparrot: the documents of the docstring's rule into DIR/{split}.bin.partial, a manifest after
    every piece, resumed by a rerun; at the end the files are renamed into place and meta.json written."""
    out = a.out_dir
    man_path = os.path.join(out, 'manifest.json')
    m = None
    if os.path.exists(man_path) and not a.restart:
        with open(man_path) as f:
            m = json.load(f)
        if a.revision is None and not a.source:
            a.revision = m['revision']  # a resume reads the commit the run started on
    where = a.source or HUB[a.name][0]
    a.fs, a.open, a.current = None, {}, a.source
    try:
        source, revision, a.files = list_source(a)
    except Exception as e:
        sys.exit(f'prepare.py: {a.name}: could not list {where} ({why(e)})'.replace('\n', ' '))
    if not a.files:
        sys.exit(f'prepare.py: {a.name}: no {"/".join(SOURCE_EXTS)} files in {where}')
    key = {'name': a.name, 'source': source, 'revision': revision, 'files': a.files}
    key.update({k: getattr(a, k) for k in KEY[4:]})
    if m and m['key'] != key:
        k = next(k for k in KEY if m['key'].get(k) != key[k])
        old = 'other files' if k == 'files' else f'--{k}={m["key"].get(k)}'
        now = 'the files there now' if k == 'files' else f'--{k}={key[k]}'
        sys.exit(f'prepare.py: {out} holds an unfinished {a.name} run made with {old} (now {now}); rerun with its '
                 f'arguments to resume it, or add --restart to start over')
    splits = ['test', 'val', 'train'] if a.test_docs else ['val', 'train']
    part = {s: (os.path.join(out, f'{s}.bin.partial'), os.path.join(out, f'{s}_ends.partial')) for s in splits}
    if m and any(not os.path.exists(p) or os.path.getsize(p) < n for s in splits for p, n in
                 zip(part[s], (m['splits'][s]['bytes'], 8 * m['splits'][s]['docs']))):
        print(f'{a.name}: the partial files in {out} are shorter than its manifest says: starting over', flush=True)
        m = None
    made = not os.path.isdir(out)
    os.makedirs(out, exist_ok=True)
    m = m or {'key': key, 'revision': revision, 'pieces': 0, 'positions': {}, 'finished': False,
              'splits': {s: {'docs': 0, 'bytes': 0} for s in splits}}
    sizes = m['splits']
    if m['pieces']:
        print(f'{a.name}: resuming {out} after {m["pieces"]:,} pieces: '
              + ', '.join(f'{s} {sizes[s]["docs"]:,} docs' for s in splits), flush=True)
    else:
        print(f'{a.name}: reading {len(a.files):,} files of {where}' + (f' at {revision}' if revision else ''),
              flush=True)
    files = {}
    for s in splits:  # truncated to the last finished piece: what an interrupted piece wrote goes
        for p, n in zip(part[s], (sizes[s]['bytes'], 8 * sizes[s]['docs'])):
            if m['pieces'] or m['finished']:
                os.truncate(p, n)
            files[p] = open(p, 'ab' if m['pieces'] or m['finished'] else 'wb')

    def discard():  # nothing to resume: leave nothing behind
        for f in files.values():
            f.close()
        for p in [p for s in splits for p in part[s]] + [man_path]:
            Path(p).unlink(missing_ok=True)
        if made and not os.listdir(out):
            os.rmdir(out)

    def commit():
        for f in files.values():
            f.flush()
            os.fsync(f.fileno())
        write_json(man_path, m)

    old_term = signal.signal(signal.SIGTERM, interrupt)  # preemption ends like Ctrl-C: resumable
    stop = int(os.environ.get('NANOTOK_PREPARE_STOP_AFTER', -1))  # tests: an interrupt inside the piece after N
    pause = int(os.environ.get('NANOTOK_PREPARE_PAUSE_AFTER', -1))  # tests: wait for a real signal after N pieces
    ndocs, kept, run_pieces = sum(v['docs'] for v in sizes.values()), sum(v['bytes'] for v in sizes.values()), 0
    pos = m['positions']
    src_done = sum(a.sizes[rel] * done / n for rel, (done, n) in pos.items())  # source bytes read, about
    src_total, src_start, kept_start = sum(a.sizes.values()), src_done, kept
    prog = progress(a.name, a.max_bytes, kept)
    counts = lambda rel: pos[rel][1] if rel in pos else pos.setdefault(rel, [0, count_pieces(a, rel)])[1]
    try:
        pieces = piece_order(a, counts)
        for _ in range(m['pieces']):  # the order is fixed: skip what the last run finished
            next(pieces)
        for rel, i in ([] if m['finished'] else pieces):
            for doc in read_piece(a, rel, i):
                if kept + len(doc) > a.max_bytes:
                    m['finished'] = True  # the budget is spent: the kept bytes never exceed it
                    break
                s = 'test' if ndocs < a.test_docs else 'val' if ndocs < a.test_docs + a.val_docs else 'train'
                ndocs, kept = ndocs + 1, kept + len(doc)
                sizes[s]['docs'] += 1
                sizes[s]['bytes'] += len(doc)
                files[part[s][0]].write(doc)
                files[part[s][1]].write(np.int64(sizes[s]['bytes']).tobytes())  # the document's end offset
                prog.update(len(doc))
                if run_pieces == stop:
                    raise KeyboardInterrupt
            if m['finished']:
                break
            pos[rel][0] += 1
            src_done += a.sizes[rel] / pos[rel][1]
            if src_done > src_start:  # tqdm times one total: what the rest of the source gives, if below the budget
                prog.total = int(min(a.max_bytes, kept + (kept - kept_start) * (src_total - src_done) /
                                     (src_done - src_start)))
            prog.set_postfix_str(f'source {src_done / src_total:.0%} read, docs: '
                                 + ' '.join(f'{k} {v["docs"]:,}' for k, v in sizes.items()), refresh=False)
            m['pieces'] += 1
            run_pieces += 1
            commit()
            if run_pieces == pause:
                time.sleep(1800)  # a hang guard: the test sends its signal long before
        m['finished'] = True
        prog.close()
        empty = [s for s in splits if not sizes[s]['docs']]
        if empty:  # never an empty split: nothing is written
            discard()
            sys.exit(f'prepare.py: {a.name}: {where}: {ndocs:,} documents kept (>= {HUB[a.name][3]} bytes, within '
                     f'--max_bytes={a.max_bytes}), none left for {empty[0]}: lower --test_docs/--val_docs, raise '
                     f'--max_bytes or add files')
        commit()
    except KeyboardInterrupt:
        prog.close()
        for f in files.values():
            f.close()
        if not m['pieces']:
            discard()
        sys.stderr.write(f'prepare.py: {a.name}: interrupted after {m["pieces"]:,} pieces ({kept / 1e6:,.1f} MB '
                         f'kept); rerun the same command to resume\n')
        sys.exit(130)
    except Exception as e:  # a lost connection, a full disk, a bad file: one line naming it
        prog.close()
        for f in files.values():
            f.close()
        if not m['pieces']:
            discard()
        msg = why(e)
        if a.source and 'disk full' not in msg:
            msg = f'could not read {os.path.join(a.root, a.current)} ({msg})'
        sys.exit(f'prepare.py: {a.name}: {msg}'.replace('\n', ' ')[:400])
    finally:
        signal.signal(signal.SIGTERM, old_term)
        for f, _ in a.open.values():
            f.close()
    for f in files.values():
        f.close()
    for s in splits:  # the ends become offsets, then all files appear complete at once
        ends = np.fromfile(part[s][1], dtype=np.int64)
        with open(os.path.join(out, f'{s}_offsets.npy.tmp'), 'wb') as f:  # a file object: np.save adds no .npy
            np.save(f, np.concatenate([[0], ends]).astype(np.int64))
        print(f'{s}: {sizes[s]["docs"]:,} docs, {sizes[s]["bytes"]:,} bytes', flush=True)
    with uninterrupted():  # the files appear all at once: a Ctrl-C now would leave a rerun nothing to resume
        for s in splits:
            os.replace(part[s][0], os.path.join(out, f'{s}.bin'))
            os.replace(os.path.join(out, f'{s}_offsets.npy.tmp'), os.path.join(out, f'{s}_offsets.npy'))
        write_meta(a, source, revision, sizes)
        for p in [part[s][1] for s in splits] + [man_path]:
            os.remove(p)


# ---------------------------------------------------------------------------------------------------------------
# pycode / pydocs / files: local files, one document each

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
    if not any(is_val):
        is_val[-1] = True  # a small folder still gets one val document
    if all(is_val):
        is_val[0] = False  # and one train document (--val_every=1)
    # bytes, not text: invalid UTF-8 is data too
    read = lambda p: (docstrings(p.read_bytes()) if a.name == 'pydocs' else p.read_bytes())[:a.max_doc_bytes or None]
    paths = [[p for (_, p), v in zip(files, is_val) if v == want] for want in (True, False)]
    return ((d for d in pool.map(read, ps) if d) for ps in paths)  # a file without docstrings gives no document


def write(out_dir, split, docs, prog):
    """Writes split.bin and split_offsets.npy under .tmp names; returns [(tmp, final), ...] for os.replace."""
    bin_path, off_path = os.path.join(out_dir, f'{split}.bin'), os.path.join(out_dir, f'{split}_offsets.npy')
    offsets = [0]
    with open(bin_path + '.tmp', 'wb') as f:
        for doc in docs:  # never empty (list_files skips empty files), so offsets strictly increase
            f.write(doc)
            offsets.append(offsets[-1] + len(doc))
            prog.update(len(doc))
    with open(off_path + '.tmp', 'wb') as f:  # a file object, so np.save adds no second .npy
        np.save(f, np.array(offsets, dtype=np.int64))
    return [(bin_path + '.tmp', bin_path), (off_path + '.tmp', off_path)]


def local_source(a):
    """pycode / pydocs / files: the folder their documents are read from, its files' pattern, the names skipped."""
    if a.name in ('pycode', 'pydocs'):
        return sysconfig.get_paths()['stdlib'], '**/*.py', PYCODE_SKIP
    return a.path, a.glob, set()


def fingerprint(files):
    """(relative path, path) of the input files -> their count and a hash of their names, sizes and modification
    times: cheap, no file is read, and the same command tells from it that they changed since (made_before)."""
    h = hashlib.sha256()
    for rel, p in files:
        st = p.stat()
        h.update(f'{rel}\0{st.st_size}\0{st.st_mtime_ns}\n'.encode())
    return {'files': len(files), 'sha256': h.hexdigest()[:16]}


def local(a):
    """pycode / pydocs / files: one document per file, val by path hash, the rest train."""
    if a.name == 'files' and not (a.path and os.path.isdir(a.path)):
        sys.exit(f'prepare.py: files needs --path=DIR, a folder that exists (got {a.path!r})')
    root, pattern, skip = local_source(a)
    files = list_files(root, pattern, skip)
    if not files:
        sys.exit(f'prepare.py: no non-empty files match {pattern!r} under {root}')
    if len(files) < 2:  # one file cannot fill both val and train
        sys.exit(f'prepare.py: {a.name}: {root} has 1 non-empty file matching {pattern!r}; val and train need 2 '
                 f'or more: add files, widen --glob, or point --path at a bigger folder')
    inputs = fingerprint(files)
    prog = progress(a.name, sum(p.stat().st_size for _, p in files) if a.name != 'pydocs' else None)  # or unknown
    made = not os.path.isdir(a.out_dir)
    os.makedirs(a.out_dir, exist_ok=True)
    renames, failed = [], None
    pool = ThreadPoolExecutor(16)  # reading many small files is I/O-bound: threads overlap it
    try:
        for split, docs in zip(('val', 'train'), local_splits(a, files, pool)):
            renames += write(a.out_dir, split, docs, prog)
            if np.load(renames[-1][0]).size == 1:  # no document: files without docstrings (pydocs)
                failed = (f'prepare.py: {a.name}: the {len(files):,} files under {root} give no {split} '
                          f'document; add files or point --path at a bigger folder')
                break
    except OSError as e:  # an unreadable file: one line, not a traceback
        failed = f'prepare.py: {a.name}: could not read a file under {root} ({type(e).__name__}: {e})'
    except KeyboardInterrupt:  # Ctrl-C, or train.py's passed on (common.make_pycode)
        failed = f'prepare.py: {a.name}: interrupted; nothing was written (the same command makes it)'
    with uninterrupted():  # from here the files go, or all appear at once: never half a dataset
        pool.shutdown(cancel_futures=True)  # (after a failure, the reads still queued are dropped)
        prog.close()
        if failed:
            for f in Path(a.out_dir).glob('*.tmp'):
                f.unlink()  # leave no half-written files behind
            if made and not os.listdir(a.out_dir):
                os.rmdir(a.out_dir)  # nor an empty folder that looks like a dataset
            sys.exit(failed.replace('\n', ' ')[:400])
        for tmp, final in renames:  # only now do the files appear complete
            os.replace(tmp, final)
        splits = {s: {'docs': int(n.size - 1), 'bytes': int(n[-1])}
                  for s in ('val', 'train') for n in [np.load(os.path.join(a.out_dir, f'{s}_offsets.npy'))]}
        write_meta(a, os.path.abspath(root), f'python {sys.version.split()[0]}' if a.name != 'files' else None, splits,
                   inputs)
    for s, n in splits.items():  # after the bar is closed, not inside its line
        print(f'{s}: {n["docs"]:,} docs, {n["bytes"]:,} bytes', flush=True)


def made_before(a):
    """Is a.out_dir a finished dataset already? With this command's arguments: True, there is nothing to do (and when
    its input files changed since, one line says so: the dataset stays). With others, or of unknown origin: one line,
    as a model trained on it needs it as it is, unless --restart. A folder without all four files, or an unfinished
    fineweb/codeparrot run (its manifest says how to resume): False."""
    files = [os.path.join(a.out_dir, f'{s}{x}') for s in ('train', 'val') for x in ('.bin', '_offsets.npy')]
    if a.restart or not all(map(os.path.exists, files)):
        return False
    try:
        meta = json.load(open(os.path.join(a.out_dir, 'meta.json')))
        old = meta['args']
        differ = [k for k in MADE_BY['hub' if a.name in HUB else 'local'] if old.get(k) != a.args[k]]
    except (OSError, ValueError, KeyError, TypeError) as e:  # no meta.json, or not prepare.py's
        meta, old, differ = {}, {}, [f'no readable meta.json ({type(e).__name__})']
    if not differ:
        was, now = meta.get('inputs'), None  # (a dataset made before the fingerprint has none: nothing to compare)
        if isinstance(was, dict) and a.name not in HUB:
            root, pattern, skip = local_source(a)
            now = fingerprint(list_files(root, pattern, skip) if root and os.path.isdir(root) else [])
        if now and now != was:
            print(f'prepare.py: {a.out_dir} holds this {a.name} dataset, made by the same arguments from input files '
                  f'that have changed since ({was.get("files")} files then, {now["files"]} now): kept as it is, '
                  f'as a model trained on it needs it; --restart makes it again from the files there now')
        else:
            print(f'prepare.py: {a.out_dir} already holds this {a.name} dataset, made by the same arguments: nothing '
                  f'to do (--restart makes it again)')
        return True
    k = differ[0]
    was = k if k not in a.args else old.get(k) if k == 'name' else f'--{k}={old.get(k)}'
    now = '' if k not in a.args else f' (now {a.args[k] if k == "name" else f"--{k}={a.args[k]}"})'
    sys.exit(f'prepare.py: {a.out_dir} holds a dataset made from {was}{now}; a model trained on it needs it as it '
             f'is: add --restart to replace it, or use another --out_dir')


def main(argv=None):
    a = parse(argv)
    if a.source and not os.path.exists(a.source):
        sys.exit(f'prepare.py: --source={a.source} does not exist')
    if not made_before(a):
        hub(a) if a.name in HUB else local(a)


if __name__ == '__main__':
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C before any file is made (hub() and local() clean up their own, and say so)
        sys.exit('prepare.py: interrupted; nothing was written')
