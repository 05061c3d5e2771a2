"""Checks every op of the `graph` dialect numerically against NumPy.

For each case in CASES it writes a one-op model (or a tiny chain, e.g. a
constant feeding an add) as a `func.func` with `graph.input` arguments and one
`graph.output = "out"` result (or several, "out0", "out1", ..., for ops with
several results), writes fresh seeded random inputs as .npy, evaluates the
model with the compiler's reference evaluator
(`sbpc run MODEL.mlir --input NAME=FILE.npy ... --output-dir DIR`) and compares
every DIR/NAME.npy with a float64 NumPy computation of the op's documented
semantics (dialects/Graph/IR/GraphOps.td). The error is max|actual - expected|
divided by max|expected|, per output; -inf entries of the expectation must be
-inf in the result.

The references are independent of the ops' formulas where possible: gradient
ops are checked against float64 central finite differences of a scalar
objective built from the forward op, the optimizer updates against PyTorch's
documented SGD and AdamW algorithms. A few cases feed invalid run-time data
(an index out of range) and pass when `sbpc run` fails cleanly: a positive
exit status and exactly one stderr line, containing "error:".

With --compiled, the same cases are checked through the compiler instead:
all of them side by side in one function, each case's names prefixed by
cNN_, compiled for one CPU rank (`sbpc compile --mesh x=1`, so exec-fuse's
fused softmax, linear and elementwise kernels run too) and run with `sbpc
run PROGRAM`; a must-fail case runs the program on the inputs of the case
of the same op and shapes, with its own in their place, and must fail
naming the op. --precision bf16 compiles with
bf16 storage; --rtol then gives one bound for all cases. With --bundle DIR,
the program is also compiled for --bundle-target (cuda) and exported as the
GPU bundle's case "ops" ("ops-bf16"), the CPU program's outputs its
expected result (test/gpu/export.py): every CUDA kernel meets each case,
rows of the widths that choose between its paths included, and the device
must fail on the bad ids as the CPU did.

Usage:
  /usr/bin/python3 check_ops.py --sbpc build/bin/sbpc --workdir /tmp/ops [--seed N]
      [--compiled [--precision f32|bf16] [--rtol R] [--bundle DIR]]

Prints one line per case and finally `check_ops: N passed, M failed`; exits 1
if any case failed (a non-zero exit of sbpc fails its case, except in the
cases that must fail).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from export import DEVICE_FLAGS, export_case  # noqa: E402

RTOL = 1e-5
RTOL_MATMUL = 1e-4
RTOL_FD = 1e-4      # against central finite differences
FD_STEP = 1e-6
MUST_FAIL = None    # the rtol of a case whose `sbpc run` must fail cleanly


# Model text helpers

def T(a):
    """MLIR tensor type of an array (or of a shape tuple, as f32)."""
    shape, dt = (a, "f32") if isinstance(a, tuple) else (
        a.shape, "i64" if a.dtype == np.int64 else "f32")
    return "tensor<" + "".join(f"{d}x" for d in shape) + dt + ">"


def sig(ins, *outs):
    """functional-type `(t1, t2) -> t3` (or `-> (t3, t4)`) for operand and
    result arrays."""
    rts = [T(tuple(o.shape)) for o in outs]
    res = rts[0] if len(rts) == 1 else "(" + ", ".join(rts) + ")"
    return "(" + ", ".join(T(a) for a in ins) + ") -> " + res


def outputs_of(expected):
    """{output name: array}: one array is the single output "out"."""
    return expected if isinstance(expected, dict) else {"out": expected}


def ssa(name):
    """The value the body defines for output NAME: %r for the single output
    "out", else %NAME (e.g. %out0)."""
    return "%r" if name == "out" else f"%{name}"


def model(inputs, body, results):
    """A func.func of graph.input arguments `inputs` ({name: array}) and
    `body`, returning each (name, value, array) of `results` as graph.output
    NAME."""
    args = ", ".join(f'%{n}: {T(a)} {{graph.input = "{n}"}}' for n, a in inputs.items())
    rts = [T(tuple(a.shape)) for _, _, a in results]
    outs = ", ".join(f'{t} {{graph.output = "{n}"}}' for (n, _, _), t in zip(results, rts))
    lines = "".join(f"  {line}\n" for line in body)
    return (f"func.func @m({args}) -> ({outs}) {{\n"
            f"{lines}  return {', '.join(v for _, v, _ in results)} : {', '.join(rts)}\n}}\n")


def results_of(expected):
    """(output name, the value the body defines for it, array) per output."""
    return [(n, ssa(n), a) for n, a in outputs_of(expected).items()]


SSA_NAME = re.compile(r"%([A-Za-z_$.][\w$.]*|[0-9]+)")


def prefixed(prefix, inputs, body, expected):
    """One case's inputs, body and results with every input, value and
    output name prefixed, so that many cases share one function."""
    lines = [SSA_NAME.sub(lambda m: "%" + prefix + m.group(1), line) for line in body]
    results = [(prefix + n, "%" + prefix + v[1:], a) for n, v, a in results_of(expected)]
    return {prefix + n: a for n, a in inputs.items()}, lines, results


def fattr(v):
    """An F64Attr literal that round-trips v exactly (MLIR needs the dot)."""
    return f"{v:.17e}"


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


def softmax(x, axis):
    return np.exp(log_softmax(x, axis))


def layer_norm_ref(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


# Whether the cases are for the compiled programs (--compiled), not the
# reference evaluator.
COMPILED = False


def causal_mask_ref(x):
    i, j = np.indices(x.shape[-2:])
    return np.where(j > i, -np.inf, x)


def cross_entropy_ref(logits, tgt):
    lsm = log_softmax(logits, -1)
    return -np.take_along_axis(lsm, tgt[..., None], -1).sum()


def num_grad(f, x, h=FD_STEP):
    """d f / d x by float64 central differences, f a scalar function of an
    array shaped like x."""
    x = f64(x).copy()
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x0 = x[i]
        x[i] = x0 + h
        fp = f(x)
        x[i] = x0 - h
        fm = f(x)
        x[i] = x0
        g[i] = (fp - fm) / (2 * h)
    return g


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


def reduce(op, fn, dims, keepdims, shape=(3, 4, 5)):
    attrs = f" dims {dims}" + (" keepdims" if keepdims else "")
    return one_input(op, shape, attrs, lambda x: fn(x, axis=tuple(dims), keepdims=keepdims))


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


def constant_splats(rng):
    """Splat constants (one value for every element), f32 and i64: the
    compiled programs fill them rather than spelling out every element."""
    c = np.full((4, 5), rng.uniform(0.5, 2.0), np.float32)
    x, table = uni(rng, (4, 5)), uni(rng, (6, 5))
    ids = np.full((4,), rng.integers(0, 6), np.int64)
    y = f64(c) * f64(x) + f64(table)[ids]
    body = [f"%c = graph.constant dense<{c.flat[0].item()!r}> : {T(c)}",
            f"%i = graph.constant dense<{ids[0].item()}> : {T(ids)}",
            f"%m = graph.mul %c, %x : {sig([c, x], c)}",
            f"%e = graph.embedding %t, %i : {sig([table, ids], c)}",
            f"%r = graph.add %m, %e : {sig([c, c], c)}"]
    return {"x": x, "t": table}, body, y, RTOL


def layer_norm(lead, width):
    def make(rng):
        x = uni(rng, (*lead, width), -3.0, 3.0)
        g, b = uni(rng, (width,)), uni(rng, (width,))
        y = layer_norm_ref(f64(x), f64(g), f64(b))
        body = [f"%r = graph.layer_norm %x, %g, %b eps = 1.0e-05 : {sig([x, g, b], y)}"]
        return {"x": x, "g": g, "b": b}, body, y, RTOL
    return make


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
    y = causal_mask_ref(f64(x))
    return {"x": x}, [f"%r = graph.causal_mask %x : {T(x)}"], y, 0.0  # exact


def cross_entropy(classes):
    def make(rng):
        logits = uni(rng, (2, 5, classes), -4.0, 4.0)
        tgt = rng.integers(0, classes, size=(2, 5)).astype(np.int64)
        y = np.array(cross_entropy_ref(f64(logits), tgt))
        body = [f"%r = graph.cross_entropy %l, %y : {sig([logits, tgt], y)}"]
        return {"l": logits, "y": tgt}, body, y, RTOL
    return make


# Chains that exec-fuse turns into one op of the compiled program
# (passes/Exec/ExecFuse.cpp): the scaled, masked softmax of attention and
# its gradient, a linear layer with its bias and GELU, an elementwise chain.

def scaled_causal_softmax(rng):
    x, s = uni(rng, (2, 3, 6, 6), -3.0, 3.0), np.array(0.7, dtype=np.float32)
    y = softmax(causal_mask_ref(f64(x) * 0.7), 3)
    body = [f"%0 = graph.mul %x, %s : {sig([x, s], x)}",
            f"%1 = graph.causal_mask %0 : {T(x)}",
            f"%r = graph.softmax %1 axis = 3 : {T(x)}"]
    return {"x": x, "s": s}, body, y, RTOL


def scaled_causal_softmax_grad(seq):
    """d/dx sum(softmax(causal_mask(x * s)) * dy): the probabilities of the
    scaled, masked softmax (one exec.softmax), then their gradient (one
    exec.softmax_grad, which fuses the mask's gradient only after a causal
    exec.softmax). In the compiled programs dy is NaN above the diagonal,
    where the product that computes it (exec.causal_matmul) leaves it
    unwritten: the kernel must not read it (graph.softmax_grad, which the
    evaluator runs, reads it all)."""
    def make(rng):
        x, dy = uni(rng, (2, seq, seq), -3.0, 3.0), uni(rng, (2, seq, seq))
        s = np.array(-1.3, dtype=np.float32)
        y = num_grad(lambda v: np.sum(softmax(causal_mask_ref(v * float(s)), 2) * f64(dy)), x)
        if COMPILED:
            i, j = np.indices((seq, seq))
            dy = np.where(j > i, np.float32(np.nan), dy)
        body = [f"%0 = graph.mul %x, %s : {sig([x, s], x)}",
                f"%1 = graph.causal_mask %0 : {T(x)}",
                f"%p = graph.softmax %1 axis = 2 : {T(x)}",
                f"%2 = graph.softmax_grad %p, %dy axis = 2 : {sig([x, dy], x)}",
                f"%3 = graph.causal_mask_grad %2 : {T(x)}",
                f"%r = graph.mul %s, %3 : {sig([s, x], x)}"]
        return {"x": x, "dy": dy, "s": s}, body, y, RTOL_FD
    return make


def linear(lead, k, n, gelu_after=False, bias_first=False, transposed=False, residual=False):
    """x @ w + b (w [N, K] with transpose_rhs), then a GELU, or the residual
    connection's add of r, if asked."""
    def make(rng):
        x, b = uni(rng, (*lead, k)), uni(rng, (n,))
        w = uni(rng, (n, k) if transposed else (k, n))
        y = f64(x) @ (f64(w).T if transposed else f64(w)) + f64(b)
        y = gelu(y) if gelu_after else y
        flag = " transpose_rhs" if transposed else ""
        out = np.zeros((*lead, n), dtype=np.float32)
        add = f"graph.add %b, %0 : {sig([b, out], out)}" if bias_first else \
            f"graph.add %0, %b : {sig([out, b], out)}"
        body = [f"%0 = graph.matmul %x, %w{flag} : {sig([x, w], out)}",
                f"%{'1' if gelu_after or residual else 'r'} = {add}"]
        if gelu_after:
            body.append(f"%r = graph.gelu %1 : {T(out)}")
        inputs = {"x": x, "w": w, "b": b}
        if residual:
            inputs["res"] = uni(rng, (*lead, n))
            y = y + f64(inputs["res"])
            body.append(f"%r = graph.add %res, %1 : {sig([out, out], out)}")
        return inputs, body, y, RTOL_MATMUL
    return make


