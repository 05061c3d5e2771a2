"""GPU benchmark: GPT-2 small and medium on one GPU, sbpc against PyTorch.

Two tables, each in f32 (without TF32) and in bf16 (--precision):

Models. For each model (GPT-2 small: 12 layers, hidden 768, 12 heads;
medium: 24 layers, hidden 1024, 16 heads; vocabulary 50257, sequence --seq,
batch --batch) and each workload (the forward with its loss, and one AdamW
training step):

- sbpc: `sbpc gen` the model, `sbpc compile --mesh x=1 --target cuda` (and
  `--train`, and `--precision bf16`), then the ranks' `launch.sh --repeat N`
  on random parameters (GPT-2's initialization; optimizer states zero), a
  training step's `launch.sh --steps N+2` (as `sbpc run --steps` runs
  steps: each step's updates are the next one's parameters; the steps
  between the first, which reads the files, and the last, which writes
  them, are timed; bench.json's sbpc_run_seconds is their whole time, with
  the copies that carry the state from step to step); the
  time of a run is the rank's `repeats[].device_compute_seconds` (the GPU's
  clock, CUDA events, over the program's computing between its loads and
  stores; loading and storing excluded), the median over the runs after
  the first. The host's clock over the same spans (`compute_seconds`,
  which adds the wait for the last kernel to each) goes into bench.json as
  sbpc_wall_seconds; the bf16 forward and training step once more
  compiled with `--fused-attention=false` (the rows "sbpc (attention
  unfused)": attention as scores, softmax and a second product, and their
  gradients as products and the softmax's gradient, beside flash
  attention's forward and backward);
- PyTorch eager and `torch.compile`: the same model written here (pre-LN
  blocks, causal attention, tanh GELU, tied head) on the same parameters,
  timed with CUDA events over the same number of runs after warm-up; bf16
  under `torch.autocast`, as sbpc's bf16 keeps parameters in f32.

Tokens/s is batch x seq / time; model FLOP utilization is the model's FLOPs
(2 per multiply-add of every GEMM, attention included; a training step is
3x the forward) over time and the GPU's peak in that precision (f32 without
tensor cores; bf16 dense on tensor cores; --peak-tflops, else known from
the GPU's name).

GEMM layers. The linear layers of one block of each model and its head
(x[T,K] @ w[K,N] with T = batch x seq, plus the bias and, for mlp.c_fc, the
GELU sbpc fuses into the GEMM; the head multiplies by the transposed
embedding and has no bias; attn.c_proj also comes as the bare product,
epilogue "matmul", a plain cuBLAS GEMM where the layer is cuBLASLt's), each
compiled alone as a one-layer graph and timed like the models, against
cuBLAS on the bare GEMM of the same shape and precision (`torch.matmul`,
CUDA events), back to back, and again each GEMM after the GPU has idled
50 ms, as an sbpc program's computing starts after its loads (an idle GPU
is slow to wake: bench/gpu/idle_probe.py). sbpc's rate is counted on the
GEMM's FLOPs alone, so the epilogue it does on top counts against it. The
issue's target: at least 90% of cuBLAS's rate.

Writes OUT/bench.json (every measurement) and OUT/bench.md, and prints
the tables. PyTorch columns say why they are missing when torch or its
CUDA is not there.

The two halves can run on two machines (test/gpu/bundle.py): --prepare DIR
compiles the programs where sbpc is (no GPU needed), --programs DIR
measures them where the GPU is (no sbpc needed). With neither, both here.

usage: run.py --sbpc build/bin/sbpc --out bench/gpu [--models small,medium|none]
              [--gemm-models M,..|none] [--precision f32,bf16] [--batch 8]
              [--seq 1024] [--repeat 10] [--timeout 300] [--workdir DIR] [--profile-ops]
       run.py --sbpc S --prepare DIR [--models ...] [--gemm-models ...] [--precision ...]
              [--batch B] [--seq S] [--target cuda|cpu] [--mesh x=1] [--strategy dp]
              [--train-flags '--zero 1']
       run.py --programs DIR --out OUT [--repeat 10] [--timeout 300] [--workdir DIR]
              [--models ...] [--gemm-models ...] [--precision ...] [--profile-ops]
              [--sbpc-only] [--torch-device cuda|cpu] [--torch-threads 1]

--profile-ops runs each sbpc program once more with `--profile ops` (every
op timed, on the GPU's clock for CUDA programs) and adds three tables: the
forward's linear layers (its exec.linear ops) against cuBLAS's bare GEMMs
of their shapes back to back, times the layers, where the run has both;
each program's largest kinds of op, their milliseconds and share; and each
model's largest single ops, by location and types (a forward op and its
gradients share a location) (bench.json's `sbpc_ops`). The timed runs are
not profiled.

--torch-device cpu runs PyTorch and the bare GEMMs on the CPU (its ops
on one thread, its BLAS on --torch-threads, timed by the host's clock) beside programs
prepared with --target cpu: the CPU benchmark, bench/cpu/run.py, which
also bounds the BLAS's threads. --mesh (default x=1) and --strategy
(default dp) compile the programs for several ranks, each on one core
(a rank's BLAS on one thread); a run's time is then its slowest rank's.

--sbpc-only leaves PyTorch and cuBLAS out: a second run under another
runtime setting (SBPRT_CAUSAL_BLOCK=0, say) to set beside the first.

Exits non-zero when an sbpc program failed or ran past --timeout (the
tables still say what was measured).
"""
import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

