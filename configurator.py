# Poor Man's Configurator, after nanoGPT's: python train.py config/override_file.py --batch_size=32
# Not a module: a script defines its defaults as globals, then runs exec(open('configurator.py').read()), and this
# overrides them in place, walking sys.argv[1:] left to right, the last one winning:
# - an argument without a leading '--' is a config file, plain Python exec'd into the same globals;
# - --key=value: key must already be a global; the value goes through ast.literal_eval (else stays a string) and
#   must have the default's type (an int is accepted for a float, anything for a None); a bare --flag is a bool's True.
# A mistake exits with one line naming the argument (SystemExit: no traceback, once per rank under torchrun).
# (A comment, not a docstring: exec'd as a docstring it would replace the script's own __doc__, which --help prints.)
import sys
from ast import literal_eval

# every name set here starts with '_', so it can neither clobber nor pose as one of the caller's config keys
_defaults = dict(globals())  # types are checked against the script's defaults, so a None default stays open
_is_key = lambda k, v: not k.startswith('_') and (v is None or type(v) in (int, float, bool, str))
for _i, _arg in enumerate(sys.argv[1:], 1):
    if _arg in ('-h', '--help'):
        print((_defaults.get('__doc__') or '').strip() + '\n\nconfig keys (--key=value), with the values so far:')
        print('\n'.join(f'  --{k}={globals()[k]!r}' for k, v in _defaults.items() if _is_key(k, v)))
        raise SystemExit(0)
    if not _arg.startswith('--'): # a config file
        try:
            _src = open(_arg).read()
        except OSError as _e:
            raise SystemExit(f"configurator: cannot read config file '{_arg}' ({_e.strerror})") from None
        print(f"Overriding config with {_arg}:")
        print(_src)
        exec(_src, globals())
        _typos = [k for k, v in globals().items() if k not in _defaults and not k.startswith('_')
                  and not callable(v) and not isinstance(v, type(sys))]
        if _typos:  # a misspelled key in a config file would otherwise be silently ignored
            raise SystemExit(f"configurator: config file '{_arg}' sets unknown key(s) {', '.join(_typos)}")
        continue
    _key, _eq, _val = _arg[2:].partition('=')  # split at the first '=' only: --start=a=b gives 'a=b'
    _keys = sorted(k for k, v in globals().items() if _is_key(k, v))  # scalars: no modules, functions or lists
    if _key not in _keys:
        raise SystemExit(f"configurator: unknown config key '{_key}' (from {_arg}); valid keys: {', '.join(_keys)}")
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
    print(f"Overriding: {_key} = {_new}")
    globals()[_key] = _new
