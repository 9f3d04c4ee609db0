"""
An autoregressive U-Net over raw bytes that learns where its token boundaries go, in one file.

    bytes -> embed -> down layers -> gater -> downsampler -> mid layers -> upsampler -> up layers -> next byte
                          |            (which bytes end     (one vector     (full attention  (each byte reads
                          |             a chunk: 0/1)        per chunk)      over chunks)     its latest chunk)
                          +-> early-exit head (a cheap next-byte guess; the RL reward is how much the rest helps)

The byte layers attend over a sliding window (64 bytes in the paper); the mid layers see one vector per chunk, one in
about five bytes, over the whole row. A mid layer's MLP is 4x wider, so per byte a mid layer costs about half a byte
layer (0.47-0.49 by flops_per_byte, block_size 4096, rate 0.2), and the mid layers take 26% (40m, 90m), 41% (18m, 32m,
73m, 147m), 58% (130m) and 70% (346m) of a preset's training FLOPs.
The gater is trained by REINFORCE in train.py (the paper's method, `sequential`); the straight-through baselines
(`hnet`, `nawrot`) and fixed boundaries (`uniform`, `bernoulli`, `equidistant`, `whitespace`, the word controls,
BPE through `gates=`) share the same model, so a comparison is one flag away.

Departures from the paper's code, each on purpose:
- exact integer RoPE positions (the reference rounds them to bf16), fp32 master weights with bf16 autocast;
- the sequential gater's scan starts from the forced first gate and runs on the model's device;
- a sliding window of 64 keys including the query itself (flash-attn's window_size=(63, 0)).

References: Dauncey & Wattenhofer 2026 (arXiv 2602.13940, the method); Hwang et al. 2025, H-Net (arXiv 2507.07955);
Nawrot et al. 2023, Dynamic Token Pooling (arXiv 2211.09761); Karpathy, nanoGPT (the shape of this code).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # used only on CUDA; everything else goes through scaled_dot_product_attention
    from flash_attn import flash_attn_func, __version__ as _flash_version
    if tuple(int(v) for v in _flash_version.split('.')[:2]) < (2, 6): # softcap= arrived in flash-attn 2.6
        flash_attn_func = None
except ImportError:
    flash_attn_func = None

BOS = 256  # ids 0..255 are bytes, 256 opens every row; 257..319 pad the head to a multiple of 64 and are never sampled
CERTAIN = 100.0  # the logit of a decision that is not drawn (forced ends, fixed gaters): sigmoid(100) = 1 in fp32
WHITESPACE = (9, 10, 11, 12, 13, 32)  # \t \n \v \f \r and ' ': the whitespace gaters and the boundary metrics


@dataclass
class UNetConfig: # defaults: the paper's method values on a small model for tests; train.py sets every field
    block_size: int = 1024      # bytes per row, BOS included
    vocab_size: int = 320       # 256 bytes + BOS, padded to a multiple of 64
    n_embd: int = 64            # width D of every level
    n_head: int = 2             # heads; head size n_embd // n_head (64 in every paper size)
    n_down: int = 1             # byte layers before the gater
    n_mid: int = 2              # chunk layers
    n_up: int = 1               # byte layers after the upsampler
    window: int = 64            # keys a byte layer attends to, the query included
    attn_softcap: float = 50.0  # scores s -> c*tanh(s/c) (Gemma 2); 0 turns it off and lets SDPA use fused kernels
    gater: str = 'sequential'   # a key of GATERS
    downsampler: str = 'select' # a key of DOWNSAMPLERS
    upsampler: str = 'add'      # a key of UPSAMPLERS
    rate: float = 0.2           # target fraction of bytes that end a chunk (1/5: about 5 bytes per chunk)
    filter_size: int = 8        # sequential gater: w, the gate sees the byte state and the w-1 previous gates
    gate_scale: float = 1 / 16  # sequential gater: logit = softcap(scale * filter + logit(rate)); the quick start's 1
    gate_softcap: float = 6.0   # sequential gater: logit cap in train mode only (eval samples uncapped, as the paper)
    nawrot_temp: float = 0.5    # nawrot gater: relaxed Bernoulli temperature (Nawrot et al. 0.5, the paper's run 1.0)
    word_rate: float = 0.0      # word gaters: the rule's own share of gated positions; > 0 moves the rate to `rate`

    def __post_init__(self): # a bad combination fails here, with its name, not deep inside forward
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise ValueError(f"n_embd={self.n_embd} must split into n_head={self.n_head} heads of an even size (RoPE)")
        for name, table in (('gater', GATERS), ('downsampler', DOWNSAMPLERS), ('upsampler', UPSAMPLERS)):
            if getattr(self, name) not in table:
                raise ValueError(f"unknown {name} '{getattr(self, name)}'; choose one of {', '.join(table)}")
        if not 0 <= self.word_rate < 1:
            raise ValueError(f"word_rate={self.word_rate} must be in [0, 1): the word rule's share of positions")


PRESETS = {  # the paper's sizes, head size 64; the name counts parameters with both heads
    '18m':  dict(n_embd=384, n_head=6, n_down=2, n_mid=6, n_up=2),
    '32m':  dict(n_embd=512, n_head=8, n_down=2, n_mid=6, n_up=2),
    '40m':  dict(n_embd=512, n_head=8, n_down=4, n_mid=6, n_up=4),     # in the paper's size table; no config
    '73m':  dict(n_embd=768, n_head=12, n_down=2, n_mid=6, n_up=2),
    '90m':  dict(n_embd=768, n_head=12, n_down=4, n_mid=6, n_up=4),
    '130m': dict(n_embd=768, n_head=12, n_down=2, n_mid=12, n_up=2),
    '147m': dict(n_embd=768, n_head=12, n_down=4, n_mid=12, n_up=4),
    '346m': dict(n_embd=1024, n_head=16, n_down=2, n_mid=20, n_up=2),  # 366M in fact, the paper's name
}


# -----------------------------------------------------------------------------
# Transformer parts: one Gemma 2 decoder layer (pre- and post-norm around both sub-blocks, RoPE, GeGLU)

class RMSNorm(nn.Module):
    """ Gemma's RMSNorm: x / rms(x) * (1 + w), w starts at 0, computed in fp32 """

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + self.weight.float())).type_as(x)


def rope(pos, head_dim):
    """ cos, sin for rotate-half RoPE at float positions pos (..., T) -> (..., T, head_dim) each, theta 1e4 """
    inv_freq = 10000 ** (-torch.arange(0, head_dim, 2, device=pos.device, dtype=torch.float32) / head_dim)
    freqs = pos.float()[..., None] * inv_freq # exact integer positions (the reference rounds them to bf16)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(q, cos, sin):
    """ q (B, T, H, d); cos, sin (T, d) or (B, T, d) """
    cos, sin = cos.unsqueeze(-2).to(q.dtype), sin.unsqueeze(-2).to(q.dtype) # broadcast over heads
    q1, q2 = q.chunk(2, dim=-1)
    return q * cos + torch.cat([-q2, q1], dim=-1) * sin


def attention_weights(q, k, softcap, mask):
    """ softmax over the keys of the scores c*tanh(q.k / (sqrt(d) c)) (q.k / sqrt(d) if softcap is 0) + mask (0 where a
        key may be seen, -inf where not); q (..., Tq, d), k (..., Tk, d). The scale goes on q, and c with the mask in
        one add: three passes over the (Tq, Tk) scores before the softmax, not five """
    s = (q / (math.sqrt(q.size(-1)) * (softcap or 1))) @ k.transpose(-2, -1)
    s = torch.tanh(s) if softcap else s
    return F.softmax(torch.add(mask, s.float(), alpha=softcap or 1), dim=-1)


