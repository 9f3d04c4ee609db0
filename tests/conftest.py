"""
Shared by every test file: ROOT is the repository root, and it goes on sys.path so that `import model` works
however pytest is started (`pytest`, `python -m pytest`, from the root or from tests/).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
