"""Small NumPy helpers for the end-to-end GPT-2 tests.

Provides a hand-written safetensors reader/writer (no `safetensors` package)
and a CLI with three subcommands:

  tokens OUT.npy --shape B S --high V --seed N
      int64 uniform random integers in [0, V), shape [B, S].
  random-gpt-params OUT.safetensors --layers L --hidden H --vocab V
                    --positions P --seed N
      float32 GPT-2 parameters with Hugging Face names/layouts, all non-trivial
      values, plus an extra `h.0.attn.bias` [1,1,P,P] causal-mask buffer.
  compare ACTUAL.npy EXPECTED.npy --rtol R
      shape + tolerance check; prints one line, exits 1 on failure.
  list FILE.safetensors
      one line per tensor: name, dtype, shape, min and max.
  rewrite-param IN.safetensors OUT.safetensors NAME --dtype F64|BF16
      copies the file with one tensor converted (to make bad inputs for tests).
  adamw-state IN.safetensors OUT.safetensors [--step S]
      copies the file adding AdamW's states as a first step reads them:
      moments zero, optimizer.step 1 (or S).

Run with a Python that has NumPy (e.g. /usr/bin/python3).
"""
import argparse
import contextlib
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

@contextlib.contextmanager
def mpi_session_env():
    """The environment for a program's launch.sh (mpirun) with an Open MPI
    session directory of its own, as `sbpc run` gives its jobs, removed
    afterwards: jobs started at once (device_check.py --jobs, tests beside
    one another) race to create the shared one, and the loser's mpirun
    cannot start. One set by the caller is kept."""
    env = dict(os.environ)
    if "OMPI_MCA_orte_tmpdir_base" in env:
        yield env
        return
    session = tempfile.mkdtemp(prefix="sbpc-mpi")  # short: it holds sockets
    env["OMPI_MCA_orte_tmpdir_base"] = session
    try:
        yield env
    finally:
        shutil.rmtree(session, ignore_errors=True)


_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """Return a dict name -> np.ndarray (copies) from a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        raw = data[begin:end]
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u16.view(np.float32)
        elif info["dtype"] in _DTYPES:
            arr = np.frombuffer(raw, dtype=_DTYPES[info["dtype"]])
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name}: size does not match shape {list(shape)}")
        out[name] = arr.reshape(shape).copy()
    return out


def write_safetensors(path, tensors, metadata=None, dtype_names=None):
    """Write a dict name -> np.ndarray as a safetensors file (8-byte aligned).

    `dtype_names` overrides the stored dtype name of some tensors (BF16 is
    written as its raw uint16 bits)."""
    dtype_names = dtype_names or {}
    header, chunks, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.asarray(arr)  # (ascontiguousarray would make a scalar 1-D)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        key = arr.dtype.str
        if key not in _NAMES and name not in dtype_names:
            raise ValueError(f"tensor {name}: unsupported dtype {arr.dtype}")
        raw = arr.tobytes()
        header[name] = {"dtype": dtype_names.get(name) or _NAMES[key], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-(8 + len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in chunks:
            f.write(raw)


def random_gpt_params(layers, hidden, vocab, positions, seed):
    """GPT-2 parameters (HF names, Conv1D weights [in, out]), float32."""
    rng = np.random.default_rng(seed)
    H = hidden

    def w(*shape):
        return rng.normal(0.0, 0.2, shape).astype(np.float32)

    def b(n):
        return rng.normal(0.0, 0.1, (n,)).astype(np.float32)

    def g(n):
        return (1.0 + rng.normal(0.0, 0.1, (n,))).astype(np.float32)

    p = {"wte.weight": w(vocab, H), "wpe.weight": w(positions, H)}
    for i in range(layers):
        pre = f"h.{i}."
        p[pre + "ln_1.weight"], p[pre + "ln_1.bias"] = g(H), b(H)
        p[pre + "attn.c_attn.weight"], p[pre + "attn.c_attn.bias"] = w(H, 3 * H), b(3 * H)
        p[pre + "attn.c_proj.weight"], p[pre + "attn.c_proj.bias"] = w(H, H), b(H)
        p[pre + "ln_2.weight"], p[pre + "ln_2.bias"] = g(H), b(H)
        p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"] = w(H, 4 * H), b(4 * H)
        p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"] = w(4 * H, H), b(H)
        if i == 0:  # HF checkpoints carry this causal-mask buffer; consumers ignore it.
            mask = np.tril(np.ones((positions, positions), np.float32))
            p[pre + "attn.bias"] = mask.reshape(1, 1, positions, positions)
    p["ln_f.weight"], p["ln_f.bias"] = g(H), b(H)
    return p


def compare(actual, expected, rtol):
    """Return (ok, message) for the tolerance check described in the CLI help."""
    if actual.shape != expected.shape:
        return False, (f"compare: shape mismatch: actual {list(actual.shape)} "
                       f"expected {list(expected.shape)}: FAIL")
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    max_ref = float(np.max(np.abs(e))) if e.size else 0.0
    scale = max(max_ref, np.finfo(np.float64).tiny)
    err = float(np.max(np.abs(a - e))) if e.size else 0.0
    if not np.isfinite(err):
        err = float("inf")
    ok = err <= rtol * scale and bool(np.allclose(a, e, rtol=rtol, atol=rtol * max_ref))
    msg = (f"compare: shape {list(e.shape)} max_abs_err {err:.6g} max_abs_ref {max_ref:.6g} "
           f"rel {err / scale:.6g}: {'ok' if ok else 'FAIL'}")
    return ok, msg


def relative_errors(pairs):
    """(max-wise, norm-wise) relative error of one output over its
    (expected, actual) pairs (its shards, or the whole tensor):
    max |a - e| / max |e|, and ||a - e|| / ||e|| in the 2-norm over every
    element. Both inf if a value is not finite.

    The max-wise error bounds every element by the output's scale: f32's
    check. bf16 rounds each value to 2^-8 of itself, and where a result is
    a difference of nearly equal bf16 values (softmax's gradient) a few
    elements err by several roundings: its tolerance is norm-wise, with a
    looser max-wise bound for outliers (--norm-rtol in the suites)."""
    max_diff = max_ref = sq_diff = sq_ref = 0.0
    for e, a in pairs:
        if not e.size:
            continue
        e = e.astype(np.float64)
        d = a.astype(np.float64) - e
        if not np.all(np.isfinite(d)):
            return float("inf"), float("inf")
        max_diff = max(max_diff, float(np.max(np.abs(d))))
        max_ref = max(max_ref, float(np.max(np.abs(e))))
        sq_diff += float(np.sum(d * d))
        sq_ref += float(np.sum(e * e))
    return max_diff / max(max_ref, 1e-30), np.sqrt(sq_diff) / max(np.sqrt(sq_ref), 1e-30)


def round_to_bf16(a):
    """`a` as f32 with every value rounded to the nearest bf16 (ties to even)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(a))