MODELS = {"tiny": dict(layers=2, hidden=64, heads=4),  # to try the script, not to report
          "small": dict(layers=12, hidden=768, heads=12),
          "medium": dict(layers=24, hidden=1024, heads=16)}
VOCAB = 50257
PRECISIONS = ("f32", "bf16")
LARGEST_OPS = 16  # the single ops --profile-ops keeps per program (bench.json)
RANK_THREADS = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                       "MKL_NUM_THREADS")}  # a rank's BLAS: one core
IDLE_SECONDS = 0.05  # cuBLAS's second timing: each GEMM after the GPU idled this long
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # npy_tools: beside this script in a bundle
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "e2e"))
from npy_tools import mpi_session_env, write_safetensors  # noqa: E402
sys.path.insert(0, HERE)  # device_check: beside this script in a GPU bundle
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "gpu"))
from device_check import runtime_warnings, stop  # noqa: E402
# Dense peaks, TFLOP/s: f32 without tensor cores; bf16 on tensor cores,
# without sparsity.
PEAKS = {"f32": {"H100 PCIe": 51.2, "H100": 66.9, "H200": 66.9, "A100": 19.5},
         "bf16": {"H100 PCIe": 756.5, "H100": 989.4, "H200": 989.4, "A100": 312.0}}


def run(cmd, timeout=None, extra_env=None):
    """`cmd`'s stdout; RuntimeError with its last words when it fails, or
    when it runs past `timeout` seconds (then it is stopped, and mpirun
    stops its ranks)."""
    with mpi_session_env() as env:  # launch.sh's mpirun: a session directory of its own
        env.update(extra_env or {})
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True, env=env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise RuntimeError(f"{os.path.basename(cmd[0])}: did not finish in {timeout} s")
    # The runtime's warnings (a fallback taken) show even when it succeeds.
    for warning in runtime_warnings(err):
        print(f"bench/gpu: {os.path.basename(cmd[0])}: {warning}", file=sys.stderr)
    if proc.returncode != 0:
        lines = [line for line in (out + err).splitlines() if line.strip(" -")] or ["?"]
        # A rank's own report (not MPI's banner after it) says what went wrong.
        ranks = [line for line in lines if line.startswith("rank ") and " failed in " in line]
        raise RuntimeError(os.path.basename(cmd[0]) + ": " + (ranks or lines)[-1])
    return out


def gpu_name():
    try:
        return run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()[0].strip()
    except (OSError, RuntimeError, IndexError):
        return None


def cpu_name():
    """The CPU's model name and cores, as /proc/cpuinfo and the OS say."""
    model = "CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"


def peaks_of(name, given):
    """{precision: TFLOP/s or None}: --peak-tflops F32[,BF16], else by the GPU's name."""
    peaks = {}
    for i, precision in enumerate(PRECISIONS):
        if given:
            values = [float(v) for v in given.split(",")]
            peaks[precision] = values[i] if i < len(values) else None
            continue
        known = PEAKS[precision]
        peaks[precision] = next((known[key] for key in sorted(known, key=len, reverse=True)
                                 if name and key in name), None)
    return peaks


def flops(spec, batch, seq, train):
    """Multiply-adds x 2 of the forward's GEMMs (layers, attention, head); x3 to train."""
    L, H = spec["layers"], spec["hidden"]
    tokens = batch * seq
    forward = 2 * tokens * (12 * L * H * H + H * VOCAB) + 4 * L * batch * seq * seq * H
    return forward * (3 if train else 1)


def gemm_layers(spec):
    """The linear layers of one GPT-2 block and the head: (name, K, N, epilogue).
    attn.c_proj comes twice: with its bias (cuBLASLt, the epilogue) and
    as the bare product ("matmul": a plain cuBLAS GEMM, as the head), so
    that a cost sbpc adds to a short GEMM shows whether it is cuBLASLt's."""
    H = spec["hidden"]
    return [("attn.c_attn", H, 3 * H, "bias"), ("attn.c_proj", H, H, "bias"),
            ("attn.c_proj", H, H, "matmul"),
            ("mlp.c_fc", H, 4 * H, "bias+gelu"), ("mlp.c_proj", 4 * H, H, "bias"),
            ("head", H, VOCAB, "none")]