def attention(q, k, v, window, softcap):
    """ causal attention of q, k, v (B, T, H, d); each query sees at most `window` keys (itself included) if window """
    T = q.size(1)
    if flash_attn_func is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        left = window - 1 if window else -1 # flash-attn counts keys to the left of the query
        return flash_attn_func(q, k, v, causal=True, window_size=(left, 0), softcap=softcap)
    if window and T > window:
        return local_attention(q, k, v, window, softcap)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v)) # (B, H, T, d)
    if softcap: # SDPA has no softcap, so write the scores out: (T, T) per head, fine for the mid layers' chunks
        future = torch.full((T, T), float('-inf'), device=q.device).triu(1) # the keys after each query
        y = attention_weights(q, k, softcap, future).type_as(v) @ v
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2)


def local_attention(q, k, v, w, softcap):
    """ sliding-window causal attention without flash-attn: blocks of w queries, each against the w keys of its own
        block and the w of the block before (zeros before block 0), so the scores take O(T*w) memory, not O(T^2) """
    B, T, H, d = q.shape
    n = -(-T // w) # blocks, the last one right-padded (padded keys lie in the future of every real query)
    q, k, v = (F.pad(t.transpose(1, 2), (0, 0, 0, n * w - T)).view(B, H, n, w, d) for t in (q, k, v))
    k, v = (torch.cat([F.pad(t, (0, 0, 0, 0, 1, 0))[:, :, :-1], t], dim=3) for t in (k, v)) # (B, H, n, 2w, d)
    i, j, b = (torch.arange(m, device=q.device) for m in (w, 2 * w, n))
    i = i[:, None] + w # the queries sit in the second half of their 2w keys
    allowed = (j <= i) & (j > i - w) & ((b[:, None, None] > 0) | (j >= w)) # (n, w, 2w)
    mask = torch.zeros(allowed.shape, device=q.device).masked_fill(~allowed, float('-inf'))
    y = attention_weights(q, k, softcap, mask).type_as(v) @ v # (B, H, n, w, d)
    return y.reshape(B, H, n * w, d)[:, :, :T].transpose(1, 2)


class CausalSelfAttention(nn.Module):

    def __init__(self, config, window):
        super().__init__()
        self.n_head, self.window, self.softcap = config.n_head, window, config.attn_softcap
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)

    def forward(self, x, cos, sin, cache=None):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head).unbind(2) # (B, T, H, d) each
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = attention(q, k, v, self.window, self.softcap) if cache is None else cache.attend(q, k, v, self.softcap)
        return self.c_proj(y.reshape(B, T, C))


class MLP(nn.Module):
    """ GeGLU: c_proj(gelu_tanh(gate) * up), no biases """

    def __init__(self, n_embd, hidden):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 2 * hidden, bias=False)
        self.c_proj = nn.Linear(hidden, n_embd, bias=False)

    def forward(self, x):
        gate, up = self.c_fc(x).chunk(2, dim=-1)
        return self.c_proj(F.gelu(gate, approximate='tanh') * up)


class Block(nn.Module):
    """ byte layers: sliding window, 1xD MLP; mid layers: full causal attention over chunks, 4xD MLP """

    def __init__(self, config, window, mlp_mult):
        super().__init__()
        self.ln_1, self.ln_2 = RMSNorm(config.n_embd), RMSNorm(config.n_embd)
        self.ln_3, self.ln_4 = RMSNorm(config.n_embd), RMSNorm(config.n_embd)
        self.attn = CausalSelfAttention(config, window)
        self.mlp = MLP(config.n_embd, mlp_mult * config.n_embd)

    def forward(self, x, cos, sin, cache=None):
        x = x + self.ln_2(self.attn(self.ln_1(x), cos, sin, cache))
        x = x + self.ln_4(self.mlp(self.ln_3(x)))
        return x


# -----------------------------------------------------------------------------
# Chunk index helpers. A gate g_t = 1 means byte t ENDS a chunk; g_0 = 1 always, so BOS is chunk 0 on its own.
# Chunk k is the bytes (e_{k-1}, e_k], where e_k is the position of the k-th gate; g_{T-1} = 1 closes the last.

def chunk_ids(gates):
    """ chunk of each byte, c_t = sum_{j<t} g_j (exclusive cumsum):
        gates 1 0 1 1 0 1 1 0 0 0 1 -> chunk_ids 0 1 1 2 3 3 4 5 5 5 5 """
    return (gates.cumsum(-1) - gates).long()


def read_ids(gates):
    """ latest chunk complete at byte t, u_t = sum_{j<=t} g_j - 1; the only chunk byte t may read:
        gates 1 0 1 1 0 1 1 0 0 0 1 -> read_ids 0 0 1 2 2 3 4 4 4 4 5 """
    return (gates.cumsum(-1) - 1).long()


@torch.compiler.disable # its host sync (the chunk count) breaks the graph anyway: make it one clean break
def chunk_ends(gates, dynamic=False):
    """ positions e_k of the gates of each row, padded with 0 to S = the most chunks in the batch; and the counts:
        gates [[1 0 1 1], [1 0 0 1]] -> ends [[0 2 3], [0 3 0]], n_chunks [3, 2]. dynamic (under torch.compile): S is
        marked dynamic, so one compiled graph serves every chunk count: no recompile, and no padding to a fixed size """
    B, T = gates.shape
    n_chunks = gates.sum(-1).long()                            # (B,)
    S = int(n_chunks.max())                                    # the one host sync of a forward: S sizes the mid level
    slot = torch.where(gates > 0, chunk_ids(gates), S)         # non-gates go to a spare slot S, dropped below
    ends = torch.zeros(B, S + 1, dtype=torch.long, device=gates.device)
    ends.scatter_(1, slot, torch.arange(T, device=gates.device).expand(B, T))
    ends = ends[:, :S]
    if dynamic:
        torch._dynamo.maybe_mark_dynamic(ends, 1)
    return ends, n_chunks


def gather(z, ids):
    """ z (B, S, C), ids (B, T) -> z[b, ids[b, t]] (B, T, C) """
    return torch.gather(z, 1, ids[..., None].expand(-1, -1, z.size(-1)))


# -----------------------------------------------------------------------------
# Gaters: gater(x, idx, gates=None) -> gate_logits, gate_probs, gates, each (B, T).
# x is the down layers' output, not detached (as the paper): the gater's losses in train.py train the down layers and
# the embedding too. With `gates` given they are prescribed (no sampling) and the policy is scored on them. Gates are
# floats; only `nawrot` lets a gradient through them. The model then forces slots 0 and T-1 to 1.
# For generation, gater.step(x, x_prev, byte, byte_prev, t, hist, u) -> gate_probs, gates (B,) decides one row
# position t >= 1 as forward does there: x, x_prev (B, C) the down states at t and t-1, byte, byte_prev (B,) the ids
# at t and t-1, hist (B, w-1) the gates at t-w+1..t-1 (0 before the row), u (B,) a uniform draw per row.

def logit(p):
    return math.log(p / (1 - p))