# bf16's unit roundoff (2^-8 relative, as the suites count it) and the
# norm-wise change a well-conditioned output shows when only its inputs are
# rounded to bf16: up to about 2u on the test models.
BF16_U = 2.0 ** -8
BF16_WELL_CONDITIONED = 4 * BF16_U


def bf16_conditioning(expected, perturbed):
    """How much wider than a well-conditioned output's an output's bf16
    tolerance must be: its f32 reference's norm-wise change when only the
    parameters and float inputs are rounded to bf16 (`perturbed`), over
    BF16_WELL_CONDITIONED, and at least 1.

    A gradient that is a sum of nearly cancelling terms (a layer norm's
    weight gradient over few tokens, on some seeds) moves by several times
    more than the rest under that one rounding; a bf16 program, which rounds
    at every op, errs on it by the same factor (measured: a bf16 run's
    norm-wise error is 1 to 2.2 times this change on every output of the
    test GPT), so its bounds widen by it and by nothing else."""
    change = relative_errors([(expected, perturbed)])[1]
    return max(1.0, change / BF16_WELL_CONDITIONED)


def tolerance_problem(name, errors, rtol, norm_rtol=None):
    """None, or why `errors` (relative_errors) exceed rtol (max-wise) or
    norm_rtol (norm-wise, when given)."""
    err, norm = errors
    if not err <= rtol:  # also catches NaN
        return f"{name}: relative error {err:.2e} > {rtol:g}"
    if norm_rtol is not None and not norm <= norm_rtol:
        return f"{name}: norm-wise relative error {norm:.2e} > {norm_rtol:g}"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokens", help="random int64 token ids")
    t.add_argument("out")
    t.add_argument("--shape", type=int, nargs="+", required=True)
    t.add_argument("--high", type=int, required=True)
    t.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("random-gpt-params", help="random GPT-2 safetensors file")
    r.add_argument("out")
    for name in ("layers", "hidden", "vocab", "positions"):
        r.add_argument("--" + name, type=int, required=True)
    r.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("compare", help="compare two .npy files")
    c.add_argument("actual")
    c.add_argument("expected")
    c.add_argument("--rtol", type=float, required=True)
    ls = sub.add_parser("list", help="list the tensors of a safetensors file")
    ls.add_argument("file")
    rw = sub.add_parser("rewrite-param", help="copy a safetensors file converting one tensor")
    rw.add_argument("src")
    rw.add_argument("out")
    rw.add_argument("name")
    rw.add_argument("--dtype", choices=["F64", "BF16"], required=True)
    st = sub.add_parser("adamw-state", help="copy a safetensors file adding the AdamW states "
                        "a first step reads (optimizer.m.*, optimizer.v.* zero, optimizer.step 1)")
    st.add_argument("src")
    st.add_argument("out")
    st.add_argument("--step", type=float, default=1.0, help="optimizer.step's value")
    args = ap.parse_args(argv)

    if args.cmd == "tokens":
        rng = np.random.default_rng(args.seed)
        np.save(args.out, rng.integers(0, args.high, size=tuple(args.shape), dtype=np.int64))
    elif args.cmd == "random-gpt-params":
        write_safetensors(args.out, random_gpt_params(
            args.layers, args.hidden, args.vocab, args.positions, args.seed))
    elif args.cmd == "adamw-state":
        tensors = read_safetensors(args.src)
        for name, value in list(tensors.items()):
            tensors["optimizer.m." + name] = np.zeros_like(value)
            tensors["optimizer.v." + name] = np.zeros_like(value)
        tensors["optimizer.step"] = np.array(args.step, np.float32)
        write_safetensors(args.out, tensors)
    elif args.cmd == "list":
        for name, arr in read_safetensors(args.file).items():
            shape = "[" + ", ".join(str(d) for d in arr.shape) + "]"
            print(f"{name} {_NAMES[arr.dtype.str]} {shape} min {arr.min():g} max {arr.max():g}")
    elif args.cmd == "rewrite-param":
        tensors = read_safetensors(args.src)
        if args.dtype == "F64":
            tensors[args.name] = tensors[args.name].astype(np.float64)
            write_safetensors(args.out, tensors)
        else:
            bits = tensors[args.name].astype(np.float32).view(np.uint32) >> 16
            tensors[args.name] = bits.astype(np.uint16)
            write_safetensors(args.out, tensors, dtype_names={args.name: "BF16"})
    else:
        ok, msg = compare(np.load(args.actual), np.load(args.expected), args.rtol)
        print(msg)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
