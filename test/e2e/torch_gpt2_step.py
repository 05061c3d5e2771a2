"""One GPT-2 training step: sbpc against PyTorch (CPU, test only).

Generates a GPT-2-tiny with a loss and random parameters, and builds the
same model in PyTorch from the same safetensors file, written here from
the published architecture (pre-LN blocks, causal attention, tanh GELU,
tied LM head; Hugging Face's Conv1D layout, x @ W + b). Then checks, to
--rtol relative error (max |a - b| / max |b| per tensor):
  1. the loss and every parameter's gradient of sbpc's differentiated model
     (`sbpc-opt --graph-autodiff`) on one CPU, and compiled for each
     STRATEGY@MESH of --cases and run on the ranks, against
     `loss.backward()`;
  2. one AdamW step (`sbpc compile --train`, `sbpc run --steps 1`) against
     `torch.optim.AdamW`: every parameter and both moments.
Prints one line per check; exits 1 if any fails.

usage: torch_gpt2_step.py --workdir W [--cases dp-tp@dp=2,tp=2 ...]
"""
import argparse
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import fresh_workdir, generate, sbpc  # noqa: E402
from npy_tools import read_safetensors  # noqa: E402

try:
    import torch
except ImportError:  # a clear skip, not a crash: python3-torch is test-only
    print("torch-gpt2: SKIPPED, python3-torch is not installed (apt-get install python3-torch)")
    sys.exit(0)

SPEC = dict(layers=2, hidden=32, heads=4, seq=8, batch=4, vocab=64)
LR, WEIGHT_DECAY, EPS = 1e-3, 1e-2, 1e-5


def torch_gpt2(params, tokens, targets, heads):
    """The loss of GPT-2 on `tokens` predicting `targets`, in float64."""
    p = params
    batch, seq = tokens.shape
    hidden = p["wte.weight"].shape[1]
    d = hidden // heads

    def ln(x, name):
        return torch.nn.functional.layer_norm(x, (hidden,), p[name + ".weight"],
                                              p[name + ".bias"], eps=1e-5)

    def linear(x, name):
        return x @ p[name + ".weight"] + p[name + ".bias"]

    x = p["wte.weight"][tokens] + p["wpe.weight"][:seq]
    mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    for i in range(len([k for k in p if k.endswith(".ln_1.weight")])):
        h = f"h.{i}."
        qkv = linear(ln(x, h + "ln_1"), h + "attn.c_attn")
        q, k, v = (t.reshape(batch, seq, heads, d).transpose(1, 2) for t in qkv.split(hidden, -1))
        scores = (q @ k.transpose(-1, -2)) / np.sqrt(d)
        scores = scores.masked_fill(~mask, float("-inf"))
        context = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = x + linear(context, h + "attn.c_proj")
        f = torch.nn.functional.gelu(linear(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
        x = x + linear(f, h + "mlp.c_proj")
    logits = ln(x, "ln_f") @ p["wte.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cases", nargs="*", default=[])
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    work = args.workdir
    path = fresh_workdir(work)
    rng = np.random.default_rng(args.seed)
    inputs, flags = generate("gpt", SPEC, work, args.seed, rng)
    # The model's parameters (the file may hold more, e.g. Hugging Face's
    # attention mask buffer h.N.attn.bias).
    names = set(re.findall(r'graph\.param = "([^"]+)"', open(path("m.mlir")).read()))
    stored = {k: v for k, v in read_safetensors(path("p.safetensors")).items() if k in names}

    # PyTorch: the loss, its gradients, and one AdamW step.
    torch.manual_seed(0)
    params = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in stored.items()}
    loss = torch_gpt2(params, torch.tensor(inputs["tokens"]), torch.tensor(inputs["targets"]),
                      SPEC["heads"])
    loss.backward()
    # A parameter the loss does not reach has no gradient in PyTorch and a
    # zero one in sbpc.
    grads = {k: t.grad.numpy().copy() if t.grad is not None else np.zeros(t.shape)
             for k, t in params.items()}
    unreached = [k for k, t in params.items() if t.grad is None]
    for k in unreached:  # sbpc updates them too (weight decay), from a zero gradient
        params[k].grad = torch.zeros_like(params[k])
    optimizer = torch.optim.AdamW(params.values(), lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS)
    optimizer.step()
    stepped = {k: t.detach().numpy() for k, t in params.items()}
    for k, t in params.items():
        stepped["optimizer.m." + k] = optimizer.state[t]["exp_avg"].numpy()
        stepped["optimizer.v." + k] = optimizer.state[t]["exp_avg_sq"].numpy()
    print(f"torch-gpt2: torch {torch.__version__}, GPT-2 {SPEC['layers']} layers, hidden "
          f"{SPEC['hidden']}, loss {loss.item():.6f}, {len(grads)} gradients"
          + (f" (not reached: {', '.join(unreached)})" if unreached else ""))

    failed = 0

    def check(what, loss_value, tensors, expected):
        nonlocal failed
        errors = {"loss": abs(loss_value - loss.item()) / abs(loss.item())} if loss_value is not None else {}
        missing = sorted(set(expected) - set(tensors))
        for name, value in expected.items():
            if name in tensors:
                errors[name] = rel(tensors[name].astype(np.float64), value)
        worst = max(errors, key=errors.get)
        ok = errors[worst] <= args.rtol and not missing
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {len(errors)} tensors, worst {worst} "
              f"{errors[worst]:.1e}" + (f", missing {missing}" if missing else ""))

    # 1. Gradients: on one CPU, and laid out on ranks.
    with open(path("grads.mlir"), "w") as out:
        out.write(sbpc(path("m.mlir"), "--graph-autodiff", tool="sbpc-opt"))
    runs = [("one CPU", path("grads.mlir"))]
    for case in args.cases:
        strategy, mesh = case.split("@")
        out = path(case + "-out")
        sbpc("compile", path("grads.mlir"), "--mesh", mesh, "--strategy", strategy, "--target",
             "cpu", "-o", out)
        runs.append((case, out))
    for what, target in runs:
        res = path(what.replace(" ", "-") + "-res")
        sbpc("run", target, "--params", path("p.safetensors"), *flags, "--output-dir", res)
        got = {k: np.load(os.path.join(res, f"grad.{k}.npy")) for k in grads
               if os.path.exists(os.path.join(res, f"grad.{k}.npy"))}
        check(f"loss and gradients, {what}", float(np.load(os.path.join(res, "loss.npy"))),
              got, grads)

    # 2. One AdamW step, on the ranks of the first case (or one CPU).
    strategy, mesh = (args.cases[0] if args.cases else "dp@x=1").split("@")
    sbpc("compile", path("m.mlir"), "--mesh", mesh, "--strategy", strategy, "--train",
         "--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(WEIGHT_DECAY), "--eps",
         str(EPS), "--target", "cpu", "-o", path("step-out"))
    sbpc("run", path("step-out"), "--params", path("p.safetensors"), *flags, "--steps", "1",
         "--output-dir", path("step-res"))
    after = read_safetensors(path("step-res/params.safetensors"))
    check(f"one AdamW step, {strategy}@{mesh}", float(np.load(path("step-res/losses.npy"))[0]),
          after, stepped)
    print(f"torch-gpt2: {'all match' if not failed else f'{failed} failed'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