class SequentialGater(nn.Module):
    """ the paper's gater: the gate at t sees x_t and the w-1 previous gates a_{t-w+1..t-1}:
        logit_t = cap(scale * (V_t[w-1] + sum_{k=1}^{w-1} V_t[w-1-k] * a_{t-k}) + logit(rate)),  V = filter(x)
        Sampling: `sample`, exact and parallel over t (w <= 10), or `scan`, the reference loop over t; the
        log-probabilities for the gradient are then recomputed in parallel with the sampled history teacher-forced. """

    def __init__(self, config):
        super().__init__()
        self.w, self.scale, self.cap = config.filter_size, config.gate_scale, config.gate_softcap
        self.bias = logit(min(config.rate, 0.999))
        self.filter = nn.Linear(config.n_embd, config.filter_size)

    def forward(self, x, idx, gates=None):
        V = self.filter(x).float()                             # (B, T, w)
        B, T, w = V.shape
        if gates is None:
            u = torch.rand(B, T, device=V.device)
            a = self.sample(V, u) if w <= 10 else self.scan(V, u)[0] # 2^(w-1) histories: the loop beyond 512
        else:
            a = torch.cat([V.new_zeros(B, w - 1), gates.to(V.dtype)], dim=1)
            a[:, w - 1] = 1.0                                  # the forced first gate, as in the scan
        history = a.unfold(1, w - 1, 1)[:, :T] if w > 1 else V.new_zeros(B, T, 0) # (B, T, w-1), teacher forcing
        logits = self.logits_of(V, history)
        return logits, torch.sigmoid(logits), a[:, w - 1:]

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = torch.sigmoid(self.logits_of(self.filter(x).float()[:, None], hist[:, None]))[:, 0]
        return p, (u < p).float()

    def logits_of(self, V, history):
        return self.squash(self.scale * self.filter_sum(V, history) + self.bias)

    def squash(self, y):
        return self.cap * torch.tanh(y / self.cap) if self.training and self.cap else y # capped in train mode only

    def filter_sum(self, V, history):
        """ V (B, T, w), history (B, T, w-1) with history[:, t, i] = a_{t-w+1+i} -> z (B, T), the sum in the logit """
        z = V[..., -1]
        for i in range(V.size(-1) - 1): # term by term, in the order `sample` adds them: the same bits
            z = z + V[..., i] * history[..., i]
        return z

    def threshold(self, u):
        """ a draw u moved to the scale of the filter sum z: u < sigmoid(logit) iff threshold(u) < z. Comparing there
            needs only sums of V, which round alike in any tensor shape (tanh and exp may not), so `sample` and
            `scan` draw identical gates from identical draws """
        L = torch.logit(u)
        y = self.cap * torch.atanh((L / self.cap).clamp(-1, 1)) if self.training and self.cap else L # uncapped
        return (y - self.bias) / self.scale

    @torch.no_grad()
    @torch.compiler.disable # a loop over T positions: torch.compile would unroll it into a graph of ~20*T ops
    def scan(self, V, u=None):
        """ the reference: a_0..a_{T-1} one position at a time; a_0 = 1, the forced first gate, seeds the history """
        B, T, w = V.shape
        a = V.new_zeros(B, w - 1 + T)                          # a[:, w-1+t] = a_t, w-1 zeros before the row
        a[:, w - 1] = 1.0
        u = torch.rand(B, T, device=V.device) if u is None else u # all the draws at once, so the loop only compares
        thr = self.threshold(u)
        probs = V.new_ones(B, T)
        for t in range(1, T):
            z = self.filter_sum(V[:, t:t + 1], a[:, None, t:t + w - 1])[:, 0]
            probs[:, t] = torch.sigmoid(self.squash(self.scale * z + self.bias))
            a[:, w - 1 + t] = (thr[:, t] < z).to(a.dtype)
        return a, probs

    @torch.no_grad()
    @torch.compiler.disable # one graph break; its step count depends on T
    def sample(self, V, u, block=None, chunk=8):
        """ the gates of the loop `scan` for the same uniforms u (B, T), in about L + log2(T/L) steps instead of T.
            The loop's state before t is its history h, the last w-1 gates as a number in 0..H-1, H = 2^(w-1) (bit i
            is a_{t-w+1+i}, the top bit a_{t-1}). Under a given h the gate at t is one comparison, so position t is a
            table step_t over the H histories, h -> h // 2 + a_t(h) * H/2 (the oldest gate out, a_t in as the top bit),
            and a run of positions is the composition of their tables, one gather each:
                w = 3, H = 4, h = a_{t-2} + 2 a_{t-1}              h            0 1 2 3
                the gate at t under each h (a comparison each)     a_t(h)       1 0 1 0  ->  step_t   = [2 0 3 1]
                the gate at t+1 under each h                       a_{t+1}(h)   0 0 1 1  ->  step_t+1 = [0 0 3 3]
                both: step_t+1[step_t] = [3 0 3 0]: from h = 0, a_t = 1 (h -> 2), then a_{t+1} = 1 (h -> 3)
            1. each block of L positions: the composition of its L tables (its block_map), from every h at once;
            2. by doubling over blocks (Hillis-Steele): the table from the row's start to the end of each block; a row
               starts at h = 0 (no gates before it), so block k starts from the table up to block k-1 at h = 0;
            3. each block once more, from that history, one position at a time: its gates.
            The forced first gate is no special case: a threshold of -inf at t = 0 makes a_0 = 1 under every history.
            Blocks of L = 1 position on a GPU (about log2 T doubling steps), of about sqrt(T) on a CPU (least work).
            Memory: the gates under every history, B*T*H bools (B=8, T=4096, w=8: 4 MB); the filter sums and
            tables of C = min(chunk, L) positions, C*B*(T/L)*H floats and int64 (6 MB at L = 64, 50 MB at L = 1); the
            block maps, B*(T/L)*H int64 (0.5 MB at L = 64, 34 MB at L = 1). -> a (B, w-1+T), laid out as the scan's """
        B, T, w = V.shape
        H, L = 2 ** (w - 1), block or (math.isqrt(T) if V.device.type == 'cpu' else 1)
        n = -(-T // L)                                         # blocks per row; N = B*n blocks in all
        N, top_bit = B * n, H // 2
        def blocked(t):                                        # (B, T, ...) -> (L, N, ...): position j of each block
            t = F.pad(t, (0, 0) * (t.dim() - 2) + (0, n * L - T)).view(B, n, L, *t.shape[2:])
            return t.permute(2, 0, 1, *range(3, t.dim())).reshape(L, N, *t.shape[3:])
        Vb, thr = blocked(V), blocked(self.threshold(u))       # (L, N, w), (L, N); padded positions are never read
        thr[0, ::n] = -math.inf                                # each row's t = 0: the forced first gate
        gate_under = torch.empty(L, N, H, dtype=torch.bool, device=V.device) # a_j(h): each position, each history
        C = min(chunk, L)                                      # positions at a time: their z and tables stay in cache
        z, table = V.new_empty(C, N, H), V.new_empty(C, N, H, dtype=torch.long) # filter sums z_j(h), step_j(h)
        h = torch.arange(H, device=V.device)
        block_map = h.expand(N, H)                             # 1. from each h, the history after the block so far
        for j0 in range(0, L, C):
            zc, Vc, tc = z[:L - j0], Vb[j0:j0 + C], table[:L - j0]
            zc[..., 0] = Vc[..., -1]
            for i in range(w - 1): # bit i set adds V_i
                torch.add(zc[..., :2 ** i], Vc[..., i, None], out=zc[..., 2 ** i:2 ** (i + 1)]) # as filter_sum
            torch.lt(thr[j0:j0 + C, :, None], zc, out=gate_under[j0:j0 + C])
            torch.where(gate_under[j0:j0 + C], h // 2 + top_bit, h // 2, out=tc)
            for step_j in tc:                                  # block_map <- step_j o block_map
                block_map = step_j.gather(1, block_map)
        maps, d = block_map.view(B, n, H), 1                   # 2. each block's map
        while d < n:                                           # maps[k] <- maps[k] o maps[k-d]: now blocks (k-2d, k]
            maps = torch.cat([maps[:, :d], maps[:, d:].gather(2, maps[:, :-d])], dim=1)
            d *= 2
        history = F.pad(maps[:, :-1, 0], (1, 0)).view(N, 1)   # 3. each block's first history, from h = 0
        a = V.new_empty(L, N)
        for j in range(L):
            bit = gate_under[j].gather(1, history)             # (N, 1): the gate under that history
            a[j], history = bit[:, 0], (history >> 1).add_(bit, alpha=top_bit)
        a = a.view(L, B, n).permute(1, 2, 0).reshape(B, n * L)[:, :T]
        return torch.cat([V.new_zeros(B, w - 1), a], dim=1)


class UniformGater(nn.Module):
    """ the paper's 'Uniform' baseline: exactly round(rate*T) boundaries per row, slots 0 and T-1 among them """

    def __init__(self, config):
        super().__init__()
        self.rate = config.rate

    def forward(self, x, idx, gates=None):
        B, T = idx.shape
        if gates is None:
            u = torch.rand(B, T, device=idx.device)
            u[:, 0] = u[:, -1] = 2.0                           # above any draw: the forced ends are always picked
            top = u.topk(min(T, max(2, round(self.rate * T))), dim=-1).indices
            gates = torch.zeros(B, T, device=idx.device).scatter_(1, top, 1.0)
        probs = torch.full((B, T), self.rate, device=idx.device)
        return probs.logit(), probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u): # no count fixed ahead: Bernoulli(rate), as bernoulli
        p = torch.full_like(u, self.rate)
        return p, (u < p).float()


class BernoulliGater(nn.Module):
    """ i.i.d. Bernoulli(rate) boundaries: as uniform, but the count per row varies (config/method_bernoulli.py) """

    def __init__(self, config):
        super().__init__()
        self.rate = config.rate

    def forward(self, x, idx, gates=None):
        probs = torch.full(idx.shape, self.rate, device=idx.device)
        gates = torch.bernoulli(probs) if gates is None else gates
        return probs.logit(), probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = torch.full_like(u, self.rate)
        return p, (u < p).float()


class EquidistantGater(nn.Module):
    """ a boundary every round(1/rate) bytes: 1 0 0 0 0 1 0 0 0 0 1 ... (config/method_equidistant.py) """

    def __init__(self, config):
        super().__init__()
        self.rate = config.rate

    def forward(self, x, idx, gates=None):
        t = torch.arange(idx.size(1), device=idx.device)
        probs = (t % round(1 / self.rate) == 0).float().expand(idx.shape)
        gates = probs if gates is None else gates
        return CERTAIN * (2 * probs - 1), probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = torch.full_like(u, float(t % round(1 / self.rate) == 0))
        return p, p


def is_space(idx):
    """ idx (B, T) -> True at the WHITESPACE bytes; comparisons, as torch.isin would copy the tuple to the device """
    return (idx == 32) | ((idx >= 9) & (idx <= 13))


class WhitespaceGater(nn.Module):
    """ a boundary at every whitespace byte (SpaceByte-like): a word's chunk vector is the space after it """

    def __init__(self, config):
        super().__init__()

    def forward(self, x, idx, gates=None):
        probs = is_space(idx).float()
        gates = probs if gates is None else gates
        return CERTAIN * (2 * probs - 1), probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = self(x[:, None], byte[:, None])[1][:, 0]
        return p, p


class WordEndsGater(nn.Module):
    """ a control with word boundaries, causal: a gate on each whitespace byte whose previous byte is not whitespace, so
        a chunk ends on the space after a word. word_rate > 0, the rule's own share of gated positions on the corpus,
        moves the expected rate to `rate`: where the rule is silent a random gate with q = (rate - word_rate) /
        (1 - word_rate), or (word_rate > rate) each rule gate kept with probability rate / word_rate """
    onsets = False

    def __init__(self, config):
        super().__init__()
        self.rate, self.word_rate = config.rate, config.word_rate

    def probs(self, idx):
        ws = is_space(idx)
        before = F.pad(ws[:, :-1], (1, 0))                     # whitespace at t-1 (none before the row)
        p = (~ws & before if self.onsets else ws & ~before).float()
        if self.word_rate > self.rate:
            return p * (self.rate / self.word_rate)
        if self.word_rate > 0:
            return p + (1 - p) * (self.rate - self.word_rate) / (1 - self.word_rate)
        return p

    def forward(self, x, idx, gates=None):
        probs = self.probs(idx)
        if gates is None: # the rule alone needs no draw
            gates = (torch.rand(probs.shape, device=idx.device) < probs).float() if self.word_rate > 0 else probs
        return probs.logit().clamp(-CERTAIN, CERTAIN), probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u): # u < p is the rule's own gate where p is 0 or 1
        p = self.probs(torch.stack([byte_prev, byte], 1))[:, 1]
        return p, (u < p).float()