def gemm_model(T, K, N, epilogue):
    """A one-layer graph: y = x @ w (+ b) (then GELU); the head's w
    ("none") is [N, K], transposed; "matmul" is x @ w alone."""
    x, y = f"tensor<{T}x{K}xf32>", f"tensor<{T}x{N}xf32>"
    if epilogue in ("none", "matmul"):
        w = f"tensor<{N}x{K}xf32>" if epilogue == "none" else f"tensor<{K}x{N}xf32>"
        flag = " transpose_rhs" if epilogue == "none" else ""
        args = f'%x: {x} {{graph.input = "x"}}, %w: {w} {{graph.param = "w"}}'
        body = [f"%0 = graph.matmul %x, %w{flag} : ({x}, {w}) -> {y}"]
    else:
        w = f"tensor<{K}x{N}xf32>"
        args = (f'%x: {x} {{graph.input = "x"}}, %w: {w} {{graph.param = "w"}}, '
                f'%b: tensor<{N}xf32> {{graph.param = "b"}}')
        total = "%a" if epilogue == "bias+gelu" else "%0"
        body = [f"%m = graph.matmul %x, %w : ({x}, {w}) -> {y}",
                f"{total} = graph.add %m, %b : ({y}, tensor<{N}xf32>) -> {y}"]
        if epilogue == "bias+gelu":
            body.append(f"%0 = graph.gelu %a : {y}")
    lines = ["module {", f"  func.func @layer({args}) -> ({y} {{graph.output = \"y\"}}) {{",
             *["    " + line for line in body], f"    return %0 : {y}", "  }", "}"]
    return "\n".join(lines) + "\n"


# Programs compiled a second way, beside the default, and what sets them
# apart: (workload, precision, compile flags, the variant's name).
VARIANTS = [("forward", "bf16", ["--fused-attention=false"], "attention unfused"),
            ("train", "bf16", ["--fused-attention=false"], "attention unfused")]


def compile_program(args, model, out, precision, train=False, flags=()):
    print(f"bench/gpu: compiling {os.path.basename(out)}", file=sys.stderr, flush=True)
    run([args.sbpc, "compile", model, "--mesh", args.mesh, "--strategy", args.strategy, "--target",
         args.target, *(["--cuda-arch", args.cuda_arch] if args.target == "cuda" else []),
         "--precision", precision, *(["--train", "--optimizer", "adamw"] if train else []),
         *(args.sbpc_flags.split() if train else []), *flags, "-o", out])


def prepare(args, spec_names, gemm_names, precisions):
    """Compiles every model's forward and training step, and every GEMM
    layer, in every precision into args.prepare; writes programs.json there."""
    os.makedirs(args.prepare, exist_ok=True)
    programs = []
    suffix = {"f32": "", "bf16": "-bf16"}
    for name in spec_names:
        spec = MODELS[name]
        model = os.path.join(args.prepare, name + ".mlir")
        run([args.sbpc, "gen", "gpt", "--layers", str(spec["layers"]), "--hidden",
             str(spec["hidden"]), "--heads", str(spec["heads"]), "--seq", str(args.seq), "--batch",
             str(args.batch), "--vocab", str(VOCAB), "--positions", str(args.seq), "--loss", "-o",
             model])
        for precision in precisions:
            for train in (False, True):
                workload = "train" if train else "forward"
                out = f"{name}-{workload}{suffix[precision]}"
                compile_program(args, model, os.path.join(args.prepare, out), precision, train)
                programs.append({"model": name, "workload": workload, "precision": precision,
                                 "dir": out})
                for kind, where, flags, variant in VARIANTS:
                    if (kind, where) == (workload, precision):
                        other = out + "-" + variant.replace(" ", "-")
                        compile_program(args, model, os.path.join(args.prepare, other),
                                        precision, train, flags)
                        programs.append({"model": name, "workload": workload,
                                         "precision": precision, "variant": variant,
                                         "dir": other})
        os.remove(model)
    tokens = args.batch * args.seq
    for name in gemm_names:
        for layer, K, N, epilogue in gemm_layers(MODELS[name]):
            model = os.path.join(args.prepare, "layer.mlir")
            with open(model, "w") as f:
                f.write(gemm_model(tokens, K, N, epilogue))
            for precision in precisions:
                variant = "-matmul" if epilogue == "matmul" else ""
                out = f"{name}-gemm-{layer}{variant}{suffix[precision]}"
                compile_program(args, model, os.path.join(args.prepare, out), precision)
                programs.append({"model": name, "workload": "gemm", "layer": layer,
                                 "shape": [tokens, K, N], "epilogue": epilogue,
                                 "precision": precision, "dir": out})
            os.remove(model)
    json.dump({"batch": args.batch, "seq": args.seq, "target": args.target, "mesh": args.mesh,
               "strategy": args.strategy, "train_flags": args.sbpc_flags, "programs": programs},
              open(os.path.join(args.prepare, "programs.json"), "w"), indent=1)


def draw_params(program, seed):
    """GPT-2's initialization for every parameter the program loads
    (weights N(0, 0.02), layer-norm scales 1, biases 0; a GEMM layer's `w`
    and `b` N(0, 0.02)), optimizer states zero and the step counter 1, as
    `sbpc run --steps` starts them."""
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


