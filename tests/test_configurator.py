"""
Tests for configurator.py: defaults, then config files, then --key=value flags, last one wins, and every
mistake exits with a one-line SystemExit naming what was wrong, a config file's with its line. Each test execs the
configurator into a dict that stands in for train.py's globals(), with sys.argv patched. Then the table of keys that
train.py, sample.py, eval.py and bench.py share (common.KEYS): --help prints it, every key of every script refuses a
value of another type and the values just outside its range, each in one line, while its edges pass
(common.check_config), and a script's own rows ('bench.py:iters') hold its keys there and nowhere else.
Run: python -m pytest -q tests/test_configurator.py
"""
import ast
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_configurator(monkeypatch, argv, **defaults):
    ns = dict(defaults)  # stands in for train.py's globals()
    monkeypatch.setattr(sys, 'argv', ['train.py', *argv])
    exec(open(os.path.join(ROOT, 'configurator.py')).read(), ns)
    return ns


def exits_with(monkeypatch, argv, **defaults):
    with pytest.raises(SystemExit) as e:
        run_configurator(monkeypatch, argv, **defaults)
    return str(e.value)


def test_flag_overrides_default(monkeypatch, capsys):
    ns = run_configurator(monkeypatch, ['--batch_size=4', '--compile=False'], batch_size=12, compile=True)
    assert ns['batch_size'] == 4 and ns['compile'] is False
    assert 'Overriding: batch_size = 4' in capsys.readouterr().out


def test_config_file_then_flags_last_wins(monkeypatch, tmp_path, capsys):
    cfg = tmp_path / 'cfg.py'
    cfg.write_text("batch_size = 8\nout_dir = 'out-cfg'\n")
    ns = run_configurator(monkeypatch, [str(cfg), '--batch_size=2'], batch_size=12, out_dir='out')
    assert ns['batch_size'] == 2 and ns['out_dir'] == 'out-cfg'
    ns = run_configurator(monkeypatch, ['--batch_size=2', str(cfg)], batch_size=12, out_dir='out')
    assert ns['batch_size'] == 8  # a config file after a flag overrides it again
    assert f'Overriding config with {cfg}:' in capsys.readouterr().out


def test_missing_config_file_names_it(monkeypatch):
    assert 'config/nope.py' in exits_with(monkeypatch, ['config/nope.py'], batch_size=12)


def test_unknown_key_names_it_and_up_to_three_close_config_keys(monkeypatch):
    msg = exits_with(monkeypatch, ['--bach_size=4'], batch_size=12, lr=1e-3, os=os, _private=1, f=len)
    assert "'bach_size'" in msg and msg.endswith('did you mean --batch_size?')
    keys = {f'batch_size{i}': 1 for i in range(5)}
    assert exits_with(monkeypatch, ['--batch_size=4'], **keys).split('did you mean')[1].count('--') == 3  # not 5
    assert 'lr' not in msg  # the close ones only, not a list of every key
    msg = exits_with(monkeypatch, ['--os=1'], os=os, batch_size=12)  # modules, functions, _names are not keys
    assert "unknown config key 'os'" in msg and msg.endswith('--help lists the keys')


@pytest.mark.parametrize('arg, defaults', [('--batch_size=abc', {'batch_size': 12}),
                                           ('--compile=3', {'compile': True}),
                                           ('--lr=True', {'lr': 1e-3})])
def test_wrong_type_names_key_value_and_types(monkeypatch, arg, defaults):
    msg = exits_with(monkeypatch, [arg], **defaults)
    key, val = arg[2:].split('=')
    old = defaults[key]
    assert key in msg and val in msg and f'expects {type(old).__name__}' in msg


def test_int_accepted_for_float(monkeypatch):
    lr = run_configurator(monkeypatch, ['--lr=1'], lr=1e-3)['lr']
    assert lr == 1.0 and type(lr) is float


def test_none_default_takes_any_type(monkeypatch):
    assert run_configurator(monkeypatch, ['--seed=x'], seed=None)['seed'] == 'x'
    assert run_configurator(monkeypatch, ['--seed=3'], seed=None)['seed'] == 3
    assert run_configurator(monkeypatch, ['--seed=3', '--seed=None'], seed=None)['seed'] is None


