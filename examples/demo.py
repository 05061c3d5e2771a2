"""`make demo`: generate a small GPT-2, evaluate it with sbpc's reference
evaluator, check it against an independent NumPy GPT-2, then compile it for
a 2 x 2 mesh (dp=2, tp=2) on CPU, run it on 4 MPI ranks and check that the
distributed result matches the single-device one.

usage: demo.py --sbpc PATH --workdir DIR
"""
import argparse
import json
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
    if rel >= 1e-4:
        return 1

    start = time.time()
    run(args.sbpc, "compile", path("gpt.mlir"), "--mesh", "dp=2,tp=2", "--strategy", "dp-tp",
        "--target", "cpu", "-o", path("dp2tp2"))
    report = json.load(open(path("dp2tp2/report.json")))
    print(f"  4. sbpc compile --mesh dp=2,tp=2 --strategy dp-tp --target cpu -> {path('dp2tp2')}: "
          f"{len(report['ranks'])} ranks, {len(report['boxings'])} reshards, "
          f"{time.time() - start:.1f} s")
    start = time.time()
    run(args.sbpc, "run", path("dp2tp2"), "--params", path("gpt.safetensors"),
        "--input", "tokens=" + path("tokens.npy"), "--input", "targets=" + path("targets.npy"),
        "--output-dir", path("out-dp2tp2"))
    seconds = time.time() - start
    measured = json.load(open(path("out-dp2tp2/run.json")))["ranks"]
    dist_logits = np.load(path("out-dp2tp2/logits.npy"))
    dist_loss = float(np.load(path("out-dp2tp2/loss.npy")))
    rel = np.abs(dist_logits - logits).max() / np.abs(logits).max()
    loss_rel = abs(dist_loss - loss) / abs(loss)
    print(f"  5. sbpc run on 4 MPI ranks -> logits and loss in {seconds:.2f} s; each rank sent "
          f"{measured[0]['comm_bytes'] / 1024:.1f} KiB (report.json: "
          f"{report['ranks'][0]['comm_bytes'] / 1024:.1f} KiB) and used an arena of "
          f"{measured[0]['arena_peak_bytes'] / 1024:.1f} KiB")
    ok = rel < 1e-5 and loss_rel < 1e-5
    print(f"     distributed vs single device: logits {'match' if ok else 'DIFFER'} to "
          f"{rel:.1e}, loss {dist_loss:.6f} vs {loss:.6f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