def sbpc_time(args, program, params, inputs, train=False):
    """Median compute seconds of a run after the first, from the ranks' own
    timing, each run's the slowest rank's: (the device's clock where the
    ranks kept it, else the host's; the host's; the whole run on the host's
    clock, its loads and stores too). A training step runs as `sbpc run
    --steps` runs it: --repeat + 2 steps in one launch, each step's updates
    the next one's parameters, timed over the steps between the first (which
    reads the files) and the last (which writes them). A rank's BLAS runs on
    one thread (launch.sh's default, whatever the environment asks for
    PyTorch): a CPU's cores go to ranks."""
    res = os.path.join(args.workdir, os.path.basename(program) + "-res")
    os.makedirs(os.path.join(res, ".shards"), exist_ok=True)
    runs = ["--steps", str(args.repeat + 2)] if train else ["--repeat", str(args.repeat)]
    # The ranks' watchdog stops a hung run; stop(), one that never gets
    # to it.
    run([os.path.join(program, "launch.sh"), "--no-assemble", "--params", params,
         *[a for name, path in inputs for a in ("--input", f"{name}={path}")],
         *runs, "--timeout", str(args.timeout), "--output-dir", res],
        timeout=args.timeout + 60, extra_env=RANK_THREADS)
    ranks = [json.load(open(f))["repeats"] for f in sorted(glob.glob(
        os.path.join(res, ".shards", "rank*.json")))]
    shutil.rmtree(res, ignore_errors=True)
    repeats = [{key: max(rank[i][key] for rank in ranks) for key in ranks[0][i]
                if isinstance(ranks[0][i][key], (int, float))} for i in range(len(ranks[0]))]
    counted = repeats[1:-1] if train else repeats[1:]
    def median(key):
        return statistics.median([r[key] for r in counted] or [repeats[0][key]])
    wall = median("compute_seconds")
    return (median("device_compute_seconds") if "device_compute_seconds" in repeats[0] else wall,
            wall, median("seconds"))


def sbpc_op_profile(args, program, params, inputs, train=False):
    """One more run of the program with `--profile ops` (two runs, the
    second counted; a training step's --steps 4, the middle two counted, and
    halved): seconds per kind of op ("exec.linear", "graph.matmul", ...) in
    one run, loads and stores left out as the timings leave them out."""
    res = os.path.join(args.workdir, os.path.basename(program) + "-ops")
    os.makedirs(os.path.join(res, ".shards"), exist_ok=True)
    runs = ["--steps", "4"] if train else ["--repeat", "2"]
    run([os.path.join(program, "launch.sh"), "--no-assemble", "--params", params,
         *[a for name, path in inputs for a in ("--input", f"{name}={path}")],
         *runs, "--profile", "ops", "--timeout", str(args.timeout),
         "--output-dir", res], timeout=args.timeout + 60, extra_env=RANK_THREADS)
    rank = json.load(open(os.path.join(res, ".shards", "rank0.json")))
    shutil.rmtree(res, ignore_errors=True)
    counted = 2 if train else 1
    kinds, counts, largest = {}, {}, []
    for op in rank.get("ops", []):  # largest first
        kind = op["op"].split(" ")[0]
        if kind not in ("exec.load", "exec.store"):
            kinds[kind] = kinds.get(kind, 0.0) + op["seconds"] / counted
            counts[kind] = counts.get(kind, 0) + op.get("calls", counted) // counted
            if len(largest) < LARGEST_OPS:
                largest.append({**{k: op[k] for k in ("op", "shapes") if k in op},
                                "seconds": op["seconds"] / counted})
    return {"clock": rank.get("ops_clock"), "seconds": kinds, "calls": counts,
            "largest": largest}


def torch_on(args):
    """(torch, None), or (None, why PyTorch cannot run here): on the GPU, or
    with --torch-device cpu on --torch-threads of the CPU's cores."""
    try:
        import torch
    except ImportError:
        return None, "torch not installed"
    if args.torch_device == "cpu":
        # Its own ops on one thread, its BLAS on --torch-threads (the
        # environment, bench/cpu/run.py): both on two threads of a 2-core
        # machine contend, GPT-2 small's forward 763 ms against 360.
        torch.set_num_threads(1)
        return torch, None
    if not torch.cuda.is_available():
        return None, "torch has no CUDA"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, None