def test_types_checked_against_script_default(monkeypatch, tmp_path):
    cfg = tmp_path / 'cfg.py'
    cfg.write_text("seed = 3\nlr = 1\n")  # a config file may set a None default, or an int for a float
    ns = run_configurator(monkeypatch, [str(cfg), '--seed=x', '--lr=0.5'], seed=None, lr=1e-3)
    assert ns['seed'] == 'x' and ns['lr'] == 0.5


def test_bare_flag_sets_bool_true(monkeypatch):
    assert run_configurator(monkeypatch, ['--compile'], compile=False)['compile'] is True


def test_bare_flag_for_non_bool_is_an_error(monkeypatch):
    assert '--batch_size=VALUE' in exits_with(monkeypatch, ['--batch_size'], batch_size=12)
    msg = exits_with(monkeypatch, ['--batch_size', '32'], batch_size=12)
    assert "use --batch_size=32, not '--batch_size 32'" in msg


def test_value_keeps_everything_after_first_equals(monkeypatch):
    assert run_configurator(monkeypatch, ['--start=a=b'], start='\n')['start'] == 'a=b'
    assert run_configurator(monkeypatch, ['--start=FILE:p.txt'], start='\n')['start'] == 'FILE:p.txt'


def test_error_is_one_line_without_traceback():
    # as a user sees it: `python train.py --bach_size=4` (train.py execs configurator.py from the repo root)
    code = "batch_size = 12\nexec(open('configurator.py').read())"
    r = subprocess.run([sys.executable, '-c', code, '--bach_size=4'], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and 'Traceback' not in r.stderr
    assert r.stderr.strip().splitlines() == ["configurator: unknown config key 'bach_size' (from --bach_size=4); "
                                             "did you mean --batch_size?"]


def test_config_file_with_unknown_key_names_it(monkeypatch, tmp_path):
    cfg = tmp_path / 'typo.py'
    cfg.write_text("batch_size = 4\nlearnig_rate = 1e-3\n")
    with pytest.raises(SystemExit, match=r"typo\.py.*learnig_rate"):
        run_configurator(monkeypatch, [str(cfg)], batch_size=12, learning_rate=6e-4)


def test_string_key_keeps_numeric_looking_value(monkeypatch):
    assert run_configurator(monkeypatch, ["--out_dir=2024"], out_dir='out')['out_dir'] == '2024'


def test_help_prints_the_scripts_docstring_and_the_current_values(monkeypatch, tmp_path, capsys):
    cfg = tmp_path / 'cfg.py'
    cfg.write_text('"""a config docstring must not replace the script\'s"""\nout_dir = \'out-cfg\'\n')
    with pytest.raises(SystemExit) as e:
        run_configurator(monkeypatch, [str(cfg), '--help'], __doc__='Train the thing.', out_dir='out', seed=1,
                         helpers=[1, 2], run=print)
    assert e.value.code in (0, None)
    out = capsys.readouterr().out.split(cfg.read_text())[-1]  # after the config file's echo
    assert out.strip().startswith('Train the thing.') and 'a config docstring' not in out
    assert "--out_dir='out-cfg'" in out and '--seed=1' in out  # the value after the config file, not the default
    assert '--helpers' not in out and '--run' not in out  # lists and functions are not config keys


def test_overrides_holds_what_the_command_line_and_config_files_set(monkeypatch, tmp_path):
    """ _overrides: the names set by a flag or by a config file (also one it execs, and to the default's value), so
        train.py can refuse a resume whose flags contradict the checkpoint; defaults left alone are not in it """
    (tmp_path / 'config').mkdir()
    (tmp_path / 'config' / 'part.py').write_text("n_embd = 64\n")  # the default's value: still set by the file
    (tmp_path / 'config' / 'whole.py').write_text(
        "exec(open(os.path.join(os.path.dirname(__file__), 'config', 'part.py')).read())\nrate = 0.3\n")
    monkeypatch.chdir(tmp_path)
    ns = run_configurator(monkeypatch, ['config/whole.py', '--lr=0.5'], n_embd=64, rate=0.2, lr=1e-3, seed=1,
                          __file__=str(tmp_path / 'train.py'))
    assert {k: ns['_overrides'][k] for k in ('n_embd', 'rate', 'lr')} == dict(n_embd=64, rate=0.3, lr=0.5)
    assert 'seed' not in ns['_overrides'] and (ns['n_embd'], ns['rate'], ns['lr']) == (64, 0.3, 0.5)


def test_a_config_file_is_found_next_to_the_script_from_any_directory(monkeypatch, tmp_path):
    (tmp_path / 'repo' / 'config').mkdir(parents=True)
    (tmp_path / 'repo' / 'config' / 'base.py').write_text("batch_size = 3\n")
    (tmp_path / 'repo' / 'config' / 'x.py').write_text(
        "exec(open(os.path.join(os.path.dirname(__file__), 'config', 'base.py')).read())\nlr = 0.5\n")
    monkeypatch.chdir(tmp_path)  # not the script's folder
    ns = run_configurator(monkeypatch, ['config/x.py'], batch_size=12, lr=1e-3,
                          __file__=str(tmp_path / 'repo' / 'train.py'))
    assert (ns['batch_size'], ns['lr']) == (3, 0.5)
    assert 'config/nope.py' in exits_with(monkeypatch, ['config/nope.py'], batch_size=12,
                                          __file__=str(tmp_path / 'repo' / 'train.py'))


def test_only_rank_0_prints_the_configuration(monkeypatch, tmp_path, capsys):
    """ torchrun starts every rank with the same arguments: one copy of the 'Overriding' lines, from rank 0 """
    cfg = tmp_path / 'cfg.py'
    cfg.write_text("batch_size = 8\n")
    monkeypatch.setenv('RANK', '1')
    ns = run_configurator(monkeypatch, [str(cfg), '--lr=0.5'], batch_size=12, lr=1e-3)
    assert (ns['batch_size'], ns['lr']) == (8, 0.5) and capsys.readouterr().out == ''
    monkeypatch.setenv('RANK', '0')
    run_configurator(monkeypatch, [str(cfg), '--lr=0.5'], batch_size=12, lr=1e-3)
    out = capsys.readouterr().out
    assert 'Overriding config with' in out and 'Overriding: lr = 0.5' in out


# -----------------------------------------------------------------------------
# the table of keys (common.KEYS) that train.py, sample.py and eval.py check their values against (common.check_config)

def script_help(script, *args):
    """ a script run in this process (runpy: no second torch import) with --help -> its output, its keys (as --help
        lists them: name -> the value so far) and the row printed beside each key """
    import runpy
    from contextlib import redirect_stdout
    from io import StringIO
    argv, sys.argv, out, cwd = sys.argv, [script, *args, '--help'], StringIO(), os.getcwd()
    try:
        os.chdir(ROOT) # (bench.py runs from the repository's root)
        with redirect_stdout(out), pytest.raises(SystemExit) as e:
            runpy.run_path(os.path.join(ROOT, script), run_name='__main__')
    finally:
        sys.argv = argv
        os.chdir(cwd)
    assert e.value.code in (0, None)
    keys, rows = {}, {}
    for line in out.getvalue().split('with the values so far')[1].splitlines()[1:]:
        head, _, row = line.strip().partition(' ')
        k, _, v = head[2:].partition('=')
        keys[k], rows[k] = ast.literal_eval(v), row.strip()
    return out.getvalue(), keys, rows


SCRIPTS = ('train.py', 'sample.py', 'eval.py', 'bench.py', 'experiments.py')


@pytest.fixture(scope='module')
def helps():
    return {s: script_help(s) for s in SCRIPTS}


def test_help_prints_every_key_with_its_row_of_the_table(helps):
    """ every key of every script has a row in common.KEYS (its own or the plain one), --help prints it beside the key,
        and every row holds some script's key; `root`, a path train.py once kept as a global, is no key (nor a
        did-you-mean) """
    from common import KEYS, rows_of
    for script, (_, keys, rows) in helps.items():
        assert keys and all(rows[k] and rows[k] == rows_of(script).get(k) for k in keys), script
    held = {k if rows_of(s)[k] == KEYS.get(k) else f'{s}:{k}' for s, (_, keys, _) in helps.items() for k in keys}
    assert held == set(KEYS)
    assert 'root' not in helps['train.py'][1]


def test_a_script_s_own_rows_hold_its_keys_there_and_nowhere_else(helps):
    """ 'bench.py:threads' holds bench.py's threads (torch's default at 0), the plain row train.py's (the idle cores);
        bench.py's iters, table and warmup are no key of train.py's, whatever a script's globals hold """
    from common import KEYS, check_config, rows_of
    own, plain = KEYS['bench.py:threads'], KEYS['threads']
    assert helps['bench.py'][2]['threads'] == own != plain == helps['train.py'][2]['threads']
    with pytest.raises(SystemExit, match=re.escape("bench.py: --threads=-1 must be >= 0: torch threads of the tables")):
        check_config(dict(helps['bench.py'][1], threads=-1), 'bench.py')
    with pytest.raises(SystemExit, match=re.escape("train.py: --threads=-1 must be >= 0: CPU threads; 0: the cores")):
        check_config(dict(helps['train.py'][1], threads=-1), 'train.py')
    for script in ('train.py', 'sample.py', 'eval.py'):
        assert not {'iters', 'table', 'warmup', 'sizes'} & set(rows_of(script)), script
        check_config(dict(helps[script][1], iters=-1, table='nope', warmup=-1, sizes=3), script) # not its keys
    with pytest.raises(SystemExit, match=re.escape("bench.py: --iters=-1 must be > 0")):
        check_config(dict(helps['bench.py'][1], iters=-1), 'bench.py')


def bad_values(k, row):
    """ key k's row of KEYS -> (a value of the wrong type, values its rule refuses, values at the edges it accepts) """
    from common import key_rule
    kind, _, rule, _ = key_rule(row)
    wrong = {int: '4', float: '0.5', bool: 1, str: 3}[kind] # a config file's `batch_size = "4"`, `compile = 1`
    if rule.startswith('a device'): # the machine's own: common.check_device
        empty = [''] if rule.endswith("or ''") else []
        return wrong, ['nonsense', 'cuda:99'] + ([] if empty else ['']), ['cpu'] + empty
    if rule.startswith('comma-separated'): # each item as a row of its own
        each = rule.partition(', each ')[2]
        if not each:
            return wrong, [], ['a,b', '']
        _, bad, good = bad_values(k, (each if each.startswith(('int ', 'float ')) else f'str, {each}') + ': item')
        return wrong, [str(bad[0]), f'{good[0]},{bad[0]}', ''], [str(good[0]), ','.join(map(str, good))]
    step = 1 if kind is int else 1e-9
    if rule.startswith(('>', 'in ')):
        lo, hi = re.findall(r'[-\d.e]+', rule)[-2:] if rule.startswith('in ') else (rule.split()[1], None)
        lo, hi = kind(float(lo)), hi and kind(float(hi))
        left = rule.startswith('>= ') or rule.startswith('in [') # the lower edge is allowed
        right = rule.endswith(']')
        bad = [lo - step] + ([] if left else [lo]) + ([] if hi is None else [hi + step] + ([] if right else [hi]))
        bad += [float('inf'), float('nan')] if kind is float else [] # (1e999 on the command line is inf)
        good = ([lo] if left else [lo + step]) + ([] if hi is None else [hi] if right else [hi - step])
        return wrong, bad, good
    if rule.startswith('one of '):
        names = re.findall(r"'([^']*)'", rule)
        return wrong, ['nope', names[0].upper() + 'x'], names
    if rule == 'a folder':
        return wrong, ['', '/etc/passwd'], ['out', '~/out']
    if rule == "a folder or ''":
        return wrong, ['/etc/passwd'], ['', 'data', '~/data']
    return wrong, [], [True, False] if kind is bool else ['~/x' if rule == 'a path' else 'anything', '']


def test_every_key_refuses_a_wrong_type_and_values_out_of_its_range_in_one_line(helps, tmp_path, monkeypatch):
    """ each key of each script, with every other key at its default: a value of another type and a value just
        outside its rule end in one line that names the key and the value (a SystemExit with a message: exit status 1,
        no traceback), with nothing made; the values at the rule's edges pass """
    from common import check_config, key_rule, rows_of
    monkeypatch.chdir(tmp_path) # a relative out_dir would be made here
    monkeypatch.setenv('HOME', str(tmp_path))
    n = pairs = 0
    for script, (_, defaults, _) in helps.items():
        for k, row in rows_of(script).items():
            if k not in defaults:
                continue
            pairs += 1
            wrong, bad, good = bad_values(k, row)
            if k == 'wandb_log' and not importlib.util.find_spec('wandb'):
                good = [False] # True needs wandb (tests/test_train.py: without it, one line)
            for v in [wrong, *bad]:
                with pytest.raises(SystemExit) as e:
                    check_config(dict(defaults, **{k: v}), script)
                msg = e.value.code
                assert isinstance(msg, str) and '\n' not in msg and msg.startswith(f'{script}: --{k}='), (k, v, msg)
                device = key_rule(row)[2].startswith('a device')
                allowed = 'cpu' if device else row if v is wrong else row.partition(': ')[0].partition(' ')[2]
                assert (repr(v) if v is wrong else str(v)) in msg and allowed in msg, (k, v, msg) # and what may be
                n += 1
            for v in good:
                ns = dict(defaults, **{k: v}, **({'n_head': 1} if k == 'n_embd' else {})) # one head of 2 at the edge
                check_config(ns, script) # passes
                assert ns[k] == (os.path.expanduser(v) if isinstance(v, str) else v) # and '~' is the home folder
            assert os.listdir(tmp_path) == [], (script, k) # nothing made
    assert pairs == sum(len(keys) for _, keys, _ in helps.values()) and n > 2 * pairs # (each: 1 to 6 values)


def test_the_issue_s_values_are_refused_by_name_and_range():
    """ the values a new user tried, each once silently wrong or a traceback, against train.py's defaults:
        the line names the key, the value and the rule """
    from common import check_config
    _, defaults, _ = script_help('train.py')
    cases = {'grad_clip': (-1.0, '>= 0'), 'early_weight': (1.5, 'in [0, 1]'), 'prescribe': ('foo', "one of '', 'bpe'"),
             'n_down': (-1, '>= 0'), 'max_iters': (-5, '>= 0'), 'n_head': (0, '> 0'), 'n_embd': (-64, '>= 2'),
             'window': (-1, '>= 0'), 'filter_size': (0, '> 0'), 'threads': (-1, '>= 0'),
             'learning_rate': (-0.003, '> 0'), 'rate': (0.0, 'in (0, 1)'), 'batch_size': ('4', 'int > 0')}
    for k, (v, rule) in cases.items():
        shown = repr(v) if k == 'batch_size' else v # a value of the wrong type is shown with its quotes
        with pytest.raises(SystemExit, match=re.escape(f"--{k}={shown}") + '.*' + re.escape(rule)):
            check_config(dict(defaults, **{k: v}), 'train.py')
    with pytest.raises(SystemExit, match=r'n_embd=30 must split into n_head=4 heads'): # two keys together
        check_config(dict(defaults, n_embd=30, n_head=4), 'train.py')


@pytest.mark.parametrize('src, says', [
    ("batch_size = 4\nlearning_rate = (1e-3\n", "line 2: '(' was never closed"),
    ("batch_size: 4\n", "line 1: 'batch_size: 4' is an annotation, which sets nothing; write 'batch_size = ...'"),
    ("x = 1\nbatch_size = int('four')\n", "line 2: ValueError: invalid literal for int()"),
])
def test_a_mistake_in_a_config_file_names_the_file_and_its_line(monkeypatch, tmp_path, src, says):
    cfg = tmp_path / 'cfg.py'
    cfg.write_text(src)
    msg = exits_with(monkeypatch, [str(cfg)], batch_size=12, learning_rate=6e-4)
    assert msg.startswith(f"configurator: config file '{cfg}', ") and says in msg and '<string>' not in msg, msg
    assert '\n' not in msg


def test_a_config_file_value_of_the_wrong_type_is_one_line_from_train_py(tmp_path):
    """ as a user meets it: `python train.py cfg.py`, a subprocess, with `batch_size = "4"` in the file """
    cfg = tmp_path / 'cfg.py'
    cfg.write_text('batch_size = "4"\n')
    r = subprocess.run([sys.executable, 'train.py', str(cfg), f'--out_dir={tmp_path / "out"}'], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 1 and 'Traceback' not in r.stderr and not (tmp_path / 'out').exists()
    assert r.stderr.strip().splitlines() == ["train.py: --batch_size='4' is str, not int > 0: rows per micro-batch, "
                                             "the batch baseline's rows (sample.py, eval.py: rows per forward)"]