def attention_ref(q, k, v, causal, scale):
    """softmax(causal_mask(q @ k^T * scale)) @ v in float64 (the mask and
    the scale when asked)."""
    scores = f64(q) @ np.swapaxes(f64(k), -1, -2)
    scores = scores * scale if scale is not None else scores
    return softmax(causal_mask_ref(scores) if causal else scores, q.ndim - 1) @ f64(v)


def attention_ops(q, k, v, causal, scale, output):
    """The inputs and graph ops of attention_ref, its probabilities %p and
    its result `output`; also the scores' zeros, for their type."""
    sc = np.zeros((*q.shape[:-1], k.shape[-2]), np.float32)
    inputs, body = {"q": q, "k": k, "v": v}, [
        f"%0 = graph.matmul %q, %k transpose_rhs : {sig([q, k], sc)}"]
    if scale is not None:
        inputs["s"] = np.array(scale, dtype=np.float32)
        body.append(f"%z = graph.mul %0, %s : {sig([sc, inputs['s']], sc)}")
    last = "%z" if scale is not None else "%0"
    if causal:
        body.append(f"%1 = graph.causal_mask {last} : {T(sc)}")
        last = "%1"
    body += [f"%p = graph.softmax {last} axis = {q.ndim - 1} : {T(sc)}",
             f"{output} = graph.matmul %p, %v : {sig([sc, v], q)}"]
    return inputs, body, sc


