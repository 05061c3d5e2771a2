"""Checks every op of the `graph` dialect numerically against NumPy.

For each case in CASES it writes a one-op model (or a tiny chain, e.g. a
constant feeding an add) as a `func.func` with `graph.input` arguments and one
`graph.output = "out"` result, writes fresh seeded random inputs as .npy,
evaluates the model with the compiler's reference evaluator
(`sbpc run MODEL.mlir --input NAME=FILE.npy ... --output-dir DIR`) and compares
DIR/out.npy with a float64 NumPy computation of the op's documented semantics
(dialects/Graph/IR/GraphOps.td). The error is max|actual - expected| divided by
max|expected|; -inf entries of the expectation must be -inf in the result.

Usage:
  /usr/bin/python3 check_ops.py --sbpc build/bin/sbpc --workdir /tmp/ops [--seed N]

Prints one line per case and finally `check_ops: N passed, M failed`; exits 1
if any case failed (a non-zero exit of sbpc fails its case).
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

RTOL = 1e-5
RTOL_MATMUL = 1e-4


# Model text helpers

def T(a):
    """MLIR tensor type of an array (or of a shape tuple, as f32)."""
    shape, dt = (a, "f32") if isinstance(a, tuple) else (
        a.shape, "i64" if a.dtype == np.int64 else "f32")
    return "tensor<" + "".join(f"{d}x" for d in shape) + dt + ">"


def sig(ins, out):
    """functional-type `(t1, t2) -> t3` for operand arrays and result shape."""
    return "(" + ", ".join(T(a) for a in ins) + ") -> " + T(tuple(out.shape))


def model(inputs, body, out):
    """A func.func whose last body line defines %r, returned as output "out"."""
    args = ", ".join(f'%{n}: {T(a)} {{graph.input = "{n}"}}' for n, a in inputs.items())
    rt = T(tuple(out.shape))
    lines = "".join(f"  {line}\n" for line in body)
    return (f'func.func @m({args}) -> ({rt} {{graph.output = "out"}}) {{\n'
            f"{lines}  return %r : {rt}\n}}\n")


def dense(a):
    """dense<...> literal that round-trips float32/int64 values exactly."""
    if a.ndim == 0:
        return repr(a.item())
    return "[" + ", ".join(dense(x) for x in a) + "]"


# Random inputs and NumPy references (float64)

def uni(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def away0(rng, shape, lo=0.5, hi=2.0):
    """Random signs, magnitudes in [lo, hi]: safe denominators."""
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(lo, hi, size=shape)).astype(np.float32)


def f64(a):
    return a.astype(np.float64)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def log_softmax(x, axis):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


# Case builders: each returns make(rng) -> (inputs, body, expected, rtol)

def unary(op, fn, lo=-2.0, hi=2.0, shape=(3, 4, 5)):
    def make(rng):
        x = uni(rng, shape, lo, hi)
        y = fn(f64(x))
        return {"x": x}, [f"%r = graph.{op} %x : {T(x)}"], y, RTOL
    return make


def binary(op, fn, lshape, rshape):
    def make(rng):
        a = uni(rng, lshape)
        b = away0(rng, rshape) if op == "div" else uni(rng, rshape)
        y = fn(f64(a), f64(b))
        return {"a": a, "b": b}, [f"%r = graph.{op} %a, %b : {sig([a, b], y)}"], y, RTOL
    return make


def matmul(lshape, rshape, tl=False, tr=False):
    def make(rng):
        a, b = uni(rng, lshape), uni(rng, rshape)
        y = np.matmul(np.swapaxes(f64(a), -1, -2) if tl else f64(a),
                      np.swapaxes(f64(b), -1, -2) if tr else f64(b))
        flags = (" transpose_lhs" if tl else "") + (" transpose_rhs" if tr else "")
        return ({"a": a, "b": b}, [f"%r = graph.matmul %a, %b{flags} : {sig([a, b], y)}"],
                y, RTOL_MATMUL)
    return make


def one_input(op, shape, attrs, fn):
    """`%r = graph.OP %x ATTRS : (x) -> y` with y = fn(x)."""
    def make(rng):
        x = uni(rng, shape)
        y = fn(f64(x))
        return {"x": x}, [f"%r = graph.{op} %x{attrs} : {sig([x], y)}"], y, RTOL
    return make


def reduce(op, fn, dims, keepdims):
    attrs = f" dims {dims}" + (" keepdims" if keepdims else "")
    return one_input(op, (3, 4, 5), attrs, lambda x: fn(x, axis=tuple(dims), keepdims=keepdims))


def softmax_like(op, axis, shape=(2, 3, 5)):
    def make(rng):
        x = uni(rng, shape, -4.0, 4.0)
        y = log_softmax(f64(x), axis)
        y = np.exp(y) if op == "softmax" else y
        return {"x": x}, [f"%r = graph.{op} %x axis = {axis} : {T(x)}"], y, RTOL
    return make


def constant(rng):
    c, x = uni(rng, (2, 3)), uni(rng, (2, 3))
    body = [f"%c = graph.constant dense<{dense(c)}> : {T(c)}",
            f"%r = graph.add %c, %x : {sig([c, x], c)}"]
    return {"x": x}, body, f64(c) + f64(x), RTOL


def constant_ids(rng):
    """An i64 constant (non-splat) feeding an embedding."""
    table, ids = uni(rng, (6, 3)), rng.integers(0, 6, size=(2, 3)).astype(np.int64)
    y = f64(table)[ids]
    body = [f"%c = graph.constant dense<{dense(ids)}> : {T(ids)}",
            f"%r = graph.embedding %t, %c : {sig([table, ids], y)}"]
    return {"t": table}, body, y, RTOL


def layer_norm(rng):
    x, g, b = uni(rng, (2, 3, 8), -3.0, 3.0), uni(rng, (8,)), uni(rng, (8,))
    x64 = f64(x)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + 1e-5) * f64(g) + f64(b)
    body = [f"%r = graph.layer_norm %x, %g, %b eps = 1.0e-05 : {sig([x, g, b], y)}"]
    return {"x": x, "g": g, "b": b}, body, y, RTOL


def reshape_ids(rng):
    """reshape of int64 ids [6] -> [2, 3], checked through an embedding."""
    table, ids = uni(rng, (5, 4)), rng.integers(0, 5, size=(6,)).astype(np.int64)
    ids2 = ids.reshape(2, 3)
    y = f64(table)[ids2]
    body = [f"%i = graph.reshape %ids : ({T(ids)}) -> {T(ids2)}",
            f"%r = graph.embedding %t, %i : {sig([table, ids2], y)}"]
    return {"t": table, "ids": ids}, body, y, RTOL


def concat(rng):
    a, b, c = uni(rng, (2, 3, 4)), uni(rng, (2, 1, 4)), uni(rng, (2, 5, 4))
    y = np.concatenate([f64(a), f64(b), f64(c)], axis=1)
    body = [f"%r = graph.concat %a, %b, %c axis = 1 : {sig([a, b, c], y)}"]
    return {"a": a, "b": b, "c": c}, body, y, RTOL


def embedding(rng):
    table, ids = uni(rng, (7, 4)), rng.integers(0, 7, size=(2, 3)).astype(np.int64)
    y = f64(table)[ids]
    return ({"t": table, "ids": ids}, [f"%r = graph.embedding %t, %ids : {sig([table, ids], y)}"],
            y, RTOL)


def causal_mask(rng):
    x = uni(rng, (2, 3, 5, 5))
    i, j = np.indices((5, 5))
    y = np.where(j > i, -np.inf, f64(x))
    return {"x": x}, [f"%r = graph.causal_mask %x : {T(x)}"], y, 0.0  # exact


def cross_entropy(rng):
    logits = uni(rng, (2, 5, 7), -4.0, 4.0)
    tgt = rng.integers(0, 7, size=(2, 5)).astype(np.int64)
    lsm = log_softmax(f64(logits), -1)
    y = np.array(-np.take_along_axis(lsm, tgt[..., None], -1).mean())
    body = [f"%r = graph.cross_entropy %l, %y : {sig([logits, tgt], y)}"]
    return {"l": logits, "y": tgt}, body, y, RTOL


CASES = [
    ("constant f32 + input", constant),
    ("constant i64 ids -> embedding", constant_ids),
    ("neg", unary("neg", np.negative)),
    ("exp", unary("exp", np.exp)),
    ("log", unary("log", np.log, 0.05, 5.0)),
    ("tanh", unary("tanh", np.tanh, -3.0, 3.0)),
    ("sqrt", unary("sqrt", np.sqrt, 0.05, 5.0)),
    ("rsqrt", unary("rsqrt", lambda x: 1.0 / np.sqrt(x), 0.1, 5.0)),
    ("relu", unary("relu", lambda x: np.maximum(x, 0.0))),
    ("gelu", unary("gelu", gelu, -4.0, 4.0)),
    ("add same shape", binary("add", np.add, (3, 4), (3, 4))),
    ("add broadcast [2,3,4]+[3,1]", binary("add", np.add, (2, 3, 4), (3, 1))),
    ("add scalar rhs", binary("add", np.add, (3, 4), ())),
    ("sub broadcast [3,1]-[1,4]", binary("sub", np.subtract, (3, 1), (1, 4))),
    ("sub scalar lhs", binary("sub", np.subtract, (), (2, 3))),
    ("mul broadcast [2,1,4]*[3,1]", binary("mul", np.multiply, (2, 1, 4), (3, 1))),
    ("mul scalar rhs", binary("mul", np.multiply, (2, 3), ())),
    ("div broadcast [2,3,4]/[4]", binary("div", np.divide, (2, 3, 4), (4,))),
    ("div scalar rhs", binary("div", np.divide, (3, 4), ())),
    ("matmul plain", matmul((3, 4), (4, 5))),
    ("matmul batched lhs, shared rhs", matmul((2, 3, 4), (4, 5))),
    ("matmul batched-batched", matmul((2, 3, 4), (2, 4, 5))),
    ("matmul batched-batched rank 4", matmul((2, 2, 3, 4), (2, 2, 4, 5))),
    ("matmul transpose_lhs", matmul((2, 4, 3), (2, 4, 5), tl=True)),
    ("matmul transpose_lhs 2-D", matmul((4, 3), (4, 5), tl=True)),
    ("matmul transpose_rhs", matmul((2, 3, 4), (5, 4), tr=True)),
    ("matmul transpose_rhs batched", matmul((2, 3, 4), (2, 5, 4), tr=True)),
    ("matmul transpose_lhs transpose_rhs", matmul((2, 4, 3), (2, 5, 4), tl=True, tr=True)),
    ("reduce_sum dims [1] keepdims", reduce("reduce_sum", np.sum, [1], True)),
    ("reduce_sum dims [0, 2]", reduce("reduce_sum", np.sum, [0, 2], False)),
    ("reduce_mean dims [2]", reduce("reduce_mean", np.mean, [2], False)),
    ("reduce_mean dims [0, 1] keepdims", reduce("reduce_mean", np.mean, [0, 1], True)),
    ("reduce_max dims [1, 2]", reduce("reduce_max", np.max, [1, 2], False)),
    ("reduce_max dims [0] keepdims", reduce("reduce_max", np.max, [0], True)),
    ("softmax axis -1 (2)", softmax_like("softmax", 2)),
    ("softmax axis 1", softmax_like("softmax", 1)),
    ("log_softmax axis -1 (2)", softmax_like("log_softmax", 2)),
    ("log_softmax axis 1", softmax_like("log_softmax", 1)),
    ("layer_norm", layer_norm),
    ("transpose rank 4", one_input("transpose", (2, 3, 4, 5), " perm [2, 0, 3, 1]",
                                   lambda x: np.transpose(x, (2, 0, 3, 1)))),
    ("reshape", one_input("reshape", (2, 3, 4), "", lambda x: x.reshape(4, 6))),
    ("reshape i64 ids -> embedding", reshape_ids),
    ("slice", one_input("slice", (4, 6, 5), " starts [1, 2, 0] limits [3, 5, 4]",
                        lambda x: x[1:3, 2:5, 0:4])),
    ("concat 3 inputs axis 1", concat),
    ("embedding", embedding),
    ("causal_mask", causal_mask),
    ("cross_entropy", cross_entropy),
]


# Running and comparing

def compare(actual, expected, rtol):
    """Returns (ok, message)."""
    if actual.dtype != np.float32:
        return False, f"result dtype {actual.dtype}, expected float32"
    if actual.shape != expected.shape:
        return False, f"result shape {actual.shape}, expected {expected.shape}"
    inf = np.isinf(expected)
    if not np.array_equal(actual[inf], expected[inf]):
        return False, f"{int((actual[inf] != expected[inf]).sum())} entries should be -inf"
    a, e = f64(actual[~inf]), expected[~inf]
    scale = max(np.abs(e).max(initial=0.0), 1e-30)
    err = np.abs(a - e).max(initial=0.0) / scale
    if not err <= rtol:  # also catches NaN
        return False, f"max rel err {err:.3g} > {rtol:g}"
    masked = f" ({int(inf.sum())} masked -inf ok)" if inf.any() else ""
    return True, f"max rel err {err:.2g}{masked}"


def run_case(sbpc, workdir, idx, make, rng):
    inputs, body, expected, rtol = make(rng)
    cdir = os.path.join(workdir, f"{idx:02d}")
    os.makedirs(os.path.join(cdir, "out"), exist_ok=True)
    path = os.path.join(cdir, "model.mlir")
    with open(path, "w") as f:
        f.write(model(inputs, body, expected))
    cmd = [sbpc, "run", path, "--output-dir", os.path.join(cdir, "out")]
    for n, a in inputs.items():
        np.save(os.path.join(cdir, f"{n}.npy"), a)
        cmd += ["--input", f"{n}={os.path.join(cdir, n + '.npy')}"]
    out = os.path.join(cdir, "out", "out.npy")
    if os.path.exists(out):
        os.remove(out)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, f"sbpc exited {proc.returncode} ({path}):\n{proc.stderr.rstrip()}"
    if not os.path.exists(out):
        return False, f"sbpc wrote no {out}"
    return compare(np.load(out), expected, rtol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True, help="path to the sbpc binary")
    ap.add_argument("--workdir", required=True, help="scratch directory for models and .npy")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sbpc = shutil.which(args.sbpc) or os.path.abspath(args.sbpc)
    rng = np.random.default_rng(args.seed)
    passed = failed = 0
    for idx, (name, make) in enumerate(CASES):
        try:
            ok, msg = run_case(sbpc, args.workdir, idx, make, rng)
        except Exception as e:  # a broken case must not hide the others
            ok, msg = False, f"{type(e).__name__}: {e}"
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}", flush=True)
        passed, failed = passed + ok, failed + (not ok)
    print(f"check_ops: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
