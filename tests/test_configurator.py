"""
Tests for configurator.py: defaults, then config files, then --key=value flags, last one wins, and every
mistake exits with a one-line SystemExit naming what was wrong. Each test execs the configurator into a
dict that stands in for train.py's globals(), with sys.argv patched.
Run: python -m pytest -q tests/test_configurator.py
"""
import os
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