class WordOnsetsGater(WordEndsGater):
    """ a gate on each non-whitespace byte whose previous byte is whitespace: a chunk ends one byte into each word;
        word_rate as in word_ends """
    onsets = True


class LinearGater(nn.Module):
    """ independent gates, p_t = sigmoid(w . x_t + b), trained by REINFORCE; starts at p = rate everywhere """

    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.n_embd, 1)
        nn.init.zeros_(self.proj.weight)                       # the reference starts at p ~ 0.5; we start on target
        nn.init.constant_(self.proj.bias, logit(config.rate))

    def forward(self, x, idx, gates=None):
        logits = self.proj(x).squeeze(-1).float()
        probs = torch.sigmoid(logits)
        gates = torch.bernoulli(probs.detach()) if gates is None else gates
        return logits, probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = torch.sigmoid(self.proj(x).squeeze(-1).float())
        return p, (u < p).float()


class NawrotGater(nn.Module):
    """ Dynamic Token Pooling's boundary predictor: MLP -> relaxed Bernoulli (Gumbel-sigmoid) -> hard 0/1 with a
        straight-through gradient (Nawrot et al.'s binomial prior on the count is train.py's rate_loss='binomial').
        The probs it returns are the relaxed sample s_t, as the paper's run, not sigmoid(z_t), so train.py's rate loss
        holds mean(s) at the target. The hard rate P(s_t > 0.5) = sigmoid(z_t) settles lower, since s is pulled towards
        0.5: with equal logits at temperature 1, mean(s) = 0.2 gives a rate of 0.11 (0.17 at 0.5). The rate loss's
        gradient then reaches the MLP through the noisy sample, as the byte loss's does. """

    def __init__(self, config):
        super().__init__()
        self.temp = config.nawrot_temp
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, config.n_embd), nn.ReLU(), nn.Linear(config.n_embd, 1))

    def forward(self, x, idx, gates=None):
        logits = self.mlp(x).squeeze(-1).float()               # z_t
        if gates is None:
            u = torch.rand_like(logits).clamp(1e-6, 1 - 1e-6)
            logits = (logits + u.log() - (-u).log1p()) / self.temp # logit of the relaxed Bernoulli sample s_t
        probs = torch.sigmoid(logits) # s_t; with prescribed gates nothing is drawn: sigmoid(z_t) = P(s_t > 0.5)
        if gates is None:
            gates = (probs > 0.5).float() - probs.detach() + probs # forward 0/1, backward d s
        return logits, probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u): # s > 1/2 iff logit + logistic noise > 0: p
        p = torch.sigmoid(self.mlp(x).squeeze(-1).float())
        return p, (u < p).float()