def attention(lead, s, t, d, causal=True, scale=None):
    """Attention over the trailing matrices (attention_ref): in bf16, one
    exec.attention of the compiled program (flash attention on the GPU),
    in f32 the ops."""
    def make(rng):
        q, k, v = uni(rng, (*lead, s, d)), uni(rng, (*lead, t, d)), uni(rng, (*lead, t, d))
        inputs, body, _ = attention_ops(q, k, v, causal, scale, "%r")
        return inputs, body, attention_ref(q, k, v, causal, scale), RTOL_MATMUL
    return make


def attention_grad(lead, s, t, d, causal=True, scale=None):
    """Attention's output (out0) and the gradients of sum(output * do) by
    q, k and v (out1, out2, out3), the backward written as autodiff writes
    it: the values' gradient p^T do, the probabilities' gradient do v^T,
    softmax_grad, the mask's gradient and the scale, then ds k and ds^T q.
    In bf16, one exec.attention and one exec.attention_grad of the
    compiled program (flash attention's backward on the GPU)."""
    def make(rng):
        q, k, v = uni(rng, (*lead, s, d)), uni(rng, (*lead, t, d)), uni(rng, (*lead, t, d))
        do = uni(rng, (*lead, s, d))
        inputs, body, sc = attention_ops(q, k, v, causal, scale, "%out0")
        inputs["do"] = do
        grad = "%3" if causal else "%2"
        body += [f"%out3 = graph.matmul %p, %do transpose_lhs : {sig([sc, do], v)}",
                 f"%dp = graph.matmul %do, %v transpose_rhs : {sig([do, v], sc)}",
                 f"%2 = graph.softmax_grad %p, %dp axis = {q.ndim - 1} : {sig([sc, sc], sc)}"]
        if causal:
            body.append(f"%3 = graph.causal_mask_grad %2 : {T(sc)}")
        if scale is not None:
            body.append(f"%ds = graph.mul %s, {grad} : {sig([inputs['s'], sc], sc)}")
            grad = "%ds"
        body += [f"%out1 = graph.matmul {grad}, %k : {sig([sc, k], q)}",
                 f"%out2 = graph.matmul {grad}, %q transpose_lhs : {sig([sc, q], k)}"]
        objective = lambda which: lambda x: np.sum(  # noqa: E731
            attention_ref(*[x if i == which else a for i, a in enumerate((q, k, v))], causal,
                          scale) * f64(do))
        want = {"out0": attention_ref(q, k, v, causal, scale)}
        for i, x in enumerate((q, k, v)):
            want[f"out{i + 1}"] = num_grad(objective(i), x)
        return inputs, body, want, RTOL_FD
    return make


def linear_keeping_sum(lead, k, n):
    """gelu(x @ w + b) and the sum before the GELU, both outputs (as a
    training step keeps it for gelu_grad): one exec.linear with its
    preactivation result."""
    def make(rng):
        x, w, b = uni(rng, (*lead, k)), uni(rng, (k, n)), uni(rng, (n,))
        pre = f64(x) @ f64(w) + f64(b)
        out = np.zeros((*lead, n), dtype=np.float32)
        body = [f"%0 = graph.matmul %x, %w : {sig([x, w], out)}",
                f"%out1 = graph.add %0, %b : {sig([out, b], out)}",
                f"%out0 = graph.gelu %out1 : {T(out)}"]
        return {"x": x, "w": w, "b": b}, body, {"out0": gelu(pre), "out1": pre}, RTOL_MATMUL
    return make


def gelu_grad_through_linear(lead, k, n, transposed, bias_grad):
    """gelu_grad(pre, dy @ w) (w [N, K] with transpose_rhs): the input
    gradient of a linear layer after a GELU, and the sums over its rows (the
    bias gradient of the layer before the GELU) if asked: one
    exec.matmul_gelu_grad."""
    def make(rng):
        dy, pre = uni(rng, (*lead, k)), uni(rng, (*lead, n), -3.0, 3.0)
        w = uni(rng, (n, k) if transposed else (k, n))
        g = f64(dy) @ (f64(w).T if transposed else f64(w))
        want = {"out0": num_grad(lambda v: np.sum(gelu(v) * g), pre)}
        out = np.zeros((*lead, n), dtype=np.float32)
        flag = " transpose_rhs" if transposed else ""
        body = [f"%0 = graph.matmul %dy, %w{flag} : {sig([dy, w], out)}",
                f"%out0 = graph.gelu_grad %pre, %0 : {sig([pre, out], out)}"]
        if bias_grad:
            want["out1"] = want["out0"].sum(axis=tuple(range(len(lead))))
            dims = ", ".join(str(d) for d in range(len(lead)))
            body.append(f"%out1 = graph.reduce_sum %out0 dims [{dims}] : "
                        f"{sig([out], want['out1'])}")
        return {"dy": dy, "w": w, "pre": pre}, body, want, RTOL_FD
    return make


