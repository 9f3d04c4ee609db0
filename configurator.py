# Poor Man's Configurator, after nanoGPT's: python train.py config/train_tiny_pycode.py --batch_size=32
# Not a module: a script defines its defaults as globals, then runs exec(open('configurator.py').read()), and this
# overrides them in place, walking sys.argv[1:] left to right, the last one winning:
# - an argument without a leading '--' is a config file, plain Python exec'd into the same globals; its path is tried
#   as given, then relative to the script's folder (a config file that execs another does so relative to the script:
#   exec(open(os.path.join(os.path.dirname(__file__), 'config/size_73m.py')).read()), as __file__ is the script's);
# - --key=value: key must already be a global; the value goes through ast.literal_eval (else stays a string) and
#   must have the default's type (an int is accepted for a float, anything for a None); a bare --flag is a bool's True.
# _overrides holds every name the command line or a config file set (so train.py can tell them from defaults).
# A mistake exits with one line naming the argument (SystemExit: no traceback), a config file's with its line. Under
# torchrun only rank 0 prints. --help prints the script's docstring, then each key, its value so far and, when the
# script imports a table KEYS of them (common.KEYS: type, rule, reason), its row: the script's own ('bench.py:iters'),
# else the plain one ('iters'); the script checks them against it.
# (A comment, not a docstring: exec'd as a docstring it would replace the script's own __doc__, which --help prints.)
import ast
import builtins
import os
import sys
import traceback
from ast import literal_eval
from difflib import get_close_matches

# every name set here starts with '_', so it can neither clobber nor pose as one of the caller's config keys
_defaults = dict(globals())  # types are checked against the script's defaults, so a None default stays open
_is_key = lambda k, v: not k.startswith('_') and (v is None or type(v) in (int, float, bool, str))
_here = os.path.dirname(os.path.abspath(globals().get('__file__', 'configurator.py')))  # the script's folder
_talk = os.environ.get('RANK', '0') == '0'  # torchrun starts every rank with the same argv: rank 0 speaks for all
_overrides = {}

class _Noted(dict):  # a config file's namespace: notes each name it sets, in files it execs too
    def __setitem__(self, k, v):
        _overrides[k] = v
        super().__setitem__(k, v)

for _i, _arg in enumerate(sys.argv[1:], 1):
    if _arg in ('-h', '--help'):
        _rows, _script = globals().get('KEYS', {}), os.path.basename(globals().get('__file__', ''))
        print((_defaults.get('__doc__') or '').strip() + '\n\nconfig keys (--key=value), with the values so far'
              + (', their types, what they may be, and why:' if _rows else ':'))
        print('\n'.join((f'  --{k}={globals()[k]!r}'.ljust(34) + ' ' + _rows.get(f'{_script}:{k}', _rows.get(k, '')))
                        .rstrip() for k, v in _defaults.items() if _is_key(k, v))) # a script's own row first
        raise SystemExit(0)
    if not _arg.startswith('--'): # a config file, as given or next to the script
        _path = _arg if os.path.exists(_arg) or os.path.isabs(_arg) else os.path.join(_here, _arg)
        try:
            _src = open(_path).read()
        except OSError as _e:
            raise SystemExit(f"configurator: cannot read config file '{_arg}' ({_e.strerror})") from None
        if _talk:
            print(f"Overriding config with {_arg}:")
            print(_src)
        try: # a mistake in the file: one line with its name and line number, not a traceback through <string>
            _tree = ast.parse(_src, _path)
            _bare = [n for n in _tree.body if isinstance(n, ast.AnnAssign) and n.value is None]
            if _bare: # `batch_size: 4` is valid Python that sets nothing
                raise SyntaxError(f"'{ast.unparse(_bare[0])}' is an annotation, which sets nothing; write "
                                  f"'{ast.unparse(_bare[0].target)} = ...'", (_path, _bare[0].lineno, 0, ''))
            _ns = _Noted(globals())
            exec(builtins.compile(_tree, _path, 'exec'), _ns) # (train.py's key `compile` hides the builtin)
        except Exception as _e:
            _line = _e.lineno if isinstance(_e, SyntaxError) else \
                ([f.lineno for f in traceback.extract_tb(_e.__traceback__) if f.filename == _path] or ['?'])[-1]
            raise SystemExit(f"configurator: config file '{_arg}', line {_line}: "
                             + (_e.msg if isinstance(_e, SyntaxError) else f"{type(_e).__name__}: {_e}")) from None
        globals().update(_ns)
        _typos = [k for k, v in globals().items() if k not in _defaults and not k.startswith('_')
                  and not callable(v) and not isinstance(v, type(sys))]
        if _typos:  # a misspelled key in a config file would otherwise be silently ignored
            raise SystemExit(f"configurator: config file '{_arg}' sets unknown key(s) {', '.join(_typos)}")
        continue
    _key, _eq, _val = _arg[2:].partition('=')  # split at the first '=' only: --start=a=b gives 'a=b'
    _keys = sorted(k for k, v in globals().items() if _is_key(k, v))  # scalars: no modules, functions or lists
    if _key not in _keys:
        _near = get_close_matches(_key, _keys, n=3)
        _hint = f"did you mean {' or '.join('--' + k for k in _near)}?" if _near else "--help lists the keys"
        raise SystemExit(f"configurator: unknown config key '{_key}' (from {_arg}); {_hint}")
    _old = _defaults.get(_key, globals()[_key])  # (or a config file's value, for a key the script lacks)
    if not _eq: # a bare --flag: True for a bool key; for anything else, say how to pass the value
        if type(_old) is not bool:
            _next = sys.argv[_i + 1] if _i + 1 < len(sys.argv) else '--'
            _how = f", not '{_arg} {_next}'" if not _next.startswith('--') else ''
            raise SystemExit(f"configurator: {_arg} needs a value ({_key} is {type(_old).__name__}): "
                             f"use {_arg}={_next if _how else 'VALUE'}{_how}")
        _val = 'True'
    try:
        _new = literal_eval(_val)  # bool, number, None, tuple, quoted string ...
    except (SyntaxError, ValueError, TypeError):
        _new = _val  # ... anything else is a plain string
    if type(_old) is str and type(_new) is not str:
        _new = _val  # --out_dir=2024 is the string '2024'
    if type(_old) is float and type(_new) is int:
        _new = float(_new)  # --learning_rate=1 means 1.0
    if _old is not None and type(_new) is not type(_old):  # a None default takes any type
        raise SystemExit(f"configurator: {_arg}: {_key} expects {type(_old).__name__} (default {_old!r}), "
                         f"got {type(_new).__name__} {_new!r}")
    if _talk:
        print(f"Overriding: {_key} = {_new}")
    globals()[_key] = _overrides[_key] = _new
