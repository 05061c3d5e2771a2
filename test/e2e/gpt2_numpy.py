"""Reference GPT-2 forward pass in plain NumPy (float64), used as a test oracle.

Independent of the compiler under test: reads Hugging Face-style GPT-2
parameters from a safetensors file (parsed by hand in npy_tools.py), runs the
published GPT-2 architecture (pre-LN blocks, causal multi-head attention,
tanh-GELU MLP, final LayerNorm, LM head tied to wte) and writes logits
(and optionally the mean cross-entropy loss) as float32 .npy files.

Usage:
  /usr/bin/python3 gpt2_numpy.py --params P.safetensors --tokens T.npy --heads NH \
      [--targets Y.npy] --out-logits L.npy [--out-loss LOSS.npy]
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npy_tools import read_safetensors  # noqa: E402

LN_EPS = 1e-5
LAYER_TENSORS = {  # suffix -> shape as a function of H
    "ln_1.weight": lambda H: (H,), "ln_1.bias": lambda H: (H,),
    "attn.c_attn.weight": lambda H: (H, 3 * H), "attn.c_attn.bias": lambda H: (3 * H,),
    "attn.c_proj.weight": lambda H: (H, H), "attn.c_proj.bias": lambda H: (H,),
    "ln_2.weight": lambda H: (H,), "ln_2.bias": lambda H: (H,),
    "mlp.c_fc.weight": lambda H: (H, 4 * H), "mlp.c_fc.bias": lambda H: (4 * H,),
    "mlp.c_proj.weight": lambda H: (4 * H, H), "mlp.c_proj.bias": lambda H: (H,),
}


class OracleError(Exception):
    pass


def layer_norm(x, weight, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased variance
    return (x - mean) / np.sqrt(var + LN_EPS) * weight + bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def attention(a, p, n_heads):
    """Causal multi-head self-attention on a = LN1(h), shape [B, S, H]."""
    B, S, H = a.shape
    d = H // n_heads
    qkv = a @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"]       # [B, S, 3H]
    q, k, v = np.split(qkv, 3, axis=-1)                              # each [B, S, H]

    def heads(x):  # [B, S, H] -> [B, NH, S, d]; column j belongs to head j // d
        return x.reshape(B, S, n_heads, d).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)                # [B, NH, S, S]
    causal = np.tril(np.ones((S, S), dtype=bool))                    # i attends to j <= i
    scores = np.where(causal, scores, -np.inf)
    o = softmax(scores) @ v                                          # [B, NH, S, d]
    o = o.transpose(0, 2, 1, 3).reshape(B, S, H)                     # merge heads
    return o @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"]


def mlp(m, p):
    m = gelu_tanh(m @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"])
    return m @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]


def load_params(path):
    """Return (globals dict, list of per-layer dicts), all float64, shapes checked."""
    raw = read_safetensors(path)
    for name in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"):
        if name not in raw:
            raise OracleError(f"required tensor '{name}' missing from {path}")
    V, H = raw["wte.weight"].shape
    idx = {int(m.group(1)) for n in raw if (m := re.match(r"h\.(\d+)\.", n))}
    n_layers = max(idx) + 1 if idx else 0
    expected = {"wte.weight": (V, H), "wpe.weight": (raw["wpe.weight"].shape[0], H),
                "ln_f.weight": (H,), "ln_f.bias": (H,)}
    for i in range(n_layers):
        for suffix, shape in LAYER_TENSORS.items():
            expected[f"h.{i}.{suffix}"] = shape(H)
    for name, shape in expected.items():
        if name not in raw:
            raise OracleError(f"required tensor '{name}' missing from {path}")
        if tuple(raw[name].shape) != tuple(shape):
            raise OracleError(f"tensor '{name}' has shape {list(raw[name].shape)}, "
                              f"expected {list(shape)}")
    glob = {n: raw[n].astype(np.float64) for n in ("wte.weight", "wpe.weight",
                                                  "ln_f.weight", "ln_f.bias")}
    layers = [{s: raw[f"h.{i}.{s}"].astype(np.float64) for s in LAYER_TENSORS}
              for i in range(n_layers)]
    return glob, layers


def gpt2_forward(glob, layers, tokens, n_heads):
    """tokens int [B, S] -> logits float64 [B, S, V]."""
    S = tokens.shape[1]
    h = glob["wte.weight"][tokens] + glob["wpe.weight"][:S]
    for p in layers:
        h = h + attention(layer_norm(h, p["ln_1.weight"], p["ln_1.bias"]), p, n_heads)
        h = h + mlp(layer_norm(h, p["ln_2.weight"], p["ln_2.bias"]), p)
    h = layer_norm(h, glob["ln_f.weight"], glob["ln_f.bias"])
    return h @ glob["wte.weight"].T                                  # tied LM head


def cross_entropy(logits, targets):
    """Mean over all B*S positions of -log_softmax(logits)[target] (no shift)."""
    lp = log_softmax(logits)
    picked = np.take_along_axis(lp, targets[..., None], axis=-1)[..., 0]
    return -picked.mean()


def load_ids(path, what, B_S, V):
    ids = np.load(path)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise OracleError(f"{what} {path}: expected a 2-D integer array, got "
                          f"{ids.dtype} {list(ids.shape)}")
    if B_S is not None and ids.shape != B_S:
        raise OracleError(f"{what} shape {list(ids.shape)} != tokens shape {list(B_S)}")
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise OracleError(f"{what} {path}: ids out of range [0, {V})")
    return ids.astype(np.int64)


def main(argv=None):
    ap = argparse.ArgumentParser(description="NumPy GPT-2 reference forward (float64).")
    ap.add_argument("--params", required=True, help="safetensors file (HF GPT-2 names)")
    ap.add_argument("--tokens", required=True, help="int64 .npy [B, S]")
    ap.add_argument("--heads", type=int, required=True, help="number of attention heads")
    ap.add_argument("--targets", help="int64 .npy [B, S], already aligned (no shift)")
    ap.add_argument("--out-logits", required=True, help="float32 .npy [B, S, V]")
    ap.add_argument("--out-loss", help="0-d float32 .npy (needs --targets)")
    args = ap.parse_args(argv)
    try:
        if args.out_loss and not args.targets:
            raise OracleError("--out-loss requires --targets")
        glob, layers = load_params(args.params)
        V, H = glob["wte.weight"].shape
        P = glob["wpe.weight"].shape[0]
        if args.heads <= 0 or H % args.heads:
            raise OracleError(f"hidden size {H} not divisible by --heads {args.heads}")
        tokens = load_ids(args.tokens, "tokens", None, V)
        if tokens.shape[1] > P:
            raise OracleError(f"sequence length {tokens.shape[1]} > positions {P}")
        logits = gpt2_forward(glob, layers, tokens, args.heads)
        np.save(args.out_logits, logits.astype(np.float32))
        if args.targets:
            targets = load_ids(args.targets, "targets", tokens.shape, V)
            loss = cross_entropy(logits, targets)
            if args.out_loss:
                np.save(args.out_loss, np.array(loss, dtype=np.float32))
            print(f"gpt2_numpy: layers {len(layers)} loss {loss:.6f}")
    except (OracleError, OSError, ValueError) as e:
        print(f"gpt2_numpy: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