def weight_and_bias_grad(lead, k, n):
    """x^T dy over the rows of x [..., K] and dy [..., N] (a weight's
    gradient) and dy's sums over its rows, dimensions kept (its bias's): one
    exec.matmul_bias_grad."""
    def make(rng):
        x, dy = uni(rng, (*lead, k)), uni(rng, (*lead, n))
        rows = int(np.prod(lead))
        x2, dy2 = f64(x).reshape(rows, k), f64(dy).reshape(rows, n)
        want = {"out0": x2.T @ dy2, "out1": dy2.sum(axis=0).reshape((1,) * len(lead) + (n,))}
        xs, ds = np.zeros((rows, k), np.float32), np.zeros((rows, n), np.float32)
        dims = ", ".join(str(d) for d in range(len(lead)))
        # As a training step orders them: the bias's gradient first, the
        # weight's gradient reshaping a gradient that is there already.
        body = [f"%0 = graph.reshape %x : {sig([x], xs)}",
                f"%out1 = graph.reduce_sum %dy dims [{dims}] keepdims : {sig([dy], want['out1'])}",
                f"%1 = graph.reshape %dy : {sig([dy], ds)}",
                f"%out0 = graph.matmul %0, %1 transpose_lhs : {sig([xs, ds], want['out0'])}"]
        return {"x": x, "dy": dy}, body, want, RTOL_MATMUL
    return make


def elementwise_chain(rng):
    """tanh(a + b) * c - a, c broadcast along rows."""
    a, b, c = uni(rng, (3, 7)), uni(rng, (3, 7)), uni(rng, (7,))
    y = np.tanh(f64(a) + f64(b)) * f64(c) - f64(a)
    body = [f"%0 = graph.add %a, %b : {sig([a, b], a)}",
            f"%1 = graph.tanh %0 : {T(a)}",
            f"%2 = graph.mul %1, %c : {sig([a, c], a)}",
            f"%r = graph.sub %2, %a : {sig([a, a], a)}"]
    return {"a": a, "b": b, "c": c}, body, y, RTOL


# Gradient cases: the reference is d/dx of a scalar objective
# sum(forward(x) * dy) (or loss * loss_grad) by num_grad.

def pointwise_grad(op, fwd, draw):
    """relu_grad / gelu_grad: d/dx sum(fwd(x) * dy)."""
    def make(rng):
        x, dy = draw(rng, (3, 8)), uni(rng, (3, 8))
        y = num_grad(lambda v: np.sum(fwd(v) * f64(dy)), x)
        return {"x": x, "dy": dy}, [f"%r = graph.{op} %x, %dy : {sig([x, dy], x)}"], y, RTOL_FD
    return make


def softmax_grad(axis, shape=(2, 4, 3)):
    """output = softmax(x) of a random x; d/dx sum(softmax(x) * dy)."""
    def make(rng):
        x, dy = uni(rng, shape, -3.0, 3.0), uni(rng, shape)
        out = softmax(f64(x), axis).astype(np.float32)
        y = num_grad(lambda v: np.sum(softmax(v, axis) * f64(dy)), x)
        body = [f"%r = graph.softmax_grad %s, %dy axis = {axis} : {sig([out, dy], out)}"]
        return {"s": out, "dy": dy}, body, y, RTOL_FD
    return make


def layer_norm_grad(lead, width):
    """d/d(x|scale|bias) sum(layer_norm(x, scale, bias) * dy)."""
    def make(rng):
        x = uni(rng, (*lead, width), -3.0, 3.0)
        g, b, dy = uni(rng, (width,)), uni(rng, (width,)), uni(rng, (*lead, width))
        x64, g64, b64, dy64 = f64(x), f64(g), f64(b), f64(dy)
        eps = 1e-5
        want = {
            "out0": num_grad(lambda v: np.sum(layer_norm_ref(v, g64, b64, eps) * dy64), x),
            "out1": num_grad(lambda v: np.sum(layer_norm_ref(x64, v, b64, eps) * dy64), g),
            "out2": num_grad(lambda v: np.sum(layer_norm_ref(x64, g64, v, eps) * dy64), b),
        }
        body = [f"%out0, %out1, %out2 = graph.layer_norm_grad %x, %g, %dy eps = {fattr(eps)} : "
                f"{sig([x, g, dy], *want.values())}"]
        return {"x": x, "g": g, "dy": dy}, body, want, RTOL_FD
    return make


def causal_mask_grad(rng):
    """d/dx sum(causal_mask(x) * dy) over the entries the mask keeps (the
    masked ones are the constant -inf, whatever x)."""
    dy = uni(rng, (2, 4, 4))
    x = uni(rng, (2, 4, 4))

    def objective(v):
        m = causal_mask_ref(v)
        return np.sum(np.where(np.isneginf(m), 0.0, m) * f64(dy))
    y = num_grad(objective, x)
    return {"dy": dy}, [f"%r = graph.causal_mask_grad %dy : {T(dy)}"], y, RTOL_FD


def cross_entropy_grad(bad_target=None, classes=5):
    """d/dlogits cross_entropy(logits, targets) * loss_grad; with bad_target,
    one target is out of range and sbpc must fail."""
    def make(rng):
        logits = uni(rng, (2, 3, classes), -4.0, 4.0)
        tgt = rng.integers(0, classes, size=(2, 3)).astype(np.int64)
        dl = np.array(rng.uniform(-3.0, 3.0), dtype=np.float32)
        if bad_target is None:
            y = num_grad(lambda v: cross_entropy_ref(v, tgt) * float(dl), logits)
            rtol = RTOL_FD
        else:
            tgt[1, 2] = bad_target
            y, rtol = f64(logits), MUST_FAIL
        body = [f"%r = graph.cross_entropy_grad %l, %t, %d : {sig([logits, tgt, dl], y)}"]
        return {"l": logits, "t": tgt, "d": dl}, body, y, rtol
    return make


def embedding_grad(bad_index=None, rows=6):
    """np.add.at of grad rows into a zero table, indices with repeats; with
    bad_index, one index is out of range and sbpc must fail."""
    def make(rng):
        ids = rng.integers(0, rows, size=(3, 4)).astype(np.int64)
        ids[2, 3] = ids[0, 1]  # certainly some repeats
        ids[1, 0] = ids[0, 1]
        dy = uni(rng, (3, 4, 5))
        y = np.zeros((rows, 5))
        np.add.at(y, ids, f64(dy))
        rtol = RTOL
        if bad_index is not None:
            ids[1, 2], rtol = bad_index, MUST_FAIL
        body = [f"%r = graph.embedding_grad %i, %dy rows = {rows} : {sig([ids, dy], y)}"]
        return {"i": ids, "dy": dy}, body, y, rtol
    return make


