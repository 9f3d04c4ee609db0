"""
The host syncs of a training step, counted on a CPU. train.py runs in this process (runpy, a tiny model, two
iterations of two micro-batches) under a TorchDispatchMode that notes every op which would make the host wait for
the device on CUDA, and the train.py line it came from:
- a tensor made from host data (torch.tensor, a list index: aten.lift_fresh; a copy from the CPU to the device),
- a value read back (.item(), int(), float(), bool() of a tensor: aten._local_scalar_dense; .tolist()),
- an output whose size depends on the values (nonzero, masked_select, boolean-mask indexing, unique).
A Python number made a 0-dim tensor (aten.lift_fresh of shape (), aten.scalar_tensor) is not counted: CUDA kernels
take it as an argument. The batch (X and M, from host memory in get_rows) is counted apart: on CUDA it is pinned and
copied with non_blocking=True, and the next one is fetched while the device works.
The claim the README states: inside the step (from train.py's `# one optimizer step` to `# timing and logging`)
there are exactly the chunk count of each forward (model.chunk_ends: it sizes the mid level) and the step's one
flags.tolist() (the non-finite and stop flags, decided before the update); the batch is fetched and copied
asynchronously and every constant is made once, outside the step.
Run: python -m pytest -q tests/test_syncs.py
"""
import os
import runpy
import signal
import sys
from collections import Counter

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import ROOT

TRAIN = os.path.join(ROOT, 'train.py')
aten = torch.ops.aten
VALUE_SIZED = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default,
               aten.unique_consecutive.default, aten.repeat_interleave.Tensor}


def origin():
    """ (the innermost frame in the repository as 'file:function', the line of train.py's top level running) """
    f, inner, line = sys._getframe(2), None, None
    while f is not None:
        path = f.f_code.co_filename
        if inner is None and path.startswith(ROOT) and os.sep + 'tests' + os.sep not in path:
            inner = f"{os.path.basename(path)}:{f.f_code.co_name}"
        if path == TRAIN and f.f_code.co_name == '<module>':
            line = f.f_lineno
        f = f.f_back
    return inner, line


class Census(TorchDispatchMode):
    """ notes (kind, where, train.py line) of each op that would block the host on CUDA """

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = None
        if func is aten._local_scalar_dense.default:
            kind = 'item'
        elif func in (aten.lift_fresh.default, aten.lift_fresh_copy.default) and args[0].dim() > 0: # (0-dim: a
            kind = 'from host data' # Python number, passed to the kernel as an argument on CUDA: no copy, no wait)
        elif func is aten._to_copy.default and args[0].device.type == 'cpu' and \
                torch.device(kwargs.get('device') or 'cpu').type != 'cpu':
            kind = 'copy to the device'
        elif func in VALUE_SIZED:
            kind = func.name()
        elif func is aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1]):
            kind = 'boolean mask'
        if kind:
            inner, line = origin()
            if kind == 'from host data' and inner == 'train.py:get_rows': # the batch: pinned, then copied with
                kind = 'the batch' # non_blocking=True on CUDA, so the host goes on (counted apart, to show where)
            self.seen.append((kind, inner, line))
        return func(*args, **kwargs)


def write_corpus(path):
    rng = np.random.default_rng(0)
    words = [b'def ', b'return ', b'self', b'.x', b' = ', b'(', b')', b':\n', b'    ', b'if ', b'None', b'1']
    os.makedirs(path, exist_ok=True)
    for split, n in (('train', 64), ('val', 8)):
        docs = [b''.join(rng.choice(words, size=rng.integers(5, 60))) for _ in range(n)]
        (path / f'{split}.bin').write_bytes(b''.join(docs))
        np.save(path / f'{split}_offsets.npy', np.cumsum([0] + [len(d) for d in docs]).astype(np.int64))


def census(tmp_path, *flags):
    """ train.py's own lines, run here for 2 iterations of 2 micro-batches -> the noted ops inside the step """
    write_corpus(tmp_path / 'data' / 'tiny')
    src = open(TRAIN).read().splitlines()
    first = next(i for i, line in enumerate(src, 1) if line.strip().startswith('# one optimizer step'))
    last = next(i for i, line in enumerate(src, 1) if line.strip().startswith('# timing and logging'))
    argv, handlers = sys.argv, {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    tolist, mode = torch.Tensor.tolist, Census()

    def noted_tolist(self):
        mode.seen.append(('tolist', *origin()))
        return tolist(self)
    sys.argv = ['train.py', '--device=cpu', '--dtype=float32', '--block_size=64', '--batch_size=4', '--n_embd=32',
                '--n_head=2', '--n_down=1', '--n_mid=1', '--n_up=1', '--window=16', '--eval_iters=2',
                '--max_iters=2', '--eval_interval=100', '--log_interval=1', '--gradient_accumulation_steps=2',
                f'--data_dir={tmp_path / "data"}', '--dataset=tiny', f'--out_dir={tmp_path / "out"}', *flags]
    try:
        torch.Tensor.tolist = noted_tolist
        with mode:
            runpy.run_path(TRAIN, run_name='__main__')
    finally:
        sys.argv, torch.Tensor.tolist = argv, tolist
        for s, h in handlers.items():
            signal.signal(s, h)
    return Counter((kind, where) for kind, where, line in mode.seen if line and first <= line < last)


def test_a_training_step_syncs_once_per_forward_and_once_for_its_flags(tmp_path):
    """ 2 iterations x 2 micro-batches: 4 forwards, each reading its chunk count, and 2 flags.tolist(); besides them
        only the 4 batches of X and M, read from host memory and copied asynchronously. A failure names each new sync:
        its kind and the function it came from """
    seen = census(tmp_path)
    assert seen == Counter({('item', 'model.py:chunk_ends'): 4, ('tolist', 'train.py:<module>'): 2,
                            ('the batch', 'train.py:get_rows'): 8}), seen
