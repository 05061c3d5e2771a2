"""Distributed training equals single-device training.

Generates a model with a loss (MLP or 2-layer GPT) and random parameters,
trains it for --steps steps on one CPU (`sbpc-opt --graph-autodiff
--graph-optimizer`, then `sbpc run step.mlir --steps N`), and for every
case STRATEGY@MESH compiles it with `sbpc compile --train --target cpu` and
trains it on the ranks (`sbpc run DIR --steps N`). Checks the loss of every
step and every final parameter and optimizer state to --rtol relative
error (max |a - b| / max |b| per tensor). Prints one line per case.

usage: train_suite.py --workdir W --model mlp|gpt [--optimizer adamw|sgd]
           [--lr X] [--momentum M] [--steps N] --cases STRATEGY@MESH ...
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from npy_tools import read_safetensors  # noqa: E402
from models import generate  # noqa: E402

GPT = dict(layers=2, hidden=32, heads=4, seq=8, batch=4, vocab=64)
MLP = dict(layers=2, hidden=32, inputs=16, outputs=8, batch=8)


def sbpc(*cmd, tool="sbpc"):
    done = subprocess.run([tool, *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["?"])[-1])
    return done.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", choices=["mlp", "gpt"], required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--eps", type=float, default=1e-8, help="AdamW's epsilon")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--cases", nargs="+", required=True)
    args = ap.parse_args()
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    path = lambda name: os.path.join(work, name)  # noqa: E731
    rng = np.random.default_rng(args.seed)
    spec = GPT if args.model == "gpt" else MLP
    inputs, flags = generate(args.model, spec, work, args.seed, rng)
    train = ["--params", path("p.safetensors"), *flags, "--steps", str(args.steps)]
    options = f"optimizer={args.optimizer} lr={args.lr} momentum={args.momentum} eps={args.eps}"
    with open(path("step.mlir"), "w") as out:
        out.write(sbpc(path("m.mlir"), "--graph-autodiff", f"--graph-optimizer={options}",
                       tool="sbpc-opt"))
    sbpc("run", path("step.mlir"), *train, "--output-dir", path("reference"))
    losses = np.load(path("reference/losses.npy"))
    reference = read_safetensors(path("reference/params.safetensors"))
    print(f"train-suite: {args.model}, {args.optimizer}, {args.steps} steps, loss "
          f"{losses[0]:.4f} -> {losses[-1]:.4f}")
    if not losses[-1] < losses[0]:
        print("FAIL reference: the loss did not fall")
        sys.exit(1)
    failed = 0
    for case in args.cases:
        strategy, mesh = case.split("@")
        out, res = path(case + "-out"), path(case + "-res")
        try:
            sbpc("compile", path("m.mlir"), "--mesh", mesh, "--strategy", strategy, "--train",
                 "--optimizer", args.optimizer, "--lr", str(args.lr), "--momentum",
                 str(args.momentum), "--eps", str(args.eps), "--target", "cpu", "-o", out)
            sbpc("run", out, *train, "--output-dir", res)
        except RuntimeError as e:
            print(f"FAIL {case}: {e}")
            failed += 1
            continue
        got = np.load(os.path.join(res, "losses.npy"))
        params = read_safetensors(os.path.join(res, "params.safetensors"))
        errors = {"losses": float(np.max(np.abs(got - losses)) / np.max(np.abs(losses)))}
        for name, expected in reference.items():
            errors[name] = float(np.max(np.abs(params[name] - expected)) /
                                 max(np.max(np.abs(expected)), 1e-30))
        worst = max(errors, key=errors.get)
        ok = errors[worst] <= args.rtol and set(params) == set(reference)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {case}: {len(params)} tensors, worst {worst} "
              f"{errors[worst]:.1e}")
    print(f"train-suite: {len(args.cases) - failed} ok, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