# Optimizer cases: PyTorch's documented algorithms, in float64

def sgd_update(lr, momentum, weight_decay):
    """torch.optim.SGD, dampening 0, nesterov False, a step after the first:
    g = grad + wd * param; b = momentum * b + g (if momentum != 0, else b = g
    with no buffer); param -= lr * b."""
    def make(rng):
        w, dw, v = uni(rng, (3, 5)), uni(rng, (3, 5)), uni(rng, (3, 5))
        g = f64(dw)
        if weight_decay != 0:
            g = g + weight_decay * f64(w)
        b = momentum * f64(v) + g if momentum != 0 else g
        want = {"out0": f64(w) - lr * b, "out1": b}
        body = [f"%out0, %out1 = graph.sgd_update %w, %dw, %v lr = {fattr(lr)} "
                f"momentum = {fattr(momentum)} weight_decay = {fattr(weight_decay)} : "
                f"{sig([w, dw, v], *want.values())}"]
        return {"w": w, "dw": dw, "v": v}, body, want, RTOL
    return make


def adamw_update(lr, beta1, beta2, eps, weight_decay, step):
    """torch.optim.AdamW (amsgrad False) at 1-based step t:
    theta -= lr * wd * theta; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    m_hat = m / (1 - b1^t); v_hat = v / (1 - b2^t);
    theta -= lr * m_hat / (sqrt(v_hat) + eps)."""
    def make(rng):
        w, dw, m = uni(rng, (3, 5)), uni(rng, (3, 5)), uni(rng, (3, 5), -0.5, 0.5)
        v = uni(rng, (3, 5), 0.0, 0.5) ** 2
        t = np.array(step, dtype=np.float32)
        theta = f64(w) * (1.0 - lr * weight_decay)
        m1 = beta1 * f64(m) + (1.0 - beta1) * f64(dw)
        v1 = beta2 * f64(v) + (1.0 - beta2) * f64(dw) ** 2
        m_hat = m1 / (1.0 - beta1 ** step)
        v_hat = v1 / (1.0 - beta2 ** step)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
        want = {"out0": theta, "out1": m1, "out2": v1}
        body = [f"%out0, %out1, %out2 = graph.adamw_update %w, %dw, %m, %v, %t "
                f"lr = {fattr(lr)} beta1 = {fattr(beta1)} beta2 = {fattr(beta2)} "
                f"eps = {fattr(eps)} weight_decay = {fattr(weight_decay)} : "
                f"{sig([w, dw, m, v, t], *want.values())}"]
        return {"w": w, "dw": dw, "m": m, "v": v, "t": t}, body, want, RTOL
    return make


# Rows of these widths take each path of the CUDA row kernels
# (runtime/cuda/Rows.cu), 128 threads a row, forward and gradients: one
# pass, each thread loading 1, 2, 4 or 8 times 4 floats (width a multiple
# of 4: 300, 768, 1100, 4096) or 8 times 1 float (1021), or the looping
# kernel past 8 loads (1030, 4100).
ROW_WIDTHS = (300, 768, 1021, 1030, 1100, 4096, 4100)

