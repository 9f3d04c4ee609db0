"""
The text against the code: the README's method table names every variant of model.py with the config/method_*.py
that runs it, as that config sets it. Run: python -m pytest -q tests/test_docs.py   (a second)
"""
import glob
import os
import re

from conftest import ROOT
from model import DOWNSAMPLERS, GATERS, UPSAMPLERS

# -----------------------------------------------------------------------------
# the README's method table against config/method_*.py and model.py's dicts

def method_table():
    """ the README's method table -> [(methods, gaters, downsamplers, upsamplers)], each a list of names: a row
        '`a`, `b` | `g` or `h` / `select` / `add`' names two methods, the first with g, the second with h """
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    head = readme.index('| method (`config/method_*.py`)')
    rows = readme[head:].split('\n\n')[0].splitlines()[2:]
    names = lambda cell: re.findall(r"`(\w+)`|(prescribed)", cell)
    table = []
    for row in rows:
        methods, variants = row.split('|')[1:3]
        parts = [[a or b for a, b in names(p)] for p in variants.split(' / ')]
        table.append(([a for a, _ in names(methods)], *parts))
    return table


def method_config(name):
    """ what config/method_<name>.py sets, run as train.py runs it (a config may exec another next to train.py) """
    path = os.path.join(ROOT, 'config', f'method_{name}.py')
    ns = dict(os=os, __file__=os.path.join(ROOT, 'train.py'), prescribe='')
    exec(open(path).read(), ns)
    return ns


def test_method_table_matches_the_configs_and_names_every_variant():
    table = method_table()
    seen, listed = {'gater': set(), 'downsampler': set(), 'upsampler': set()}, []
    for methods, *variants in table:
        assert methods and all(len(v) in (1, len(methods)) for v in variants), (methods, variants)
        for i, m in enumerate(methods):
            cfg = method_config(m)
            for (key, names), v in zip(seen.items(), variants):
                want = v[i] if len(v) > 1 else v[0]
                got = 'prescribed' if key == 'gater' and cfg['prescribe'] else cfg[key]
                assert got == want, f"README: method {m} has {key} {want}; config/method_{m}.py sets {got}"
                names.add(got)
            listed.append(m)
    on_disk = sorted(os.path.basename(p)[len('method_'):-3] for p in glob.glob(os.path.join(ROOT, 'config',
                                                                                            'method_*.py')))
    assert sorted(listed) == on_disk # every method config in the table, once
    for key, family in (('gater', GATERS), ('downsampler', DOWNSAMPLERS), ('upsampler', UPSAMPLERS)):
        assert set(family) <= seen[key], f"{key}s no config/method_*.py runs: {set(family) - seen[key]}"
