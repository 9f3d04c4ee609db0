"""
Shared by every test file: ROOT is the repository root, and it goes on sys.path so that `import model` works
however pytest is started (`pytest`, `python -m pytest`, from the root or from tests/).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest
import torch


@pytest.fixture(autouse=True, scope='session')
def one_thread():
    """ the test tensors are tiny: one thread is as fast, and many times faster when the cores are shared """
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