CASES = [
    ("constant f32 + input", constant),
    ("constant i64 ids -> embedding", constant_ids),
    ("splat constants f32 and i64", constant_splats),
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
    # Rows of the lhs or the product not 16-byte aligned in bf16 while the
    # rhs's are, as in a head over an odd vocabulary (logits [T, V], their
    # gradient by the embedding, the embedding's by the logits'): the CUDA
    # target pads them in chunks (runtime/cuda/Gemm.cu).
    ("matmul, lhs rows misaligned", matmul((20, 9), (9, 8))),
    ("matmul, product rows misaligned", matmul((4, 6, 8), (9, 8), tr=True)),
    ("matmul transpose_lhs, lhs rows misaligned", matmul((9, 20), (9, 8), tl=True)),
    # ... the product's alone, which the CUDA target computes transposed
    # (rows of 80, aligned) and transposes back, in chunks of its columns
    # where the scratch is small.
    ("matmul, product rows misaligned, long", matmul((2, 40, 8), (70, 8), tr=True)),
    ("matmul transpose_lhs, product rows misaligned",
     matmul((8, 40), (70, 8), tl=True, tr=True)),
    # ... and with long lhs rows, which a small scratch takes in chunks of
    # the contraction, summed in f32.
    ("matmul, lhs rows long and misaligned", matmul((20, 41), (41, 8))),
    ("reduce_sum dims [1] keepdims", reduce("reduce_sum", np.sum, [1], True)),
    ("reduce_sum dims [0, 2]", reduce("reduce_sum", np.sum, [0, 2], False)),
    ("reduce_mean dims [2]", reduce("reduce_mean", np.mean, [2], False)),
    ("reduce_mean dims [0, 1] keepdims", reduce("reduce_mean", np.mean, [0, 1], True)),
    ("reduce_max dims [1, 2]", reduce("reduce_max", np.max, [1, 2], False)),
    ("reduce_max dims [0] keepdims", reduce("reduce_max", np.max, [0], True)),
    # Over leading axes with many rows, as a bias's gradient: the CUDA
    # target sums columns in chunks of 64 rows (here 3, the last short).
    ("reduce_sum dims [0, 1] of 160 rows", reduce("reduce_sum", np.sum, [0, 1], True, (4, 40, 5))),
    ("reduce_mean dims [0] of 150 rows", reduce("reduce_mean", np.mean, [0], False, (150, 33))),
    ("reduce_max dims [0, 1] of 160 rows", reduce("reduce_max", np.max, [0, 1], False, (4, 40, 5))),
    # ... and with rows a multiple of 16 bytes, which it reads 16 bytes a
    # thread (a tile of 32 of those, here the second one short).
    ("reduce_sum dims [0, 1] of 160 rows of 16", reduce("reduce_sum", np.sum, [0, 1], True,
                                                        (4, 40, 16))),
    ("reduce_max dims [0] of 150 rows of 264", reduce("reduce_max", np.max, [0], False,
                                                      (150, 264))),
    ("softmax axis -1 (2)", softmax_like("softmax", 2)),
    ("softmax axis 1", softmax_like("softmax", 1)),
    ("log_softmax axis -1 (2)", softmax_like("log_softmax", 2)),
    ("log_softmax axis 1", softmax_like("log_softmax", 1)),
    # Rows of ROW_WIDTHS: each path of the CUDA row kernels.
    ("softmax axis 1 before a size-1 axis", softmax_like("softmax", 1, (4, 8, 1))),
    *[(f"softmax rows of {w}", softmax_like("softmax", 1, (2, w))) for w in ROW_WIDTHS],
    ("log_softmax rows of 1100", softmax_like("log_softmax", 1, (2, 1100))),
    ("layer_norm", layer_norm((2, 3), 8)),
    *[(f"layer_norm rows of {w}", layer_norm((2,), w)) for w in ROW_WIDTHS],
    ("transpose rank 4", one_input("transpose", (2, 3, 4, 5), " perm [2, 0, 3, 1]",
                                   lambda x: np.transpose(x, (2, 0, 3, 1)))),
    # Keeping the last axis (the heads' transpose): the CUDA target moves
    # 16 bytes at a time, 4 f32 or 8 bf16, where strides and starts allow.
    ("transpose keeping the last axis", one_input("transpose", (2, 3, 4, 8), " perm [0, 2, 1, 3]",
                                                  lambda x: np.transpose(x, (0, 2, 1, 3)))),
    ("reshape", one_input("reshape", (2, 3, 4), "", lambda x: x.reshape(4, 6))),
    ("reshape i64 ids -> embedding", reshape_ids),
    ("slice", one_input("slice", (4, 6, 5), " starts [1, 2, 0] limits [3, 5, 4]",
                        lambda x: x[1:3, 2:5, 0:4])),
    ("slice keeping the last axis", one_input("slice", (4, 6, 16), " starts [1, 2, 8] limits [3, 5, 16]",
                                              lambda x: x[1:3, 2:5, 8:16])),
    ("concat 3 inputs axis 1", concat),
    ("embedding", embedding),
    ("causal_mask", causal_mask),
    ("cross_entropy", cross_entropy(7)),
    ("cross_entropy over 1500 classes", cross_entropy(1500)),
    # An odd width: each row starts at another alignment (the GPU's rows
    # go in 16-byte packs from their first boundary).
    ("cross_entropy over 1501 classes", cross_entropy(1501)),
    ("relu_grad (x away from 0)", pointwise_grad("relu_grad", lambda x: np.maximum(x, 0.0),
                                                 lambda rng, sh: away0(rng, sh, 0.1))),
    ("gelu_grad", pointwise_grad("gelu_grad", gelu, lambda rng, sh: uni(rng, sh, -4.0, 4.0))),
    ("softmax_grad axis 1", softmax_grad(1)),
    ("softmax_grad axis -1 (2)", softmax_grad(2)),
    *[(f"softmax_grad rows of {w}", softmax_grad(1, (2, w))) for w in ROW_WIDTHS],
    ("layer_norm_grad (input, scale, bias)", layer_norm_grad((2, 3), 6)),
    *[(f"layer_norm_grad rows of {w}", layer_norm_grad((2,), w)) for w in ROW_WIDTHS],
    # Enough rows for several chunks of the scale's and bias's column sums.
    ("layer_norm_grad over 80 rows of 24", layer_norm_grad((80,), 24)),
    ("causal_mask_grad", causal_mask_grad),
    ("cross_entropy_grad", cross_entropy_grad()),
    ("cross_entropy_grad over 37 classes", cross_entropy_grad(classes=37)),
    ("embedding_grad (repeated indices)", embedding_grad()),
    ("pad", one_input("pad", (2, 3, 4), " low [0, 1, 2] high [1, 0, 3]",
                      lambda x: np.pad(x, [(0, 1), (1, 0), (2, 3)]))),
    ("pad leading axes", one_input("pad", (2, 3, 8), " low [1, 2, 0] high [0, 1, 0]",
                                   lambda x: np.pad(x, [(1, 0), (2, 1), (0, 0)]))),
    ("broadcast [3,1] -> [2,3,4]", one_input("broadcast", (3, 1), "",
                                             lambda x: np.broadcast_to(x, (2, 3, 4)))),
    ("broadcast [4] -> [3,4]", one_input("broadcast", (4,), "",
                                         lambda x: np.broadcast_to(x, (3, 4)))),
    ("broadcast [] -> [2,3]", one_input("broadcast", (), "",
                                        lambda x: np.broadcast_to(x, (2, 3)))),
    ("fused: scaled causal softmax", scaled_causal_softmax),
    ("fused: scaled causal softmax gradient", scaled_causal_softmax_grad(5)),
    ("fused: scaled causal softmax gradient, rows of 8", scaled_causal_softmax_grad(8)),
    ("fused: linear + bias + gelu", linear((2, 3), 8, 16, gelu_after=True)),
    ("fused: linear, bias first, transpose_rhs", linear((6,), 8, 5, bias_first=True,
                                                         transposed=True)),
    ("fused: linear + bias, K and N of 64", linear((4, 8), 64, 64)),
    ("fused: linear + bias + residual", linear((2, 3), 8, 16, residual=True)),
    ("fused: linear + bias + residual, transpose_rhs", linear((6,), 8, 5, transposed=True,
                                                              residual=True)),
    ("fused: causal attention, scaled, heads of 16", attention((2, 2), 20, 20, 16, scale=0.25)),
    ("fused: causal attention over 80 queries", attention((3,), 80, 80, 32, scale=-0.7)),
    ("fused: attention, 5 queries, 70 keys, heads of 64", attention((2,), 5, 70, 64,
                                                                   causal=False, scale=0.125)),
    ("fused: attention, no mask, no scale, heads of 24", attention((2, 1), 3, 9, 24,
                                                                   causal=False)),
    ("fused: causal attention, heads of 10", attention((1, 2), 9, 9, 10, scale=0.3)),
    ("fused: causal attention's gradients, scaled, heads of 16",
     attention_grad((2, 2), 20, 20, 16, scale=0.25)),
    ("fused: causal attention's gradients over 80 queries",
     attention_grad((1,), 80, 80, 32, scale=-0.7)),
    ("fused: attention's gradients, 5 queries, 70 keys, heads of 64",
     attention_grad((2,), 5, 70, 64, causal=False, scale=0.125)),
    ("fused: attention's gradients, no mask, no scale, heads of 24",
     attention_grad((2, 1), 3, 9, 24, causal=False)),
    ("fused: causal attention's gradients, heads of 10", attention_grad((1, 2), 9, 9, 10,
                                                                        scale=0.3)),
    ("fused: causal attention's gradients, heads of 128", attention_grad((1,), 40, 40, 128,
                                                                         scale=0.09)),
    ("fused: linear + bias + gelu, the sum kept", linear_keeping_sum((2, 3), 8, 16)),
    ("fused: linear + bias + gelu, the sum kept, N of 5", linear_keeping_sum((6,), 8, 5)),
    ("fused: gelu_grad of a product, and the bias gradient",
     gelu_grad_through_linear((2, 3), 8, 16, transposed=True, bias_grad=True)),
    ("fused: gelu_grad of a product, N of 5", gelu_grad_through_linear((6,), 8, 5, False, False)),
    ("fused: weight and bias gradients", weight_and_bias_grad((2, 3), 8, 5)),
    ("fused: elementwise chain", elementwise_chain),
    ("sgd_update momentum 0.9, weight_decay 0.01", sgd_update(0.1, 0.9, 0.01)),
    ("sgd_update momentum 0, weight_decay 0", sgd_update(0.05, 0.0, 0.0)),
    ("adamw_update step 3, weight_decay 0.01",
     adamw_update(0.1, 0.9, 0.999, 1e-8, 0.01, 3.0)),
    ("adamw_update step 1, weight_decay 0", adamw_update(0.01, 0.8, 0.95, 1e-6, 0.0, 1.0)),
    ("must fail: embedding_grad index == rows", embedding_grad(bad_index=6)),
    ("must fail: embedding_grad index -1", embedding_grad(bad_index=-1)),
    ("must fail: cross_entropy_grad target == classes", cross_entropy_grad(bad_target=5)),
    ("must fail: cross_entropy_grad target -1", cross_entropy_grad(bad_target=-1)),
]


