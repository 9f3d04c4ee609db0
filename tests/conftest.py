"""
Shared by every test file: ROOT is the repository root, and it goes on sys.path so that `import model` works
however pytest is started (`pytest`, `python -m pytest`, from the root or from tests/). Also a small tiktoken
encoding, 'tiny', built here (tiktoken cannot download gpt2 offline), for BPE guidance and sample.py --compare.
Only torch and pytest at module level: the suite collects without tiktoken, lm_eval or matplotlib, and a test that
needs one skips, saying which (pytest.importorskip where it is used: tiny_encoding(), the plugin fixture).
"""
import os
import select
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest
import torch


if signal.getsignal(signal.SIGINT) is signal.SIG_IGN: # a background job (`cmd &`) starts with Ctrl-C ignored and
    signal.signal(signal.SIGINT, signal.default_int_handler) # passes that on: a test's Ctrl-C would be lost
SIGINT = signal.getsignal(signal.SIGINT) # pytest's: Ctrl-C stops the tests


@pytest.fixture(autouse=True)
def ctrl_c_stays_pytest_s():
    """ a script run in this process (runpy) sets its own Ctrl-C handler: pytest's is put back after each test """
    yield
    signal.signal(signal.SIGINT, SIGINT)


@pytest.fixture(autouse=True, scope='session')
def one_thread():
    """ the test tensors are tiny: one thread is as fast, and many times faster when the cores are shared """
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


PAT = r" ?[a-z]+| ?[^a-z\s]+|\s+"
MERGES = [b'th', b'the', b'at', b' c', b' t', b' th', b' the', b' s', b' sat', b'og', b' l', b' log']  # in rank order
RANKS = {**{bytes([i]): i for i in range(256)}, **{m: 256 + i for i, m in enumerate(MERGES)}}  # each joins two before it
PLUGIN = f"""
from tiktoken.load import load_tiktoken_bpe
RANKS = {RANKS!r}
ENCODING_CONSTRUCTORS = {{
    'tiny': lambda: dict(name='tiny', pat_str={PAT!r}, mergeable_ranks=RANKS, special_tokens={{}}),
    # a real download from a host that never resolves (RFC 6761 .invalid): as gpt2 without network
    'offline': lambda: dict(name='offline', pat_str={PAT!r}, special_tokens={{}},
                            mergeable_ranks=load_tiktoken_bpe('https://nanotok.invalid/offline.tiktoken')),
}}
"""


def needs(module):
    """ the module, or skip the calling test with the reason (an optional package: requirements.txt has it) """
    return pytest.importorskip(module, reason=f"needs {module} (pip install -r requirements.txt)")


def tiny_encoding():
    tiktoken = needs('tiktoken')
    return tiktoken.Encoding(name='tiny', pat_str=PAT, mergeable_ranks=RANKS, special_tokens={})


@pytest.fixture(scope='module')
def plugin(tmp_path_factory):
    """ a folder for PYTHONPATH whose tiktoken_ext/ (a namespace package) registers 'tiny' and 'offline' """
    needs('tiktoken')  # the scripts that read the plugin import it
    root = tmp_path_factory.mktemp('plugin')
    (root / 'tiktoken_ext').mkdir()
    (root / 'tiktoken_ext' / 'nanotok_test.py').write_text(PLUGIN)
    (root / 'cache').mkdir()  # an empty TIKTOKEN_CACHE_DIR: nothing cached
    return root


@pytest.fixture(scope='module')
def lean(tmp_path_factory):
    """ a folder for PYTHONPATH in which the optional packages fail to import, as on a machine without them """
    root = tmp_path_factory.mktemp('lean')
    for name in ('tiktoken', 'lm_eval', 'datasets', 'tqdm', 'matplotlib', 'wandb'):
        (root / name).mkdir()
        (root / name / '__init__.py').write_text(f"raise ImportError('{name} is not installed (a test stub)')\n")
    return root


def run_blocked_on_fifo(cmd, fifo, text, **kw):
    """ run cmd (Popen kwargs kw), which blocks reading the FIFO `fifo` at some point: wait for its first stdout line,
        note whether cmd was still running then, then write `text` into the FIFO (once cmd opens it, unless cmd ends
        first) -> (first line, still running, the rest of stdout, stderr, returncode). A line-buffered stdout gives the
        first line while cmd waits on the FIFO; a block-buffered one only at exit, after the 1800 s hang guard """
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, **kw) # unbuffered: readline
    ready, running = select.select([p.stdout], [], [], 1800)[0], p.poll() is None # a hang guard, not a speed check
    first = p.stdout.readline().decode() if ready else '' # byte by byte: the rest stays for communicate()
    while p.poll() is None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK) # fails until cmd opens the FIFO for reading
        except OSError:
            time.sleep(0.05)
            continue
        os.write(fd, text.encode())
        os.close(fd)
        break
    out, err = p.communicate(timeout=1800)
    return first, running, out.decode(), err.decode(), p.returncode


def ctrl_c_on_fifo(cmd, fifo, **kw):
    """ run cmd (Popen kwargs kw), which opens the FIFO `fifo` to read it at some point: once it has (a writer can open
        it then), a Ctrl-C (SIGINT) while it waits for the first byte -> (stdout, stderr, returncode); if cmd ends
        first, its output as it is """
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    t0, fd = time.monotonic(), None
    while fd is None and p.poll() is None and time.monotonic() - t0 < 1800: # a hang guard, not a speed check
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK) # fails until cmd opens the FIFO for reading
        except OSError:
            time.sleep(0.05)
    if fd is not None:
        p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=1800)
    finally:
        if fd is not None:
            os.close(fd)
    return out, err, p.returncode
