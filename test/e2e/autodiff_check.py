"""Whole-model gradient check: `--graph-autodiff` on a generated model (MLP
or GPT, with loss), its gradients from the reference evaluator, against
central finite differences of the loss along random directions (all
parameters at once, then each parameter tensor alone). The differences are
taken on independent float64 NumPy models (gpt2_numpy.py, and an MLP
here), with a step small enough that no ReLU kink is crossed.

usage: autodiff_check.py --model mlp|gpt --workdir W [--directions N]
Prints one line per direction and `autodiff-check: ok` or fails.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from npy_tools import read_safetensors  # noqa: E402
from models import generate  # noqa: E402
import gpt2_numpy  # noqa: E402

GPT = dict(layers=2, hidden=32, heads=4, seq=8, batch=2, vocab=64)
MLP = dict(layers=2, hidden=32, inputs=16, outputs=8, batch=4)


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "gpt"], required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--directions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path = lambda name: os.path.join(args.workdir, name)  # noqa: E731
    rng = np.random.default_rng(args.seed)
    spec = GPT if args.model == "gpt" else MLP
    inputs, flags = generate(args.model, spec, args.workdir, args.seed, rng)
    with open(path("g.mlir"), "w") as out:
        subprocess.run(["sbpc-opt", path("m.mlir"), "--graph-autodiff"], check=True, stdout=out)
    run("sbpc", "run", path("g.mlir"), "--params", path("p.safetensors"), *flags,
        "--output-dir", path("grads"))
    params = read_safetensors(path("p.safetensors"))
    grads = {name: np.load(path(f"grads/grad.{name}.npy"))
             for name in params if os.path.exists(path(f"grads/grad.{name}.npy"))}
    # Buffers a checkpoint carries but the graph does not use have no gradient.
    params = {k: v for k, v in params.items() if k in grads}

    def loss_at(p):
        """The loss in float64 NumPy at parameters `p` (name -> float64)."""
        if args.model == "gpt":
            glob = {n: p[n] for n in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")}
            layers = [{s: p[f"h.{i}.{s}"] for s in gpt2_numpy.LAYER_TENSORS}
                      for i in range(spec["layers"])]
            logits = gpt2_numpy.gpt2_forward(glob, layers, inputs["tokens"], spec["heads"])
            return gpt2_numpy.cross_entropy(logits, inputs["targets"])
        h = inputs["x"].astype(np.float64)
        for i in range(spec["layers"]):
            h = h @ p[f"fc{i}.weight"] + p[f"fc{i}.bias"]
            if i + 1 < spec["layers"]:
                h = np.maximum(h, 0.0)
        return gpt2_numpy.cross_entropy(h, inputs["targets"])

    base = {k: v.astype(np.float64) for k, v in params.items()}

    def check(label, direction):
        eps = 1e-6
        analytic = sum(float(np.sum(grads[k].astype(np.float64) * direction[k])) for k in direction)
        up = loss_at({k: v + eps * direction.get(k, 0) for k, v in base.items()})
        down = loss_at({k: v - eps * direction.get(k, 0) for k, v in base.items()})
        numeric = (up - down) / (2 * eps)
        err = abs(analytic - numeric) / max(abs(analytic), abs(numeric), 1e-3)
        print(f"{label}: analytic {analytic:+.6f} numeric {numeric:+.6f} rel err {err:.1e}")
        return err < 1e-3

    ok = True
    for i in range(args.directions):
        ok &= check(f"all parameters, direction {i}",
                    {k: rng.standard_normal(v.shape) for k, v in params.items()})
    for name in sorted(params):
        ok &= check(name, {name: rng.standard_normal(params[name].shape)})
    print("autodiff-check: " + ("ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