# Running and comparing

def max_rel_err(actual, expected):
    """max |actual - expected| / max |expected| over the finite expected
    entries."""
    finite = ~np.isinf(expected)
    a, e = f64(actual[finite]), expected[finite]
    return np.abs(a - e).max(initial=0.0) / max(np.abs(e).max(initial=0.0), 1e-30)


def compare(actual, expected, rtol):
    """Returns (ok, message)."""
    if actual.dtype != np.float32:
        return False, f"result dtype {actual.dtype}, expected float32"
    if actual.shape != expected.shape:
        return False, f"result shape {actual.shape}, expected {expected.shape}"
    inf = np.isinf(expected)
    if not np.array_equal(actual[inf], expected[inf]):
        return False, f"{int((actual[inf] != expected[inf]).sum())} entries should be -inf"
    err = max_rel_err(actual, expected)
    if not err <= rtol:  # also catches NaN
        return False, f"max rel err {err:.3g} > {rtol:g}"
    masked = f" ({int(inf.sum())} masked -inf ok)" if inf.any() else ""
    return True, f"max rel err {err:.2g}{masked}"


def clean_failure(proc):
    """(ok, message) for a run that must fail: a positive exit status (not a
    signal) and exactly one stderr line, containing "error:" (besides the
    progress line of a compiled program's run)."""
    lines = [line for line in proc.stderr.strip().splitlines()
             if not line.startswith("sbpc: running ")]
    if proc.returncode <= 0:
        how = "succeeded" if proc.returncode == 0 else f"died of signal {-proc.returncode}"
        return False, f"sbpc {how}; expected a clean failure:\n{proc.stderr.rstrip()}"
    if len(lines) != 1 or "error:" not in lines[0]:
        return False, (f"sbpc exited {proc.returncode} but stderr is not one "
                       f"'error:' line:\n{proc.stderr.rstrip()}")
    return True, f"failed as expected ({proc.returncode}): {lines[0]}"


def check_outputs(odir, outs, rtol):
    """(ok, message) of odir/FILE.npy against each (FILE, label, expected
    array) of `outs`."""
    msgs, all_ok = [], True
    for n, label, want in outs:
        out = os.path.join(odir, f"{n}.npy")
        if not os.path.exists(out):
            return False, f"sbpc wrote no {out}"
        ok, msg = compare(np.load(out), want, rtol)
        all_ok &= ok
        msgs.append(msg if len(outs) == 1 else f"{label}: {msg}")
    return all_ok, "; ".join(msgs)


def run_case(sbpc, workdir, idx, made):
    inputs, body, expected, rtol = made
    cdir = os.path.join(workdir, f"{idx:02d}")
    odir = os.path.join(cdir, "out")
    os.makedirs(odir, exist_ok=True)
    path = os.path.join(cdir, "model.mlir")
    with open(path, "w") as f:
        f.write(model(inputs, body, results_of(expected)))
    cmd = [sbpc, "run", path, "--output-dir", odir]
    for n, a in inputs.items():
        np.save(os.path.join(cdir, f"{n}.npy"), a)
        cmd += ["--input", f"{n}={os.path.join(cdir, n + '.npy')}"]
    outs = outputs_of(expected)
    for n in outs:
        if os.path.exists(os.path.join(odir, f"{n}.npy")):
            os.remove(os.path.join(odir, f"{n}.npy"))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if rtol is MUST_FAIL:
        return clean_failure(proc)
    if proc.returncode != 0:
        return False, f"sbpc exited {proc.returncode} ({path}):\n{proc.stderr.rstrip()}"
    return check_outputs(odir, [(n, n, want) for n, want in outs.items()], rtol)


def last_error(proc):
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