class HNetGater(nn.Module):
    """ H-Net's routing module: p_t = (1 - cos(W_q x_{t-1}, W_k x_t)) / 2, p_0 = 1, boundary where p_t > 0.5;
        W_q = W_k = I at init, so a boundary is where consecutive states point apart. Its ratio loss is train.py's
        rate_loss='hnet', computed there: the gater cannot tell padding from bytes, train.py's mask can. """

    def __init__(self, config):
        super().__init__()
        self.rate = config.rate
        self.q_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.k_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        for lin in (self.q_proj, self.k_proj):
            nn.init.eye_(lin.weight)

    def forward(self, x, idx, gates=None):
        x = x.float()
        cos = F.cosine_similarity(self.q_proj(x[:, :-1]), self.k_proj(x[:, 1:]), dim=-1)
        probs = F.pad(((1 - cos) / 2).clamp(0, 1), (1, 0), value=1.0) # (B, T); H-Net says "starts", we say "ends"
        gates = (probs > 0.5).float() if gates is None else gates     # deterministic; the gradient comes via probs
        logits = probs.clamp(1e-6, 1 - 1e-6).logit()
        return logits, probs, gates

    def step(self, x, x_prev, byte, byte_prev, t, hist, u):
        p = self(torch.stack([x_prev, x], 1), None)[1][:, 1]
        return p, (p > 0.5).float()


GATERS = {
    'sequential': SequentialGater,   # the paper's method: gates conditioned on the previous w-1 gates, REINFORCE
    'uniform': UniformGater,         # exactly round(rate*T) random boundaries (the paper's Uniform)
    'bernoulli': BernoulliGater,     # i.i.d. Bernoulli(rate)
    'equidistant': EquidistantGater, # every round(1/rate) bytes
    'whitespace': WhitespaceGater,   # at every whitespace byte
    'word_ends': WordEndsGater,      # at the space after each word (a control)
    'word_onsets': WordOnsetsGater,  # at each word's first byte (a control)
    'linear': LinearGater,           # independent learned gates, REINFORCE
    'nawrot': NawrotGater,           # Gumbel-sigmoid + straight-through (Nawrot et al. 2023)
    'hnet': HNetGater,               # cosine router, trained through the smoothing upsampler (Hwang et al. 2025)
}


# -----------------------------------------------------------------------------
# Downsamplers, stateless modules built without a config.
# (x (B, T, C), gates (B, T), ends (B, S)) -> z (B, S, C), zpos (B, S) RoPE positions of the chunks.
# Chunk k may only summarise bytes <= e_k; padded slots (k >= n_chunks) sit at the end of a row, where the causal
# mid layers keep them from ever reaching a real chunk. For generation, step(x, total, n, t) -> z (B, C), zpos: the
# chunk that closes at byte t, whose state is x, given the sum total (B, C) and count n (B,) of its bytes' states.

class SelectDownsampler(nn.Module):
    """ a chunk is the state of its last byte: z_k = x[e_k] (also H-Net's chunk layer) """

    def forward(self, x, gates, ends):
        return gather(x, ends), ends

    def step(self, x, total, n, t):
        return x, t


class MeanDownsampler(nn.Module):
    """ a chunk is the mean of its bytes: z_k = mean x over (e_{k-1}, e_k] (config/method_mean.py) """

    def forward(self, x, gates, ends):
        B, T, C = x.shape
        ids = chunk_ids(gates)                                 # (B, T), at most n_chunks - 1: the last gate is forced
        z = x.new_zeros(B, ends.size(1), C).scatter_add_(1, ids[..., None].expand(B, T, C), x)
        n = x.new_zeros(B, ends.size(1)).scatter_add_(1, ids, x.new_ones(B, T))
        return z / n.clamp(min=1)[..., None], ends

    def step(self, x, total, n, t):
        return total / n[:, None], t


def nawrot_onehot(ids, n):
    """ ids (B, T) float chunk indices computed from the gates (a cumsum) -> one-hot (B, T, n), 1 - (k - ids_t) at
        k = ids_t: the value is 1 but the gradient reaches the gates through the cumsum (Nawrot et al.'s trick: the
        pooling itself trains the boundary predictor). ids 0 1 1 2, n 3 -> rows 100 010 010 001 """
    f = torch.arange(n, device=ids.device) - ids[..., None]   # (B, T, n), 0 at k = ids_t
    return torch.where(f.detach() == 0, 1 - f, 0.0)


class NawrotDownsampler(nn.Module):
    """ mean pooling with differentiable weights, as the paper's code: chunk k is the mean over (e_{k-1}, e_k],
        placed at the mean position of its bytes (e_{k-1} + 1 + e_k) / 2; no null group (Nawrot et al. put a learned
        one in front, the forced first gate makes BOS that group here) and no chunk dropped """

    def forward(self, x, gates, ends):
        g = gates.float()
        A = nawrot_onehot(g.cumsum(-1) - g, ends.size(1))     # (B, T, S), chunk ids c_t
        A = A / (A.sum(1, keepdim=True) + 1e-9)                # mean over each chunk's bytes
        z = (A.transpose(1, 2) @ x.float()).type_as(x)         # (B, S, C)
        zpos = (F.pad(ends[:, :-1], (1, 0), value=-1) + 1 + ends) / 2 # the mean byte position, <= e_k: causal
        return z, zpos                                         # (the paper's weighted mean of positions, no gradient)

    def step(self, x, total, n, t):
        return total / n[:, None], t - (n - 1) / 2


DOWNSAMPLERS = {
    'select': SelectDownsampler,  # the state at the chunk's last byte (the paper's method)
    'mean': MeanDownsampler,      # the mean over the chunk
    'nawrot': NawrotDownsampler,  # the mean, with weights differentiable in the gates (Nawrot et al.)
    'hnet': SelectDownsampler,    # H-Net's chunk layer is a select of the boundary bytes
}


# -----------------------------------------------------------------------------
# Upsamplers, stateless as the downsamplers.
# (x, z, zo, gates, probs, ends) -> y (B, T, C), with x the down layers' output, z the downsampler's
# output and zo the mid layers' output. The no-leak rule: byte t reads only chunks that closed at or before t.
# For generation, y_t = x_t + r, where r = read(z, zo, p, r) (B, C) is updated whenever a chunk closes (its z, zo and
# gate_probs p at its last byte; r the value before).

class AddUpsampler(nn.Module):
    """ y_t = x_t + zo[u_t], u_t = read_ids: the latest chunk that closed at or before t """

    def forward(self, x, z, zo, gates, probs, ends):
        return x + gather(zo, read_ids(gates))

    def read(self, z, zo, p, r):
        return zo


class DeviationUpsampler(nn.Module):
    """ y_t = x_t + (zo - z)[u_t]: only what the mid layers changed is added back """

    def forward(self, x, z, zo, gates, probs, ends):
        return x + gather(zo - z, read_ids(gates))

    def read(self, z, zo, p, r):
        return zo - z


def ema_scan(z, p):
    """ z_bar_k = p_k z_k + (1 - p_k) z_bar_{k-1}, z_bar_{-1} = 0, for z (B, S, C), p (B, S), as one matmul:
        z_bar_k = sum_{j<=k} p_j z_j prod_{j<i<=k} (1 - p_i); in fp32 (the reference runs it in bf16) """
    S = p.size(1)
    with torch.autocast(z.device.type, enabled=False): # or autocast would run the matmul in bf16
        below = torch.ones(S, S, dtype=torch.bool, device=p.device).tril(-1) # i > j
        logq = torch.log1p(-p.float())[:, :, None].expand(-1, S, S)         # (B, S, S), [i, j] = log(1 - p_i)
        seg = logq.masked_fill(~below, 0).cumsum(1)                        # [k, j] = sum_{j<i<=k} log(1 - p_i)
        seg = seg.masked_fill(torch.ones_like(below).triu(1), float('-inf')) # j > k: no weight
        W = seg.exp() * p.float()[:, None, :]                              # directly: no cancellation, exact at p=1
        return (W @ z.float()).type_as(z)


