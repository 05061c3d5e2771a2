"""GPU benchmark: GPT-2 small and medium on one GPU, sbpc against PyTorch.

For each model (GPT-2 small: 12 layers, hidden 768, 12 heads; medium: 24
layers, hidden 1024, 16 heads; vocabulary 50257, sequence --seq, batch
--batch) and each workload (the forward with its loss, and one AdamW
training step):

- sbpc: `sbpc gen` the model with random parameters, `sbpc compile --mesh
  x=1 --target cuda` (and `--train`), `sbpc run --repeat N`; the time of a
  run is run.json's `repeats[].compute_seconds` (loading and storing
  shards excluded), the median over the runs after the first;
- PyTorch eager and `torch.compile`: the same model written here (pre-LN
  blocks, causal attention, tanh GELU, tied head) on the same parameters,
  timed with CUDA events over the same number of runs after warm-up.

All in f32 without TF32 (sbpc's GEMMs are full f32; PyTorch is told not to
use TF32), so the columns compare like for like. Tokens/s is batch x seq /
time; model FLOP utilization is the model's FLOPs (2 per multiply-add of
every GEMM, attention included; a training step is 3x the forward) over
time and the GPU's f32 peak (--peak-tflops, else known from its name).

Writes OUT/results.json (every measurement) and OUT/table.md, and prints
the table. PyTorch columns say why they are missing when torch or its
CUDA is not there.

usage: run.py --sbpc build/bin/sbpc --out bench/gpu [--models small,medium]
              [--batch 8] [--seq 1024] [--repeat 10] [--workdir DIR]
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np

MODELS = {"small": dict(layers=12, hidden=768, heads=12),
          "medium": dict(layers=24, hidden=1024, heads=16)}
VOCAB = 50257
# Dense f32 (no tensor cores) peaks, TFLOP/s.
PEAKS = {"H100 PCIe": 51.2, "H100": 66.9, "H200": 66.9, "A100": 19.5}


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(" ".join(cmd[:3]) + ": " + (done.stderr.strip().splitlines() or ["?"])[-1])
    return done.stdout


def gpu_name():
    try:
        return run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()[0].strip()
    except (OSError, RuntimeError, IndexError):
        return None


def peak_of(name, given):
    if given:
        return given
    for key in sorted(PEAKS, key=len, reverse=True):
        if name and key in name:
            return PEAKS[key]
    return None


def flops(spec, batch, seq, train):
    """Multiply-adds x 2 of the forward's GEMMs (layers, attention, head); x3 to train."""
    L, H = spec["layers"], spec["hidden"]
    tokens = batch * seq
    forward = 2 * tokens * (12 * L * H * H + H * VOCAB) + 4 * L * batch * seq * seq * H
    return forward * (3 if train else 1)


def sbpc_time(args, work, name, spec, train):
    """Median compute seconds of a run after the first, and sbpc's version of the model."""
    model, params = os.path.join(work, name + ".mlir"), os.path.join(work, name + ".safetensors")
    if not os.path.exists(params):
        run([args.sbpc, "gen", "gpt", "--layers", str(spec["layers"]), "--hidden", str(spec["hidden"]),
             "--heads", str(spec["heads"]), "--seq", str(args.seq), "--batch", str(args.batch),
             "--vocab", str(VOCAB), "--positions", str(args.seq), "--loss", "-o", model,
             "--params", params, "--seed", "1"])
    rng = np.random.default_rng(0)
    tokens, targets = os.path.join(work, "tokens.npy"), os.path.join(work, "targets.npy")
    np.save(tokens, rng.integers(0, VOCAB, size=(args.batch, args.seq), dtype=np.int64))
    np.save(targets, rng.integers(0, VOCAB, size=(args.batch, args.seq), dtype=np.int64))
    out = os.path.join(work, name + ("-train" if train else "-forward"))
    run([args.sbpc, "compile", model, "--mesh", "x=1", "--strategy", "dp", "--target", "cuda",
         "--cuda-arch", args.cuda_arch, *(["--train", "--optimizer", "adamw"] if train else []),
         "-o", out])
    inputs = ["--input", "tokens=" + tokens, "--input", "targets=" + targets]
    state = params
    if train:  # optimizer states: one step from zeros writes them with the parameters
        run([args.sbpc, "run", out, "--params", params, *inputs, "--steps", "1",
             "--output-dir", out + "-state"])
        state = os.path.join(out + "-state", "params.safetensors")
    res = out + "-res"
    run([args.sbpc, "run", out, "--params", state, *inputs, "--repeat", str(args.repeat),
         "--output-dir", res])
    repeats = json.load(open(os.path.join(res, "run.json")))["ranks"][0]["repeats"]
    times = [r["compute_seconds"] for r in repeats[1:]] or [repeats[0]["compute_seconds"]]
    return statistics.median(times), tokens, targets


