"""`make demo`: generate a small GPT-2, evaluate it with sbpc's reference
evaluator, and check it against an independent NumPy GPT-2.

usage: demo.py --sbpc PATH --workdir DIR
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
from npy_tools import read_safetensors  # noqa: E402

MODEL = dict(layers=4, hidden=128, heads=4, seq=32, batch=2, vocab=256)


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path = lambda name: os.path.join(args.workdir, name)  # noqa: E731
    m = MODEL
    print(f"sbpc demo: a {m['layers']}-layer GPT-2 (hidden {m['hidden']}, {m['heads']} heads, "
          f"vocab {m['vocab']}) on a batch of {m['batch']} x {m['seq']} tokens\n")

    flags = [f"--{k}={v}" for k, v in m.items()]
    run(args.sbpc, "gen", "gpt", *flags, "--loss", "-o", path("gpt.mlir"),
        "--params", path("gpt.safetensors"), "--seed", "0")
    ops = sum(1 for line in open(path("gpt.mlir")) if " = graph." in line)
    params = read_safetensors(path("gpt.safetensors"))
    count = sum(v.size for v in params.values())
    print(f"  1. sbpc gen gpt     -> {path('gpt.mlir')}: {ops} graph ops")
    print(f"                         {path('gpt.safetensors')}: {len(params)} tensors, "
          f"{count / 1e6:.2f} M parameters (Hugging Face GPT-2 names)")

    rng = np.random.default_rng()
    tokens = rng.integers(0, m["vocab"], size=(m["batch"], m["seq"]))
    targets = np.roll(tokens, -1, axis=1)
    np.save(path("tokens.npy"), tokens)
    np.save(path("targets.npy"), targets)
    start = time.time()
    run(args.sbpc, "run", path("gpt.mlir"), "--params", path("gpt.safetensors"),
        "--input", "tokens=" + path("tokens.npy"), "--input", "targets=" + path("targets.npy"),
        "--output-dir", path("out"))
    seconds = time.time() - start
    logits = np.load(path("out/logits.npy"))
    loss = float(np.load(path("out/loss.npy")))
    print(f"  2. sbpc run         -> logits {list(logits.shape)} and loss in {seconds:.2f} s")
    print(f"     loss = {loss:.4f}; an untrained model guesses about uniformly: "
          f"ln({m['vocab']}) = {np.log(m['vocab']):.4f}")

    run("/usr/bin/python3", os.path.join(HERE, "..", "test", "e2e", "gpt2_numpy.py"),
        "--params", path("gpt.safetensors"), "--tokens", path("tokens.npy"),
        "--heads", str(m["heads"]), "--out-logits", path("numpy-logits.npy"))
    ref = np.load(path("numpy-logits.npy"))
    rel = np.abs(logits - ref).max() / np.abs(ref).max()
    verdict = "agree" if rel < 1e-4 else "DISAGREE"
    print(f"  3. independent NumPy GPT-2: logits {verdict} to {rel:.1e} relative error")
    return 0 if rel < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
