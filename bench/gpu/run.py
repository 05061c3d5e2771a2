"""GPU benchmark: GPT-2 small and medium on one GPU, sbpc against PyTorch.

For each model (GPT-2 small: 12 layers, hidden 768, 12 heads; medium: 24
layers, hidden 1024, 16 heads; vocabulary 50257, sequence --seq, batch
--batch) and each workload (the forward with its loss, and one AdamW
training step):

- sbpc: `sbpc gen` the model, `sbpc compile --mesh x=1 --target cuda` (and
  `--train`), then the ranks' `launch.sh --repeat N` on random parameters
  (GPT-2's initialization; optimizer states zero); the time of a run is the
  rank's `repeats[].compute_seconds` (loading and storing excluded), the
  median over the runs after the first;
- PyTorch eager and `torch.compile`: the same model written here (pre-LN
  blocks, causal attention, tanh GELU, tied head) on the same parameters,
  timed with CUDA events over the same number of runs after warm-up.

All in f32 without TF32 (sbpc's GEMMs are full f32; PyTorch is told not to
use TF32), so the columns compare like for like. Tokens/s is batch x seq /
time; model FLOP utilization is the model's FLOPs (2 per multiply-add of
every GEMM, attention included; a training step is 3x the forward) over
time and the GPU's f32 peak (--peak-tflops, else known from its name).

Writes OUT/bench.json (every measurement) and OUT/bench.md, and prints
the table. PyTorch columns say why they are missing when torch or its
CUDA is not there.

The two halves can run on two machines (test/gpu/bundle.py): --prepare DIR
compiles the programs where sbpc is (no GPU needed), --programs DIR
measures them where the GPU is (no sbpc needed). With neither, both here.

usage: run.py --sbpc build/bin/sbpc --out bench/gpu [--models small,medium]
              [--batch 8] [--seq 1024] [--repeat 10] [--workdir DIR]
       run.py --sbpc S --prepare DIR [--models ...] [--batch B] [--seq S] [--target cuda|cpu]
       run.py --programs DIR --out OUT [--repeat 10] [--workdir DIR]
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

MODELS = {"tiny": dict(layers=2, hidden=64, heads=4),  # to try the script, not to report
          "small": dict(layers=12, hidden=768, heads=12),
          "medium": dict(layers=24, hidden=1024, heads=16)}
VOCAB = 50257
HERE = os.path.dirname(os.path.abspath(__file__))
# Dense f32 (no tensor cores) peaks, TFLOP/s.
PEAKS = {"H100 PCIe": 51.2, "H100": 66.9, "H200": 66.9, "A100": 19.5}


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines()
                 if line.strip(" -")] or ["?"]
        # A rank's own report (not MPI's banner after it) says what went wrong.
        ranks = [line for line in lines if line.startswith("rank ") and " failed in " in line]
        raise RuntimeError(os.path.basename(cmd[0]) + ": " + (ranks or lines)[-1])
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


def prepare(args, spec_names):
    """Compiles every model's forward and training step into args.prepare;
    writes programs.json there."""
    os.makedirs(args.prepare, exist_ok=True)
    programs = []
    for name in spec_names:
        spec = MODELS[name]
        model = os.path.join(args.prepare, name + ".mlir")
        run([args.sbpc, "gen", "gpt", "--layers", str(spec["layers"]), "--hidden",
             str(spec["hidden"]), "--heads", str(spec["heads"]), "--seq", str(args.seq), "--batch",
             str(args.batch), "--vocab", str(VOCAB), "--positions", str(args.seq), "--loss", "-o",
             model])
        for train in (False, True):
            out = os.path.join(args.prepare, name + ("-train" if train else "-forward"))
            print(f"bench/gpu: compiling {os.path.basename(out)}", file=sys.stderr, flush=True)
            run([args.sbpc, "compile", model, "--mesh", "x=1", "--strategy", "dp", "--target",
                 args.target, *(["--cuda-arch", args.cuda_arch] if args.target == "cuda" else []),
                 *(["--train", "--optimizer", "adamw"] if train else []), "-o", out])
            programs.append({"model": name, "workload": "train" if train else "forward",
                             "dir": os.path.basename(out)})
        os.remove(model)
    json.dump({"batch": args.batch, "seq": args.seq, "target": args.target, "programs": programs},
              open(os.path.join(args.prepare, "programs.json"), "w"), indent=1)


def draw_params(program, seed):
    """GPT-2's initialization for every parameter the program loads
    (weights N(0, 0.02), layer-norm scales 1, biases 0), optimizer states
    zero and the step counter 1, as `sbpc run --steps` starts them."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for load in json.load(open(os.path.join(program, "program.json")))["loads"]:
        if load["kind"] != "param":
            continue
        name, shape = load["name"], load["stored_shape"]
        if name == "optimizer.step":
            tensors[name] = np.ones(shape, np.float32)
        elif name.startswith("optimizer.") or name.endswith(".bias"):
            tensors[name] = np.zeros(shape, np.float32)
        elif ".ln_" in name or name.startswith("ln_"):
            tensors[name] = np.ones(shape, np.float32)
        else:
            tensors[name] = (0.02 * rng.standard_normal(shape, dtype=np.float32))
    return tensors


