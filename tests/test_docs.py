"""
The text against the code: every file the README, dev/ and the code's comments and docstrings cite is in the
repository (a clone has nothing beside it); the README's method table names every variant of model.py with the
config/method_*.py that runs it, as that config sets it; its first read names what the code defines; its ladder table
is the committed records' (assets/ladder_table.json).
Run: python -m pytest -q tests/test_docs.py   (a few seconds)
"""
import ast
import glob
import io
import os
import re
import tokenize

from conftest import ROOT
from model import DOWNSAMPLERS, GATERS, UPSAMPLERS

FOLDERS = ('dev', 'config', 'assets', 'tests', '.ci') # a path that starts with one of these names a repository file
PATH = re.compile(r"(?<![\w/.-])((?:%s)/(?:[\w.*/<>-]|\{[^}\s]*\})*)" % '|'.join(map(re.escape, FOLDERS)))
BARE_MD = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b") # a page named without its folder


def prose(path):
    """ the text of a file that cites: a markdown page whole, a Python file's comments and docstrings """
    src = open(path, encoding='utf-8').read()
    if path.endswith('.md'):
        return src
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.COMMENT]
    nodes = [n for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return '\n'.join(comments + [d for d in map(ast.get_docstring, nodes) if d])


def citing_files():
    names = ['README.md', *glob.glob('dev/*.md', root_dir=ROOT), *glob.glob('*.py', root_dir=ROOT),
             *glob.glob('config/*.py', root_dir=ROOT), *glob.glob('tests/*.py', root_dir=ROOT)]
    return sorted(names)


def citations(text):
    """ the repository paths a text names; templates (config/train_{size}_{method}.py, assets/<table>.json) are not
        files, and a glob must match at least one:
        'see dev/LOG.md, and config/method_*.py' -> ['dev/LOG.md', 'config/method_*.py'] """
    found = [m.group(1).rstrip('.') for m in PATH.finditer(text)]
    return [p for p in found if not any(c in p for c in '{<') and '...' not in p]


def test_citations_finds_paths_and_leaves_templates():
    text = ("see dev/LOG.md, (tests/test_model.py) and config/method_*.py. [x](assets/a.png); "
            "config/train_{18m,...,346m}_{method}.py assets/<table>.json my_config/x.py")
    assert citations(text) == ['dev/LOG.md', 'tests/test_model.py', 'config/method_*.py', 'assets/a.png']


def test_every_cited_file_is_in_the_repository():
    missing = []
    for name in citing_files():
        text = prose(os.path.join(ROOT, name))
        for p in citations(text):
            if not glob.glob(p, root_dir=ROOT):
                missing.append(f"{name}: {p}")
        for md in BARE_MD.findall(text): # README.md is the one page at the top: the others are named with dev/
            if md != 'README.md':
                missing.append(f"{name}: {md} (not at the top of the repository: name its folder)")
    assert not missing, 'cited but not in the repository:\n' + '\n'.join(missing)
    assert len(citing_files()) > 20 and 'dev/DESIGN.md' in citing_files()


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


def test_the_first_read_names_what_the_code_defines():
    """ the README's reading path names functions, classes and methods that model.py and train.py define, so a rename
        cannot leave the reader looking for something that is gone """
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    para = readme[readme.index('**A first read**'):]
    para = para[:para.index('\n\n')]
    defined = set()
    for script in ('model.py', 'train.py'):
        for node in ast.walk(ast.parse(open(os.path.join(ROOT, script)).read())):
            if isinstance(node, ast.ClassDef):
                defined |= {node.name} | {f"{node.name}.{m.name}" for m in node.body if isinstance(m, ast.FunctionDef)}
            if isinstance(node, ast.FunctionDef):
                defined.add(node.name)
    names = re.findall(r"`([\w.]+)`", para)
    assert {'SequentialGater', 'chunk_ids', 'ByteUNet.__init__', 'position_mean', 'KVCache'} <= set(names)
    assert set(names) <= defined, f"the README's first read names what the code does not define: {set(names) - defined}"


# the README's ladder table against the records it reports (assets/ladder_table.json, which `--tabulate_only` rebuilds)

LADDER_LABELS = {'learned': 'learned', 'random': 'random', 'word ends': 'word_ends', 'H-Net': 'hnet', 'Nawrot': 'nawrot'}


def test_readme_ladder_table_is_the_committed_records():
    """ every cell of the README's ladder table is its rung and method's mean ± std over seeds (one seed: its value)
        and, where it says so, its seeds on word edges, as assets/ladder_table.json holds them: a record that lands
        without the text moving (or a number typed by hand) fails here """
    import json
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    head = re.search(r"^\| val bpb, mean ± std over seeds[^\n]*\|\n\|[-|]+\|\n((?:\|[^\n]*\|\n)+)", readme, re.M)
    assert head, "README: no ladder table headed '| val bpb, mean ± std over seeds'"
    rungs = [int(r) for r in re.findall(r"\| rung (\d+)", head.group(0).splitlines()[0])]
    table = json.load(open(os.path.join(ROOT, 'assets', 'ladder_table.json'), encoding='utf-8'))
    rows = {(r['rung'], r['method']): r for r in table['rows']}
    seen = set()
    for line in head.group(1).splitlines():
        label, *cells = [c.strip() for c in line.strip('|').split('|')]
        method = next((m for k, m in LADDER_LABELS.items() if label.startswith(k)), None)
        assert method, f"README: the ladder row {label!r} names no method of {list(LADDER_LABELS)}"
        assert len(cells) == len(rungs), f"README: the ladder row {label!r} has {len(cells)} cells for {len(rungs)} rungs"
        for rung, c in zip(rungs, cells):
            row = rows.get((rung, method))
            assert row, f"README: rung {rung}, {method} shows {c!r}; assets/ladder_table.json has no such row"
            m = re.fullmatch(r"(\d\.\d{3})(?: ± (\d\.\d{3}))?(?: \((\d+) of (\d+)\))?", c)
            assert m, f"README: rung {rung}, {method}: {c!r} is not 'mean ± std' with an optional '(k of n)'"
            assert m.group(1, 2) == (f"{row['bpb']:.3f}", f"{row['bpb_std']:.3f}" if len(row['seeds']) > 1 else None), \
                f"README: rung {rung}, {method} says {c!r}; the records give {row['bpb']:.3f}" + \
                (f" ± {row['bpb_std']:.3f}" if len(row['seeds']) > 1 else ' (one seed)')
            if m[3]:
                assert (int(m[3]), int(m[4])) == (row['edges'], len(row['seeds'])), \
                    f"README: rung {rung}, {method} says {m[3]} of {m[4]} on word edges; the records give " \
                    f"{row['edges']} of {len(row['seeds'])}"
            seen.add(method)
    assert seen == set(LADDER_LABELS.values()), f"README: the ladder table lacks {set(LADDER_LABELS.values()) - seen}"