class HNetUpsampler(nn.Module):
    """ H-Net's dechunk: smooth the chunk outputs with an EMA gated by the boundary probabilities, hand each byte its
        latest chunk, scale by the straight-through confidence (1 forward, d confidence backward), add x """

    def forward(self, x, z, zo, gates, probs, ends):
        p_chunk = torch.gather(probs, 1, ends).clamp(1e-4, 1 - 1e-4) # (B, S), p at each chunk's gate byte
        y = gather(ema_scan(zo, p_chunk), read_ids(gates))
        conf = torch.where(gates > 0, probs, 1 - probs)        # confidence in the decision taken at t
        ste = 1 + conf - conf.detach()                         # value 1, gradient of conf
        return x + y * ste[..., None].to(y.dtype) # x itself, as the paper's code; H-Net's own adds a zero-initialised
                                                  # residual_proj(x), so its up layers start with no byte-level skip

    def read(self, z, zo, p, r): # one step of the EMA; the confidence is 1 in value
        p = p.clamp(1e-4, 1 - 1e-4)[:, None]
        return p * zo + (1 - p) * r


UPSAMPLERS = {
    'add': AddUpsampler,             # x + the latest chunk's mid output (the paper's method)
    'deviation': DeviationUpsampler, # x + what the mid layers changed in the latest chunk
    'nawrot': AddUpsampler,          # Nawrot's read, as the paper's code shifts it: its one-hot is divided by its sum
                                     # (+1e-9), value 1 and gradient 0, so it is add; only the pooling trains the gates
    'hnet': HNetUpsampler,           # EMA-smoothed chunks, straight-through confidence (so any gater's probs get
                                     # gradient from the byte loss through it), x added directly
}


# -----------------------------------------------------------------------------
# The U-Net

class ByteUNet(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        nn.init.normal_(self.wte.weight)                       # N(0, 1), no sqrt(D) scale, as the paper's code
        self.down = nn.ModuleList([Block(config, config.window, 1) for _ in range(config.n_down)])
        self.mid = nn.ModuleList([Block(config, 0, 4) for _ in range(config.n_mid)])
        self.up = nn.ModuleList([Block(config, config.window, 1) for _ in range(config.n_up)])
        self.gater = GATERS[config.gater](config)              # only the chosen variants are built
        self.downsampler = DOWNSAMPLERS[config.downsampler]()
        self.upsampler = UPSAMPLERS[config.upsampler]()
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size) # no final norm before either head, as the paper
        self.early_head = nn.Linear(config.n_embd, config.vocab_size)
        self.early_head.load_state_dict(self.lm_head.state_dict()) # starts as a copy, trained separately

    def get_num_params(self, non_embedding=False):
        n = sum(p.numel() for p in self.parameters())
        return n - self.wte.weight.numel() if non_embedding else n

    def forward(self, idx, gates=None, cache=None):
        """ cache: {block: KVCache}, filled by generate's prefill; the output then also holds z, zo and ends """
        B, T = idx.shape
        kv = {} if cache is None else cache
        assert T <= self.config.block_size, f"row of {T} bytes, block_size is {self.config.block_size}"
        hd = self.config.n_embd // self.config.n_head
        pos = torch.arange(T, device=idx.device)
        cos, sin = rope(pos, hd)
        x = self.wte(idx)                                      # (B, T, C)
        for block in self.down:
            x = block(x, cos, sin, kv.get(block))
        early_logits = self.early_head(x)                      # (B, T, vocab), the early exit
        gate_logits, gate_probs, g = self.gater(x, idx, gates)
        forced = (pos == 0) | (pos == T - 1)                   # the row's slots 0 and T-1 (padding in a short row)
        g = torch.where(forced, 1.0, g.float())                # still carries nawrot's straight-through gradient
        gate_probs = torch.where(forced, 1.0, gate_probs)      # constants there: no gradient, log pi = 0
        gate_logits = torch.where(forced, CERTAIN, gate_logits)
        ends, n_chunks = chunk_ends(g.detach(), torch.compiler.is_compiling()) # (B, S)
        z, zpos = self.downsampler(x, g, ends)                 # (B, S, C), (B, S)
        zcos, zsin = rope(zpos, hd)
        zo = z
        for block in self.mid:
            zo = block(zo, zcos, zsin, kv.get(block))
        y = self.upsampler(x, z, zo, g, gate_probs, ends)      # (B, T, C)
        for block in self.up:
            y = block(y, cos, sin, kv.get(block))
        logits = self.lm_head(y)
        out = dict(logits=logits, early_logits=early_logits, gates=g.detach().long(), gate_logits=gate_logits,
                   gate_probs=gate_probs, n_chunks=n_chunks)
        return out if cache is None else {**out, 'z': z, 'zo': zo, 'ends': ends}

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        """ AdamW; decay on matrices and the embedding, none on norms and biases (nanoGPT's split; the paper's code
            decays everything with 0.01) """
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': weight_decay},
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type in ('cuda', 'cpu'))

    def flops_per_byte(self, rate=None):
        """ training FLOPs per byte: 6 per weight and byte at byte level, 6 per mid weight and chunk (`rate` chunks per
            byte: the realised rate of the step if given, else the configured one), plus attention scores
            (12 * layers * D * keys seen, a window at byte level) """
        cfg = self.config
        rate = cfg.rate if rate is None else rate
        n_mid = sum(p.numel() for p in self.mid.parameters())
        n_byte = self.get_num_params(non_embedding=True) - n_mid
        T, S = cfg.block_size, cfg.block_size * rate
        attn_byte = 12 * (cfg.n_down + cfg.n_up) * cfg.n_embd * min(cfg.window or T, T)
        attn_mid = 12 * cfg.n_mid * cfg.n_embd * S / 2 * rate # causal: a chunk sees S/2 chunks on average
        return 6 * n_byte + 6 * n_mid * rate + attn_byte + attn_mid

    def estimate_mfu(self, bytes_per_sec, rate=None, peak_flops=989e12):
        """ model flops utilization at `rate` chunks per byte against a peak (default: H100 bf16 dense, 989 TFLOP/s;
            gpu_peak_flops looks one up by the GPU's name) """
        return self.flops_per_byte(rate) * bytes_per_sec / peak_flops


# -----------------------------------------------------------------------------
# Generation: a KV cache per layer, one byte at a time

class KVCache:
    """ generation: the keys and values (B, L, H, d) one attention layer has seen, RoPE applied, and mask (B, L), the
        slots a later query may read. A byte layer keeps its last window-1 positions; a mid layer every chunk slot, one
        per step in which some row's gate fired (generate unmasks it in those rows only) """

    def __init__(self, window):
        self.window, self.k, self.v, self.mask = window, None, None, None

    def attend(self, q, k, v, softcap):
        """ the prefill (empty cache): the usual causal attention over its T positions, all kept; then one position at
            a time, q, k, v (B, 1, H, d), against the cache and itself """
        if self.k is None:
            self.k, self.v, self.mask = k, v, k.new_ones(k.shape[:2], dtype=torch.bool)
            return attention(q, k, v, self.window, softcap)
        if self.window: # a byte layer: the window-1 positions before this one
            self.k, self.v, self.mask = (t[:, max(0, t.size(1) - self.window + 1):] for t in (self.k, self.v, self.mask))
        self.k, self.v = torch.cat([self.k, k], 1), torch.cat([self.v, v], 1)
        self.mask = F.pad(self.mask, (0, 1), value=True)
        mask = torch.zeros(self.mask.shape, device=q.device).masked_fill(~self.mask, float('-inf'))[:, None, None]
        p = attention_weights(q.transpose(1, 2), self.k.transpose(1, 2), softcap, mask) # (B, H, 1, L)
        return (p.type_as(v) @ self.v.transpose(1, 2)).transpose(1, 2)