def torch_times(args, work, name, spec, train, tokens_path, targets_path):
    """{eager, compile}: median seconds, or a reason string."""
    try:
        import torch
    except ImportError:
        return {"eager": "torch not installed", "compile": "torch not installed"}
    if not torch.cuda.is_available():
        return {"eager": "torch has no CUDA", "compile": "torch has no CUDA"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "test", "e2e"))
    from npy_tools import read_safetensors  # noqa: E402
    dev = torch.device("cuda")
    params = {k: torch.tensor(v, device=dev, requires_grad=train)
              for k, v in read_safetensors(os.path.join(work, name + ".safetensors")).items()}
    tokens = torch.tensor(np.load(tokens_path), device=dev)
    targets = torch.tensor(np.load(targets_path), device=dev)
    H, heads = spec["hidden"], spec["heads"]

    def loss_of(p, tok, tgt):
        F = torch.nn.functional
        b, s = tok.shape
        x = p["wte.weight"][tok] + p["wpe.weight"][:s]
        mask = torch.full((s, s), float("-inf"), device=dev).triu(1)
        for i in range(spec["layers"]):
            q = f"h.{i}."
            h = F.layer_norm(x, (H,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
            qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
            qh, kh, vh = (t.reshape(b, s, heads, H // heads).transpose(1, 2)
                          for t in qkv.split(H, dim=-1))
            att = (qh @ kh.transpose(-1, -2)) / (H // heads) ** 0.5 + mask
            y = (att.softmax(-1) @ vh).transpose(1, 2).reshape(b, s, H)
            x = x + y @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
            h = F.layer_norm(x, (H,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
            h = F.gelu(h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
        x = F.layer_norm(x, (H,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
        logits = x @ p["wte.weight"].t()
        return F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1), reduction="mean")

    optimizer = torch.optim.AdamW(list(params.values()), lr=1e-4) if train else None

    def step(fn):
        if not train:
            with torch.no_grad():
                return fn(params, tokens, targets)
        optimizer.zero_grad(set_to_none=True)
        loss = fn(params, tokens, targets)
        loss.backward()
        optimizer.step()
        return loss

    def timed(fn):
        for _ in range(2):
            step(fn)
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeat - 1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(fn)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    result = {"eager": timed(loss_of)}
    try:
        result["compile"] = timed(torch.compile(loss_of))
    except Exception as e:  # noqa: BLE001 - report, do not crash the benchmark
        result["compile"] = "torch.compile failed: " + str(e).splitlines()[0][:80]
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="small,medium")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--peak-tflops", type=float, help="the GPU's f32 peak (default: by its name)")
    ap.add_argument("--workdir", help="default: OUT/work (removed at the end)")
    args = ap.parse_args()
    name = gpu_name()
    if not name:
        sys.exit("bench/gpu: no GPU here (nvidia-smi lists none)")
    peak = peak_of(name, args.peak_tflops)
    work = args.workdir or os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    records = []
    for model in args.models.split(","):
        spec = MODELS[model]
        for train in (False, True):
            what = f"GPT-2 {model} {'training step' if train else 'forward'}"
            print(f"bench/gpu: {what} ...", file=sys.stderr, flush=True)
            rec = {"model": model, "workload": "train" if train else "forward", **spec,
                   "batch": args.batch, "seq": args.seq, "flops": flops(spec, args.batch, args.seq, train)}
            try:
                seconds, tok, tgt = sbpc_time(args, work, model, spec, train)
                rec["sbpc_seconds"] = seconds
                for k, v in torch_times(args, work, model, spec, train, tok, tgt).items():
                    rec[f"torch_{k}_seconds" if isinstance(v, float) else f"torch_{k}_missing"] = v
            except RuntimeError as e:
                rec["error"] = str(e)
            records.append(rec)
    header = ("| model | workload | system | ms | tokens/s | MFU (f32) |\n"
              "|---|---|---|---:|---:|---:|\n")
    rows = []
    for r in records:
        for system, key in (("sbpc", "sbpc"), ("PyTorch eager", "torch_eager"),
                            ("torch.compile", "torch_compile")):
            seconds = r.get(key + "_seconds")
            if key == "sbpc" and "error" in r:
                rows.append(f"| {r['model']} | {r['workload']} | {system} | failed: {r['error']} | | |")
            elif isinstance(seconds, float):
                tps = r["batch"] * r["seq"] / seconds
                mfu = f"{100 * r['flops'] / seconds / (peak * 1e12):.1f}%" if peak else "?"
                rows.append(f"| {r['model']} | {r['workload']} | {system} | {1e3 * seconds:.1f} | "
                            f"{tps:,.0f} | {mfu} |")
            elif key + "_missing" in r:
                rows.append(f"| {r['model']} | {r['workload']} | {system} | {r[key + '_missing']} | | |")
    table = header + "\n".join(rows) + "\n"
    stamp = datetime.date.today().isoformat()
    note = (f"{name}, {stamp}; batch {args.batch} x seq {args.seq}, f32 without TF32, "
            f"median of {args.repeat - 1} runs after a warm-up; MFU against "
            f"{peak if peak else '?'} TFLOP/s.\n\n")
    os.makedirs(args.out, exist_ok=True)
    json.dump({"gpu": name, "date": stamp, "peak_tflops": peak, "records": records},
              open(os.path.join(args.out, "results.json"), "w"), indent=2)
    open(os.path.join(args.out, "table.md"), "w").write(note + table)
    print(note + table)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
