"""
Shared by every test file: ROOT is the repository root, and it goes on sys.path so that `import model` works
however pytest is started (`pytest`, `python -m pytest`, from the root or from tests/). Also a small tiktoken
encoding, 'tiny', built here (tiktoken cannot download gpt2 offline), for BPE guidance and sample.py --compare.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest
import tiktoken
import torch


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


def tiny_encoding():
    return tiktoken.Encoding(name='tiny', pat_str=PAT, mergeable_ranks=RANKS, special_tokens={})


@pytest.fixture(scope='module')
def plugin(tmp_path_factory):
    """ a folder for PYTHONPATH whose tiktoken_ext/ (a namespace package) registers 'tiny' and 'offline' """
    root = tmp_path_factory.mktemp('plugin')
    (root / 'tiktoken_ext').mkdir()
    (root / 'tiktoken_ext' / 'nanotok_test.py').write_text(PLUGIN)
    (root / 'cache').mkdir()  # an empty TIKTOKEN_CACHE_DIR: nothing cached
    return root