def sample_byte(logits, u, temperature=1.0, top_k=None):
    """ a byte per row from logits (B, V): softmax(logits / temperature) over the top_k, by inverse CDF at the row's
        uniform draw u (B,), so that a row's choice does not depend on the rest of the batch """
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, -1:], -float('inf'))
    cdf = F.softmax(logits.float() / temperature, dim=-1).cumsum(-1)
    return (cdf <= u[:, None] * cdf[:, -1:]).sum(-1).clamp(max=logits.size(-1) - 1) # a zero-probability byte never


@torch.inference_mode() # no_grad with less work per op (a step is ~200 small ops); clone() results for autograd
def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, seeds=None):
    """ sample max_new_tokens bytes after the prompts idx (B, T0) -> new (B, max_new_tokens) and gates (B, T0 +
        max_new_tokens): gates[:, t] the gate byte t of cat(idx, new) was generated with, drawn once, from the forward's
        distribution in the model's mode (eval, as sample.py: the sequential gater uncapped; Bernoulli(rate) for
        uniform). One row, the prompt BOS a b, then c and d made; P, a placeholder byte (id 256), always ends the row:
            bytes      gates
            BOS a b P  1 0 1 1   prefill: a's and b's gates drawn (gater.step); P takes the forward's forced last
                                 gate, so b keeps its draw. One forward, these gates prescribed, fills each layer's
                                 KVCache; the byte layers drop P's keys, the mid layers mask P's chunk (and the
                                 padding of rows with fewer chunks): chunk mask 1 1 0
            + c        0         the down and up layers, one position each: y = x + the read of chunk 1 (a b)
            + d        1         and one mid step, its chunk slot kept in the rows whose gate fired: 1 1 0 1
        The logits after each byte are those of one forward over the row so far and P, these gates prescribed.
        Restart: a row holds at most block_size - 1 bytes (block_size with P). The byte that would exceed it makes the
        row BOS + its last block_size // 2 - 1 bytes, their gates kept (BOS's forced, as a training row that starts
        mid-document), prefilled again; a longer prompt starts so (gate 0 for the bytes never read).
        Each row draws from its own generator (seeds: B ints, by default drawn from torch's RNG), two uniforms per
        byte (its gate, the next byte), so a row generates the same alone or in any batch. """
    cfg, (B, T0), dev = self.config, idx.shape, idx.device
    N, hd, w, keep = max_new_tokens, cfg.n_embd // cfg.n_head, cfg.filter_size, cfg.block_size // 2
    seeds = torch.randint(2 ** 62, (B,)).tolist() if seeds is None else seeds
    gens = [torch.Generator(dev).manual_seed(int(s)) for s in seeds]
    u = torch.stack([torch.rand(T0 + N, 2, generator=g, device=dev) for g in gens]) # (B, T0+N, 2): gate, next byte
    seq, gates = F.pad(idx, (0, N)), torch.zeros(B, T0 + N, device=dev) # the bytes, the gates decided so far
    bos = torch.full_like(idx[:, :1], BOS) # a restarted row's first byte, and P
    cache, state = {}, {} # {block: KVCache}; the current row's ids and gates, its last logits, the variants' states
    rot = rope(torch.arange(cfg.block_size, device=dev), hd) # cos, sin of every byte position

    def prefill(row, row_gates, u_gate):
        """ row (B, L), the gates row_gates (B, K) of its first K bytes (the rest drawn here with u_gate (B, L)) """
        L = row.size(1)
        cos, sin = rot[0][:L], rot[1][:L]
        x = self.wte(row)
        for block in self.down: # the byte states the gates are drawn from
            x = block(x, cos, sin)
        for t in range(row_gates.size(1), L):
            hist = F.pad(row_gates, (w - 1, 0))[:, t:]
            g = torch.ones(B, device=dev) if t == 0 else self.gater.step(x[:, t], x[:, t - 1], row[:, t], row[:, t - 1],
                                                                          t, hist, u_gate[:, t])[1]
            row_gates = torch.cat([row_gates, g[:, None]], 1)
        cache.clear()
        cache.update({b: KVCache(b.attn.window) for b in (*self.down, *self.mid, *self.up)})
        out = self(torch.cat([row, bos], 1), gates=F.pad(row_gates, (0, 1), value=1.0), cache=cache) # row, P
        closed = row_gates.sum(-1).long() # (B,) the chunks closed at real bytes
        for block, kv in cache.items(): # byte layers drop P's keys, mid layers mask P's chunk and the padding
            kv.k, kv.v, kv.mask = (kv.k, kv.v, torch.arange(kv.k.size(1), device=dev) < closed[:, None]) \
                if block in self.mid else (kv.k[:, :-1], kv.v[:, :-1], kv.mask[:, :-1])
        p_end = torch.gather(out['gate_probs'], 1, out['ends']) # at each chunk's last byte
        read = x.new_zeros(B, cfg.n_embd)
        for k in range(int(closed.max())): # what the bytes add: chunk by chunk, as the steps will go on
            read = torch.where((k < closed)[:, None],
                               self.upsampler.read(out['z'][:, k], out['zo'][:, k], p_end[:, k], read), read)
        in_open = (chunk_ids(row_gates) == closed[:, None]).to(x.dtype)[..., None] # the bytes after the last gate
        state.update(row=row, row_gates=row_gates, logits=out['logits'][:, L - 1], x_prev=x[:, -1], read=read,
                     total=(x * in_open).sum(1), count=in_open.sum((1, 2)))

    def step(byte, u_gate):
        """ the next byte (B,) at row position t: its gate drawn with u_gate (B,), then the logits after it """
        t = state['row'].size(1)
        cos, sin = rot[0][t:t + 1], rot[1][t:t + 1]
        x = self.wte(byte[:, None])
        for block in self.down:
            x = block(x, cos, sin, cache[block])
        x = x[:, 0]
        hist = F.pad(state['row_gates'], (w - 1, 0))[:, t:]
        p, g = self.gater.step(x, state['x_prev'], byte, state['row'][:, -1], t, hist, u_gate)
        total, count, read, fired = state['total'] + x, state['count'] + 1, state['read'], g > 0
        if fired.any(): # a chunk closes in some row: one mid step at RoPE position t, kept in those rows only
            z, zpos = self.downsampler.step(x, total, count, t)
            zcos, zsin = (cos, sin) if isinstance(zpos, int) else rope(zpos[:, None], hd) # nawrot's: (B, 1, hd)
            zo = z[:, None]
            for block in self.mid:
                zo = block(zo, zcos, zsin, cache[block])
                cache[block].mask[:, -1] = fired
            read = torch.where(fired[:, None], self.upsampler.read(z, zo[:, 0], p, read), read)
            total, count = torch.where(fired[:, None], 0.0, total), torch.where(fired, 0.0, count)
        y = (x + read)[:, None]
        for block in self.up:
            y = block(y, cos, sin, cache[block])
        state.update(row=torch.cat([state['row'], byte[:, None]], 1), logits=self.lm_head(y)[:, 0],
                     row_gates=torch.cat([state['row_gates'], g[:, None]], 1), x_prev=x, read=read, total=total,
                     count=count)

    def restart(n, known): # the row becomes BOS + the last keep-1 of the first n bytes, the gates before `known` kept
        first = n - keep + 1
        prefill(torch.cat([bos, seq[:, first:n]], 1), F.pad(gates[:, first:known], (1, 0), value=1.0),
                F.pad(u[:, first:n, 0], (1, 0)))
        gates[:, first:n] = state['row_gates'][:, 1:]

    if T0 <= cfg.block_size - 1:
        prefill(idx, gates[:, :0], u[:, :T0, 0])
        gates[:, :T0] = state['row_gates']
    else:
        restart(T0, T0 - keep + 1)
    for n in range(T0, T0 + N): # byte n, from the logits at byte n-1
        seq[:, n] = sample_byte(state['logits'][:, :256], u[:, n - 1, 1], temperature, top_k) # bytes only, never BOS
        if state['row'].size(1) == cfg.block_size - 1:
            restart(n + 1, n)
        else:
            step(seq[:, n], u[:, n, 0])
            gates[:, n] = state['row_gates'][:, -1]
    cache.clear()
    return seq[:, T0:], gates.long()