def sbpc_time(args, program, params, tokens, targets):
    """Median compute seconds of a run after the first, from the rank's own timing."""
    res = os.path.join(args.workdir, os.path.basename(program) + "-res")
    os.makedirs(os.path.join(res, ".shards"), exist_ok=True)
    run([os.path.join(program, "launch.sh"), "--params", params, "--input", "tokens=" + tokens,
         "--input", "targets=" + targets, "--repeat", str(args.repeat), "--output-dir", res])
    repeats = json.load(open(os.path.join(res, ".shards", "rank0.json")))["repeats"]
    shutil.rmtree(res, ignore_errors=True)
    times = [r["compute_seconds"] for r in repeats[1:]] or [repeats[0]["compute_seconds"]]
    return statistics.median(times)


def torch_times(args, spec, train, weights, tokens, targets):
    """{eager, compile}: median seconds, or a reason string."""
    try:
        import torch
    except ImportError:
        return {"eager": "torch not installed", "compile": "torch not installed"}
    if not torch.cuda.is_available():
        return {"eager": "torch has no CUDA", "compile": "torch has no CUDA"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    params = {k: torch.tensor(v, device=dev, requires_grad=train) for k, v in weights.items()
              if not k.startswith("optimizer.")}
    tokens = torch.tensor(tokens, device=dev)
    targets = torch.tensor(targets, device=dev)
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
        for _ in range(max(1, args.repeat - 1)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(fn)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)

    result = {}
    try:  # report, do not crash the benchmark (out of memory, say)
        result["eager"] = timed(loss_of)
    except Exception as e:  # noqa: BLE001
        result["eager"] = "PyTorch eager failed: " + str(e).splitlines()[0][:80]
    try:
        result["compile"] = timed(torch.compile(loss_of))
    except Exception as e:  # noqa: BLE001 - report, do not crash the benchmark
        result["compile"] = "torch.compile failed: " + str(e).splitlines()[0][:80]
    # The next sbpc program runs in another process: give the memory back.
    params.clear()
    optimizer = None  # noqa: F841 - the closures' reference goes too
    torch.cuda.empty_cache()
    return result


def measure(args, peak, name):
    """Runs every prepared program and its PyTorch twin; the records."""
    sys.path.insert(0, HERE)  # npy_tools: beside this script in a bundle
    sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "e2e"))
    from npy_tools import write_safetensors  # noqa: E402
    prepared = json.load(open(os.path.join(args.programs, "programs.json")))
    batch, seq = prepared["batch"], prepared["seq"]
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(0)
    tokens, targets = (rng.integers(0, VOCAB, size=(batch, seq), dtype=np.int64) for _ in range(2))
    tokens_path, targets_path = (os.path.join(args.workdir, n + ".npy") for n in ("t", "y"))
    np.save(tokens_path, tokens)
    np.save(targets_path, targets)
    records = []
    wanted = args.models.split(",") if args.models else None
    for entry in prepared["programs"]:
        model, train = entry["model"], entry["workload"] == "train"
        if wanted and model not in wanted:
            continue
        spec = MODELS[model]
        print(f"bench/gpu: GPT-2 {model} {entry['workload']} ...", file=sys.stderr, flush=True)
        rec = {"model": model, "workload": entry["workload"], **spec, "batch": batch, "seq": seq,
               "flops": flops(spec, batch, seq, train)}
        program = os.path.join(args.programs, entry["dir"])
        params = draw_params(program, seed=1)
        params_path = os.path.join(args.workdir, "params.safetensors")
        write_safetensors(params_path, params)
        try:
            rec["sbpc_seconds"] = sbpc_time(args, program, params_path, tokens_path, targets_path)
        except RuntimeError as e:
            rec["error"] = str(e)
        for k, v in torch_times(args, spec, train, params, tokens, targets).items():
            rec[f"torch_{k}_seconds" if isinstance(v, float) else f"torch_{k}_missing"] = v
        os.remove(params_path)
        records.append(rec)
        # After each program: a run cut short keeps what it measured.
        os.makedirs(args.out, exist_ok=True)
        json.dump({"gpu": name, "date": datetime.date.today().isoformat(), "peak_tflops": peak,
                   "records": records, "complete": False},
                  open(os.path.join(args.out, "bench.json"), "w"), indent=2)
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", help="sbpc, to compile the programs (not with --programs)")
    ap.add_argument("--out", help="where bench.json and bench.md go")
    ap.add_argument("--models", help="small,medium (default); with --programs: those "
                    "prepared")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--target", choices=["cuda", "cpu"], default="cuda",
                    help="with --prepare: what to compile for (cpu: to try the script)")
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--peak-tflops", type=float, help="the GPU's f32 peak (default: by its name)")
    ap.add_argument("--workdir", help="default: OUT/work (removed at the end)")
    ap.add_argument("--prepare", metavar="DIR", help="only compile the programs into DIR")
    ap.add_argument("--programs", metavar="DIR", help="only measure the programs in DIR")
    ap.add_argument("--no-gpu-ok", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.prepare:
        if not args.sbpc:
            sys.exit("bench/gpu: --prepare needs --sbpc")
        prepare(args, (args.models or "small,medium").split(","))
        return
    if not args.out:
        sys.exit("bench/gpu: --out is required")
    name = gpu_name()
    if not name and not args.no_gpu_ok:
        sys.exit("bench/gpu: no GPU here (nvidia-smi lists none)")
    peak = peak_of(name, args.peak_tflops)
    keep_work = bool(args.workdir)
    args.workdir = args.workdir or os.path.join(args.out, "work")
    if not args.programs:
        if not args.sbpc:
            sys.exit("bench/gpu: --sbpc or --programs is required")
        args.prepare = args.programs = os.path.join(args.workdir, "programs")
        prepare(args, (args.models or "small,medium").split(","))
    records = measure(args, peak, name)
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
    batch, seq = (records[0]["batch"], records[0]["seq"]) if records else (args.batch, args.seq)
    note = (f"{name}, {stamp}; batch {batch} x seq {seq}, f32 without TF32, "
            f"median of {args.repeat - 1} runs after a warm-up; MFU against "
            f"{peak if peak else '?'} TFLOP/s.\n\n")
    os.makedirs(args.out, exist_ok=True)
    json.dump({"gpu": name, "date": stamp, "peak_tflops": peak, "records": records,
               "complete": True},
              open(os.path.join(args.out, "bench.json"), "w"), indent=2)
    open(os.path.join(args.out, "bench.md"), "w").write(note + table)
    print(note + table)
    if not keep_work:
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