def timed(args, torch, fn, idle=0.0):
    """Median seconds of fn() after two warm-up calls: by CUDA events, or
    on the CPU by the host's clock; with `idle`, each call after the host
    has waited that many seconds with the GPU idle (as an sbpc program's
    computing starts after its loads)."""
    repeat = args.repeat
    if args.torch_device == "cpu":
        times = []
        for i in range(max(1, repeat - 1) + 2):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times[2:])
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, repeat - 1)):
        if idle:
            time.sleep(idle)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def torch_times(args, spec, train, precision, weights, tokens, targets):
    """{eager, compile}: median seconds, or a reason string."""
    torch, why = torch_on(args)
    if not torch:
        return {"eager": why, "compile": why}
    dev = torch.device(args.torch_device)
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
        with torch.autocast(args.torch_device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            if not train:
                with torch.no_grad():
                    return fn(params, tokens, targets)
            optimizer.zero_grad(set_to_none=True)
            loss = fn(params, tokens, targets)
        loss.backward()
        optimizer.step()
        return loss

    result = {}
    try:  # report, do not crash the benchmark (out of memory, say)
        result["eager"] = timed(args, torch, lambda: step(loss_of))
    except Exception as e:  # noqa: BLE001
        result["eager"] = "PyTorch eager failed: " + str(e).splitlines()[0][:80]
    try:
        compiled = torch.compile(loss_of)
        result["compile"] = timed(args, torch, lambda: step(compiled))
    except Exception as e:  # noqa: BLE001 - report, do not crash the benchmark
        result["compile"] = "torch.compile failed: " + str(e).splitlines()[0][:80]
    # The next sbpc program runs in another process: give the memory back.
    params.clear()
    optimizer = None  # noqa: F841 - the closures' reference goes too
    if args.torch_device == "cuda":
        torch.cuda.empty_cache()
    return result


def cublas_time(args, x, w, transposed, precision, idle=0.0):
    """Median seconds of cuBLAS's bare GEMM x @ w (w transposed for the head),
    back to back or each after `idle` seconds (timed), or a reason."""
    torch, why = torch_on(args)
    if not torch:
        return why
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    try:
        a = torch.tensor(x, device=args.torch_device).to(dtype)
        b = torch.tensor(w, device=args.torch_device).to(dtype)
        b = b.t() if transposed else b
        seconds = timed(args, torch, lambda: torch.matmul(a, b), idle)
    except Exception as e:  # noqa: BLE001 - report, do not crash the benchmark
        return "cuBLAS failed: " + str(e).splitlines()[0][:80]
    del a, b
    if args.torch_device == "cuda":
        torch.cuda.empty_cache()
    return seconds


def measure(args, peaks, name):
    """Runs every prepared program and its PyTorch or cuBLAS twin; the records."""
    prepared = json.load(open(os.path.join(args.programs, "programs.json")))
    batch, seq = prepared["batch"], prepared["seq"]
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(0)
    tokens, targets = (rng.integers(0, VOCAB, size=(batch, seq), dtype=np.int64) for _ in range(2))
    tokens_path, targets_path = (os.path.join(args.workdir, n + ".npy") for n in ("t", "y"))
    np.save(tokens_path, tokens)
    np.save(targets_path, targets)
    x_path = os.path.join(args.workdir, "x.npy")
    records = []
    wanted = args.models.split(",") if args.models else None
    # --gemm-models picks among the prepared GEMM layers (default: every one
    # whose model runs, or every one with --models none).
    gemm_wanted = args.gemm_models.split(",") if args.gemm_models else None
    for entry in prepared["programs"]:
        model, workload = entry["model"], entry["workload"]
        precision = entry.get("precision", "f32")  # programs.json before bf16 had none
        if precision not in args.precision.split(","):
            continue
        if wanted == ["none"] and workload != "gemm":  # the GEMM layers alone
            continue
        if workload == "gemm" and gemm_wanted:
            if model not in gemm_wanted:
                continue
        elif wanted and wanted != ["none"] and model not in wanted:
            continue
        spec = MODELS[model]
        what = entry.get("layer", workload)
        print(f"bench/gpu: GPT-2 {model} {what} {precision} ...", file=sys.stderr, flush=True)
        rec = {"model": model, "workload": workload, "precision": precision, **spec,
               "batch": batch, "seq": seq, "mesh": prepared.get("mesh", "x=1")}
        if "variant" in entry:
            rec["variant"] = entry["variant"]
        if workload == "train" and prepared.get("train_flags"):
            rec["train_flags"] = prepared["train_flags"]
        program = os.path.join(args.programs, entry["dir"])
        params = draw_params(program, seed=1)
        params_path = os.path.join(args.workdir, "params.safetensors")
        if workload == "gemm":
            T, K, N = entry["shape"]
            rec.update(layer=entry["layer"], shape=entry["shape"], epilogue=entry["epilogue"],
                       flops=2 * T * K * N)
            x = rng.standard_normal((T, K), dtype=np.float32)
            np.save(x_path, x)
            inputs = [("x", x_path)]
        else:
            rec["flops"] = flops(spec, batch, seq, workload == "train")
            inputs = [("tokens", tokens_path), ("targets", targets_path)]
        write_safetensors(params_path, params)
        try:
            (rec["sbpc_seconds"], rec["sbpc_wall_seconds"],
             rec["sbpc_run_seconds"]) = sbpc_time(args, program, params_path, inputs,
                                                  train=workload == "train")
        except RuntimeError as e:
            rec["error"] = str(e)
        if args.profile_ops and "error" not in rec:
            try:
                rec["sbpc_ops"] = sbpc_op_profile(args, program, params_path, inputs,
                                                  train=workload == "train")
            except RuntimeError as e:
                rec["sbpc_ops_missing"] = str(e)
        if "variant" in entry:  # sbpc's other way: PyTorch is in the default's rows
            others = {}
        elif args.sbpc_only:
            others = {k: "not run (--sbpc-only)" for k in (
                ("cublas", "cublas_idle") if workload == "gemm" else ("eager", "compile"))}
        elif workload == "gemm":
            transposed = entry["epilogue"] == "none"
            others = {"cublas": cublas_time(args, x, params["w"], transposed, precision),
                      "cublas_idle": cublas_time(args, x, params["w"], transposed, precision,
                                                 IDLE_SECONDS)}
        else:
            others = torch_times(args, spec, workload == "train", precision, params, tokens,
                                 targets)
        for k, v in others.items():
            key = k if k.startswith("cublas") else "torch_" + k
            rec[f"{key}_seconds" if isinstance(v, float) else f"{key}_missing"] = v
        os.remove(params_path)
        records.append(rec)
        # After each program: a run cut short keeps what it measured.
        os.makedirs(args.out, exist_ok=True)
        json.dump({"gpu": name, "torch_device": args.torch_device,
                   "date": datetime.date.today().isoformat(), "peak_tflops": peaks,
                   "records": records, "complete": False},
                  open(os.path.join(args.out, "bench.json"), "w"), indent=2)
    return records


def steps_note(records):
    """What sbpc's training steps' times leave out: their loads and stores
    (the copies that carry state from one step to the next)."""
    steps = [r for r in records if r["workload"] == "train" and "sbpc_run_seconds" in r]
    if not steps:
        return ""
    each = "; ".join(f"{r['model']} {r['precision']}"
                     f"{' (' + r['variant'] + ')' if 'variant' in r else ''} "
                     f"{1e3 * r['sbpc_run_seconds']:.1f} ms" for r in steps)
    return ("sbpc's training steps run as `sbpc run --steps` runs them: in one launch, each "
            "step's updates the next one's parameters (left in place where the memory plan "
            "made them resident, else copied through host memory); the rows time the steps "
            "between the first and the last without their loads and stores, with which a "
            f"step takes: {each}.\n")


def model_table(records, peaks):
    rows = ["| model | workload | precision | system | ms | tokens/s | MFU |",
            "|---|---|---|---|---:|---:|---:|"]
    for r in records:
        if r["workload"] == "gemm":
            continue
        head = f"| {r['model']} | {r['workload']} | {r['precision']}"
        peak = peaks.get(r["precision"])
        sbpc = "sbpc" + "".join(f" ({v})" for v in (r.get("mesh", "x=1"), r.get("train_flags"),
                                                  r.get("variant")) if v and v != "x=1")
        for system, key in ((sbpc, "sbpc"), ("PyTorch eager", "torch_eager"),
                            ("torch.compile", "torch_compile")):
            seconds = r.get(key + "_seconds")
            if key == "sbpc" and "error" in r:
                rows.append(f"{head} | {system} | failed: {r['error']} | | |")
            elif isinstance(seconds, float):
                tps = r["batch"] * r["seq"] / seconds
                mfu = f"{100 * r['flops'] / seconds / (peak * 1e12):.1f}%" if peak else "?"
                rows.append(f"{head} | {system} | {1e3 * seconds:.1f} | {tps:,.0f} | {mfu} |")
            elif key + "_missing" in r:
                rows.append(f"{head} | {system} | {r[key + '_missing']} | | |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def gemm_table(records):
    rows = ["| model | layer | T x K x N | epilogue | precision | sbpc ms | sbpc TFLOP/s | "
            "cuBLAS ms | cuBLAS TFLOP/s | sbpc / cuBLAS | cuBLAS after idle ms | "
            "sbpc / cuBLAS after idle |",
            "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        if r["workload"] != "gemm":
            continue
        cells = [r["model"], r["layer"], " x ".join(map(str, r["shape"])), r["epilogue"],
                 r["precision"]]
        for key in ("sbpc", "cublas"):
            seconds = r.get(key + "_seconds")
            if isinstance(seconds, float):
                cells += [f"{1e3 * seconds:.3f}", f"{r['flops'] / seconds / 1e12:.3g}"]
            else:
                cells += [("failed: " + r["error"]) if key == "sbpc" and "error" in r
                          else r.get(key + "_missing", "?"), ""]
        if isinstance(r.get("sbpc_seconds"), float) and isinstance(r.get("cublas_seconds"), float):
            ratio = r["cublas_seconds"] / r["sbpc_seconds"]
            cells.append(f"{100 * ratio:.1f}% {'(target 90%: met)' if ratio >= 0.9 else '(target 90%: missed)'}")
        else:
            cells.append("")
        # cuBLAS timed as sbpc's program runs: each GEMM on a GPU idle for
        # IDLE_SECONDS (idle_probe.py), absent in a bench.json before it.
        idle = r.get("cublas_idle_seconds")
        if isinstance(idle, float):
            cells.append(f"{1e3 * idle:.3f}")
            cells.append(f"{100 * idle / r['sbpc_seconds']:.1f}%"
                         if isinstance(r.get("sbpc_seconds"), float) else "")
        else:
            cells += [r.get("cublas_idle_missing", "not measured"), ""]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


BLOCK_LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def model_gemm_table(records):
    """The linear layers inside the forward (--profile-ops: its exec.linear
    ops, one per block's layer, the GPU busy with the ops around them)
    against cuBLAS's bare GEMMs of their shapes, each timed back to back,
    times the layers: a lone layer's program starts on an idle GPU, which
    costs it a nearly fixed 0.1 to 0.2 ms (idle_probe.py), where these do
    not. Needs the forward and its model's GEMM layers in one run."""
    rows = ["| model | precision | linear ops | sbpc ms | cuBLAS ms | sbpc / cuBLAS |",
            "|---|---|---:|---:|---:|---:|"]
    for r in records:
        ops = r.get("sbpc_ops", {})
        if (r["workload"] != "forward" or "variant" in r
                or "exec.linear" not in ops.get("seconds", {})):
            continue
        layers = {g["layer"]: g for g in records
                  if g["workload"] == "gemm" and g["model"] == r["model"]
                  and g["precision"] == r["precision"] and g.get("epilogue") != "matmul"}
        if not all(name in layers for name in BLOCK_LINEARS):
            continue
        calls, seconds = ops.get("calls", {}).get("exec.linear"), ops["seconds"]["exec.linear"]
        cells = [r["model"], r["precision"], str(calls or "?"), f"{1e3 * seconds:.2f}"]
        cublas = [layers[name].get("cublas_seconds") for name in BLOCK_LINEARS]
        if calls is None:
            cells += ["op counts unknown (an older bench.json): not compared", ""]
        elif calls != len(BLOCK_LINEARS) * r["layers"]:
            cells += [f"not {len(BLOCK_LINEARS)} per block: not compared", ""]
        elif all(isinstance(c, float) for c in cublas):
            total = r["layers"] * sum(cublas)
            ratio = total / seconds
            cells += [f"{1e3 * total:.2f}", f"{100 * ratio:.1f}% "
                      f"{'(target 90%: met)' if ratio >= 0.9 else '(target 90%: missed)'}"]
        else:
            cells += [next(layers[name].get("cublas_missing", "?")
                           for name, c in zip(BLOCK_LINEARS, cublas) if not isinstance(c, float)),
                      ""]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def ops_table(records, top=6):
    """Where each sbpc program's time goes (--profile-ops): its largest
    kinds of op, their milliseconds in one run and share of the ops' sum."""
    rows = ["| model | program | precision | op | ms | share |", "|---|---|---|---|---:|---:|"]
    for r in records:
        kinds = r.get("sbpc_ops", {}).get("seconds", {})
        total = sum(kinds.values())
        what = r.get("layer", r["workload"]) + (" (matmul)" if r.get("epilogue") == "matmul" else "")
        what += f" ({r['variant']})" if "variant" in r else ""
        for kind, seconds in sorted(kinds.items(), key=lambda kv: -kv[1])[:top]:
            rows.append(f"| {r['model']} | {what} | {r['precision']} | {kind} | "
                        f"{1e3 * seconds:.3f} | {100 * seconds / total:.1f}% |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def largest_ops_table(records, top=8):
    """The models' single largest ops (--profile-ops): an op at its
    location with its types, as a forward op and its gradients differ."""
    rows = ["| model | program | precision | op | types | ms |", "|---|---|---|---|---|---:|"]
    for r in records:
        if r["workload"] == "gemm":
            continue
        for op in r.get("sbpc_ops", {}).get("largest", [])[:top]:
            what = r["workload"] + (f" ({r['variant']})" if "variant" in r else "")
            rows.append(f"| {r['model']} | {what} | {r['precision']} | {op['op']} | "
                        f"{op.get('shapes', '?')} | {1e3 * op['seconds']:.3f} |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", help="sbpc, to compile the programs (not with --programs)")
    ap.add_argument("--out", help="where bench.json and bench.md go")
    ap.add_argument("--models", help="small,medium (default), or 'none' (the GEMM layers "
                    "alone, with --gemm-models); with --programs: those prepared")
    ap.add_argument("--gemm-models", help="whose GEMM layers to time: models, or 'none' "
                    "(default: --models)")
    ap.add_argument("--precision", default="f32,bf16", help="f32, bf16 or both (default)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds one sbpc program's runs may take (default 300)")
    ap.add_argument("--target", choices=["cuda", "cpu"], default="cuda",
                    help="with --prepare: what to compile for (cpu: to try the script)")
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--mesh", default="x=1",
                    help="the programs' mesh (default x=1: one rank); a run's time is its "
                    "slowest rank's")
    ap.add_argument("--strategy", default="dp", help="sbpc compile's --strategy (default dp)")
    ap.add_argument("--train-flags", dest="sbpc_flags", default="",
                    help="more sbpc compile options for the training steps ('--zero 1')")
    ap.add_argument("--peak-tflops", metavar="F32[,BF16]",
                    help="the GPU's dense peaks (default: by its name)")
    ap.add_argument("--workdir", help="default: OUT/work (removed at the end)")
    ap.add_argument("--prepare", metavar="DIR", help="only compile the programs into DIR")
    ap.add_argument("--programs", metavar="DIR", help="only measure the programs in DIR")
    ap.add_argument("--profile-ops", action="store_true",
                    help="also run each sbpc program once with --profile ops and tabulate "
                         "where its time goes")
    ap.add_argument("--sbpc-only", action="store_true",
                    help="time sbpc's programs alone, without PyTorch and cuBLAS: to compare "
                         "runtime settings (SBPRT_CAUSAL_BLOCK=0, say) in a second run")
    ap.add_argument("--torch-device", choices=["cuda", "cpu"], default="cuda",
                    help="where PyTorch and the bare GEMMs run: the GPU (default), or the CPU "
                    "beside --target cpu programs (bench/cpu/run.py)")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="with --torch-device cpu, the threads of PyTorch's BLAS, as the "
                    "environment sets them (bench/cpu/run.py; default 1); its own ops run on one")
    ap.add_argument("--no-gpu-ok", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    precisions = args.precision.split(",")
    models = [] if args.models == "none" else (args.models or "small,medium").split(",")
    gemm_models = [] if args.gemm_models == "none" else (
        args.gemm_models.split(",") if args.gemm_models else models)
    for name in models + gemm_models:
        if name not in MODELS:
            sys.exit(f"bench/gpu: unknown model '{name}' (have {', '.join(MODELS)})")
    for precision in precisions:
        if precision not in PRECISIONS:
            sys.exit(f"bench/gpu: --precision must be f32, bf16 or both, got '{precision}'")
    if args.prepare:
        if not args.sbpc:
            sys.exit("bench/gpu: --prepare needs --sbpc")
        prepare(args, models, gemm_models, precisions)
        return
    if not args.out:
        sys.exit("bench/gpu: --out is required")
    name = cpu_name() if args.torch_device == "cpu" else gpu_name()
    if not name and not args.no_gpu_ok:
        sys.exit("bench/gpu: no GPU here (nvidia-smi lists none)")
    peaks = peaks_of(name, args.peak_tflops)
    keep_work = bool(args.workdir)
    args.workdir = args.workdir or os.path.join(args.out, "work")
    if not args.programs:
        if not args.sbpc:
            sys.exit("bench/gpu: --sbpc or --programs is required")
        args.prepare = args.programs = os.path.join(args.workdir, "programs")
        prepare(args, models, gemm_models, precisions)
    records = measure(args, peaks, name)
    stamp = datetime.date.today().isoformat()
    batch, seq = (records[0]["batch"], records[0]["seq"]) if records else (args.batch, args.seq)
    peak_text = ", ".join(f"{p} {v if v else '?'} TFLOP/s" for p, v in peaks.items())
    if args.torch_device == "cpu":
        mesh = records[0]["mesh"] if records else args.mesh
        ranks = 1
        for axis in mesh.split(","):
            ranks *= int(axis.split("=")[1])
        note = (f"{name}, {stamp}; batch {batch} x seq {seq}; sbpc on {ranks} rank(s) "
                f"(mesh {mesh}), each on one thread; PyTorch's ops on one thread, its BLAS "
                f"on {os.environ.get('OPENBLAS_NUM_THREADS', 'all the cores')}; median of "
                f"{args.repeat - 1} runs after a warm-up (sbpc: the slowest rank's); MFU "
                f"against {peak_text}.\n\n")
    else:
        note = (f"{name or 'no GPU'}, {stamp}; batch {batch} x seq {seq}; f32 without TF32, bf16 "
                f"with f32 accumulation; median of {args.repeat - 1} runs after a warm-up; MFU "
                f"against the dense peaks ({peak_text}).\n\n")
    text = note + "\n".join(t for t in (model_table(records, peaks), steps_note(records),
                                         gemm_table(records),
                                         model_gemm_table(records), ops_table(records),
                                         largest_ops_table(records)) if t)
    os.makedirs(args.out, exist_ok=True)
    json.dump({"gpu": name, "torch_device": args.torch_device, "date": stamp, "peak_tflops": peaks,
               "records": records,
               "complete": True},
              open(os.path.join(args.out, "bench.json"), "w"), indent=2)
    open(os.path.join(args.out, "bench.md"), "w").write(text)
    print(text)
    if not keep_work:
        shutil.rmtree(args.workdir, ignore_errors=True)
    failed = [r for r in records if "error" in r]
    if failed:
        sys.exit(f"bench/gpu: {len(failed)} of {len(records)} sbpc programs failed "
                 f"(bench.md says why); first: {failed[0]['error']}")


if __name__ == "__main__":
    main()