def run_compiled(args, sbpc, drawn):
    """Checks the cases of `drawn` ([(name, made)], `made` None where the
    case could not be drawn) through one program: all but the must-fail
    ones side by side in one function, their names prefixed by cNN_,
    compiled for one CPU rank; the must-fail ones as runs of it on bad
    inputs. Returns [(name, ok, message)]; with --bundle, also exports the
    program compiled for --bundle-target as the bundle's case "ops"
    (test/gpu/export.py), the bad inputs as runs that must fail."""
    work = os.path.join(args.workdir, "compiled")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "inputs"))
    inputs, body, results, checks = {}, [], [], []
    for i, (name, made) in enumerate(drawn):
        if made is None or made[3] is MUST_FAIL:
            continue
        ins, lines, outs = prefixed(f"c{i:02d}_", *made[:3])
        inputs.update(ins)
        body += lines
        results += outs
        labels = list(outputs_of(made[2]))
        checks.append((name, [(n, label, a) for (n, _, a), label in zip(outs, labels)], made[3]))
    path = os.path.join(work, "model.mlir")
    with open(path, "w") as f:
        f.write(model(inputs, body, results))
    run_args = []
    for n, a in inputs.items():
        np.save(os.path.join(work, "inputs", n + ".npy"), a)
        run_args += ["--input", f"{n}={os.path.join(work, 'inputs', n + '.npy')}"]
    flags = ["--mesh", "x=1", "--precision", args.precision]
    prog, odir = os.path.join(work, "prog"), os.path.join(work, "out")
    proc = subprocess.run([sbpc, "compile", path, *flags, "--target", "cpu", "-o", prog],
                          capture_output=True, text=True)
    if proc.returncode == 0:
        proc = subprocess.run([sbpc, "run", prog, *run_args, "--output-dir", odir],
                              capture_output=True, text=True)
    if proc.returncode != 0:
        failure = f"{' '.join(proc.args[1:3])}: {last_error(proc)}"
        return [(name, False, failure) for name, _, _ in checks]
    found = [(name, *check_outputs(odir, outs, args.rtol or rtol)) for name, outs, rtol in checks]
    # The must-fail cases: the same program, on the inputs of the case with
    # the same body but one id out of range, must fail naming the op.
    failing = []
    for i, (name, made) in enumerate(drawn):
        if made is None or made[3] is not MUST_FAIL:
            continue
        twins = [j for j, (_, other) in enumerate(drawn) if other is not None and
                 other[3] is not MUST_FAIL and other[1] == made[1] and
                 {n: a.shape for n, a in other[0].items()} ==
                 {n: a.shape for n, a in made[0].items()}]
        if not twins:
            found.append((name, False, "no case of the same op and shapes to run it in"))
            continue
        prefix, bad_args = f"c{twins[0]:02d}_", list(run_args)
        for n, a in made[0].items():
            bad = os.path.join(work, "inputs", f"bad{i:02d}_{n}.npy")
            np.save(bad, a)
            k = bad_args.index(f"{prefix}{n}={os.path.join(work, 'inputs', prefix + n + '.npy')}")
            bad_args[k] = f"{prefix}{n}={bad}"
        proc = subprocess.run([sbpc, "run", prog, *bad_args, "--output-dir", odir + "-bad"],
                              capture_output=True, text=True)
        ok, msg = clean_failure(proc)
        if ok and " failed in graph." not in msg:
            ok, msg = False, "the error does not name the op: " + msg
        found.append((name, ok, msg))
        failing.append((f"bad{i:02d}", bad_args))
    if args.precision == "bf16" and all(ok for _, ok, _ in found):
        # The largest error shows whether bf16 rounded anything.
        worst = max(max_rel_err(np.load(os.path.join(odir, n + ".npy")), a)
                    for _, outs, _ in checks for n, _, a in outs)
        if worst < 1e-4:
            found.append(("bf16", False, f"max rel err {worst:.1e} over all cases: no bf16 "
                          "rounding shows, was it computed in f32?"))
    if args.bundle and all(ok for _, ok, _ in found):
        device = prog + "-" + args.bundle_target
        proc = subprocess.run([sbpc, "compile", path, *flags, *DEVICE_FLAGS, "--target",
                               args.bundle_target, "-o", device], capture_output=True, text=True)
        if proc.returncode != 0:
            return found + [("bundle", False, f"compile --target {args.bundle_target}: "
                             f"{last_error(proc)}")]
        bf16 = args.precision == "bf16"
        try:
            export_case(args.bundle, "ops" + ("-bf16" if bf16 else ""), prog, device,
                        [("run", run_args)], args.rtol or RTOL_MATMUL, bf16=bf16,
                        sanitize=True, failing=failing)
        except RuntimeError as e:
            return found + [("bundle", False, str(e))]
        found.append(("bundle", True, f"exported {len(checks)} cases as one program"))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True, help="path to the sbpc binary")
    ap.add_argument("--workdir", required=True, help="scratch directory for models and .npy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compiled", action="store_true",
                    help="check a compiled CPU program of all cases but the must-fail ones, "
                    "not the reference evaluator")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="sbpc compile --precision, with --compiled")
    ap.add_argument("--rtol", type=float,
                    help="one max-wise bound for every case, with --compiled (default: each "
                    "case's own)")
    ap.add_argument("--bundle", help="with --compiled, also export the program into this GPU "
                    "bundle directory (test/gpu/export.py)")
    ap.add_argument("--bundle-target", choices=["cpu", "cuda"], default="cuda")
    args = ap.parse_args()
    args.workdir = os.path.abspath(args.workdir)  # programs run from their case directory
    if (args.bundle or args.precision != "f32") and not args.compiled:
        sys.exit("check_ops: --bundle and --precision need --compiled")
    sbpc = shutil.which(args.sbpc) or os.path.abspath(args.sbpc)
    global COMPILED
    COMPILED = args.compiled
    rng = np.random.default_rng(args.seed)
    drawn, found = [], []
    for name, make in CASES:
        try:
            drawn.append((name, make(rng)))
        except Exception as e:  # a broken case must not hide the others
            drawn.append((name, None))
            found.append((name, False, f"{type(e).__name__}: {e}"))
    if args.compiled:
        found += run_compiled(args, sbpc, drawn)
    else:
        for idx, (name, made) in enumerate(drawn):
            if made is not None:
                try:
                    found.append((name, *run_case(sbpc, args.workdir, idx, made)))
                except Exception as e:
                    found.append((name, False, f"{type(e).__name__}: {e}"))
    passed = failed = 0
    for name, ok, msg in found:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}", flush=True)
        passed, failed = passed + ok, failed + (not ok)
    print(f"check_ops: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