ByteUNet.generate = generate # a method, as dev/DESIGN.md's model.generate(...); defined here, beside its parts


# -----------------------------------------------------------------------------
# The training objective: the REINFORCE returns, the rate losses, the next-byte loss

def discounted_returns(r, gamma, block=64):
    """ G[:, t] = sum_k gamma**k * r[:, t+k] (no host sync, no scipy): a matmul inside blocks of 64 positions, then
        each block adds the discounted return at the start of the next, O(T * 64) not O(T^2):
        r 1 0 0 2, gamma 0.5 -> G 1.25 0.5 1 2 """
    T = r.size(-1)
    L = min(block, T)
    n = -(-T // L)
    def decay(m, g):                                           # (m, m): [t, k] = g**(k-t) where k >= t, else 0
        t = torch.arange(m, device=r.device)
        lag = t[None, :] - t[:, None]
        return torch.where(lag >= 0, g ** lag.clamp(min=0).to(r.dtype), 0.0)
    G = F.pad(r, (0, n * L - T)).unflatten(-1, (n, L)) @ decay(L, gamma).T # (..., n, L), within each block
    first = G[..., 0] @ decay(n, gamma ** L).T                 # (..., n), the returns at each block's first position
    carry = F.pad(first[..., 1:], (0, 1))[..., None]           # the next block's, 0 after the last
    G = G + carry * gamma ** (L - torch.arange(L, device=r.device)).to(r.dtype)
    return G.flatten(-2)[..., :T]


def hnet_ratio_loss(gates, probs, rate, mask=None):
    """ H-Net's load-balancing loss N/(N-1) * ((1-F)(1-P) + (N-1) F P), N = 1/rate (H-Net writes G for P); minimum 1
        at F = P = rate """
    mask = torch.ones_like(probs) if mask is None else mask.to(probs.dtype)
    N = 1 / rate
    f = ((gates.detach() * mask).sum() / mask.sum())           # F: fraction of bytes that end a chunk, no gradient
    p = (probs * mask).sum() / mask.sum()                      # P: mean boundary probability
    return N / (N - 1) * ((1 - f) * (1 - p) + (N - 1) * f * p)


def binomial_prior(gates, rate, mask):
    """ Nawrot et al.'s prior on the boundary count: -log Binomial(n; N, rate) / N per row, averaged over rows, with
        n the gates and N the real bytes of the row (mask). Differentiable in gates (lgamma), so a straight-through
        gate gets a gradient; minimal at the binomial's mode floor((N+1) rate): N 10, rate 0.2 -> n = 2 """
    mask = mask.to(gates.dtype)
    n, N = (gates * mask).sum(-1), mask.sum(-1)
    log_p = (torch.lgamma(N + 1) - torch.lgamma(n + 1) - torch.lgamma(N - n + 1)
             + n * math.log(rate) + (N - n) * math.log(1 - rate))
    return -(log_p / N.clamp(min=1)).mean()


def next_byte_nll(logits, idx):
    """ nats of predicting idx[:, t+1] at position t, (B, T-1), in fp32 """
    return F.cross_entropy(logits[:, :-1].float().transpose(1, 2), idx[:, 1:], reduction='none')


# -----------------------------------------------------------------------------
# Boundary metrics: one definition for train.py, eval.py, sample.py and the experiments

def boundary_counts(idx, gates, mask):
    """ sums over the decided positions of whole rows idx (B, T), BOS at 0: the real ones (mask (B, T) bool) but 0 and
        T-1, whose gates are forced, nobody's decision -> (6,) int64, exact on any device (the callers sum them in
        float64 or int64): [gates, positions, gates on whitespace bytes, whitespace bytes, whitespace bytes with a gate
        on them or on the byte just before, gates on a word edge (a whitespace byte, or the real byte just before one)].
        A word ends either at its last byte or at the space after it:
            row       BOS h i ' ' y o u ' ' a l l
            gates     1   0 1  0  0 1 0  1  0 0 1
            -> [3, 9, 1, 2, 2, 2]: positions 1..9, gates 2 5 7, whitespace 3 7 (gated 7), edges 2 3 6 7 (gated 2 7) """
    t = torch.arange(idx.size(1), device=idx.device)
    decided = mask & (t > 0) & (t < idx.size(1) - 1)           # (B, T): the forced ends are not counted
    space = is_space(idx) & mask                               # the text around a decision: every real byte
    ws, g = space & decided, (gates > 0) & decided
    g_before = F.pad(g[:, :-1], (1, 0))                        # the decided gate of the byte before t
    ws_after = F.pad(space[:, 1:], (0, 1))                     # whitespace at t+1 (none after the row)
    return torch.stack([g.sum(), decided.sum(), (g & ws).sum(), ws.sum(), (ws & (g | g_before)).sum(),
                        (g & (ws | ws_after)).sum()]).long()


def boundary_metrics(counts):
    """ boundary_counts (summed over any number of batches) -> the logged metrics, nan where nothing was counted:
        rate               gates / positions                                  (the share of bytes that end a chunk)
        ws_boundary        gated whitespace / whitespace          (the paper's: recall of the spaces, gate ON them)
        word_boundary      whitespace gated on or just before / whitespace     (recall of word edges, either side)
        boundary_precision gates on a word edge / gates                   (how many chunk ends are word-aligned)
        [3, 9, 1, 2, 2, 2] -> rate 3/9, ws_boundary 1/2, word_boundary 2/2, boundary_precision 2/3 """
    g, n, g_ws, n_ws, ws_hit, g_edge = (float(v) for v in counts.tolist())
    return dict(rate=g / n if n else math.nan, ws_boundary=g_ws / n_ws if n_ws else math.nan,
                word_boundary=ws_hit / n_ws if n_ws else math.nan, boundary_precision=g_edge / g if g else math.nan)


# -----------------------------------------------------------------------------
# bytes in and out (checkpoints, BPE guidance, devices and CPU threads: common.py)

def encode(text):
    """ 'hi' -> [256, 104, 105]: BOS, then the UTF-8 bytes """
    return [BOS] + list(text.encode('utf-8'))


def decode(ids):
    """ bytes back to text, specials dropped, invalid UTF-8 replaced """
    return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode('utf-8', errors='replace')
