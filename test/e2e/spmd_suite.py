"""End-to-end check of distributed execution against the reference evaluator.

For one model (the MLP or a 2-layer GPT, both with a loss), compiles it with
`sbpc compile --target cpu` (or --target cuda) for every strategy on every mesh given, and for
random legal layout seeds, runs the ranks with `sbpc run`, and checks:

- every output equals the single-device reference (`sbpc run model.mlir`)
  to --rtol relative error (max |a - b| / max |b|), and with --norm-rtol
  also norm-wise (||a - b|| / ||b||: bf16's tolerance), on fresh random
  inputs;
- the bytes each rank's communicator sent equal report.json's `ranks[].comm_bytes`
  and, summed over ranks, the boxings' `bytes_per_rank` times the ranks;
- each rank's measured arena peak equals its planned `arena_bytes`.

A strategy that does not apply to a mesh (tp without a tp axis, dp-tp
without dp and tp axes, exact on a graph too large for it) is reported as
skipped with sbpc's reason. Prints one line per case and a summary; exits
non-zero if any case fails.

With --autodiff, the model is first differentiated (sbpc-opt
--graph-autodiff): every parameter's gradient is an output too, and the
backward ops are laid out, boxed and run like the forward ones.

With --bundle DIR, every passing case is also compiled with --bundle-target
(cuda) and exported into DIR with the CPU ranks' shards as its expected
result (test/gpu/export.py), for a GPU machine to check.

usage: spmd_suite.py --sbpc S --workdir W --model mlp|gpt [--autodiff] [--target cpu|cuda]
           [--cases STRATEGY@MESH ...] [--random N --random-meshes MESH ...] [--bundle DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from npy_tools import (BF16_WELL_CONDITIONED, bf16_conditioning, random_gpt_params,  # noqa: E402
                       read_safetensors, relative_errors, round_to_bf16, tolerance_problem,
                       write_safetensors)
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from export import BF16_TOOLS, BF16_UNSANITIZED, DEVICE_FLAGS, export_case  # noqa: E402

GPT = dict(layers=2, hidden=32, heads=4, seq=8, batch=8, vocab=64)
MLP = dict(layers=2, hidden=32, inputs=16, outputs=8, batch=8)
# Reasons sbpc gives when a strategy does not apply to a mesh.
NOT_APPLICABLE = ("needs a 1-D mesh", "needs a 2-D mesh", "is not divisible",
                  "exact search needs a table")


def sbpc(args, *cmd):
    return subprocess.run([args.sbpc, *cmd], capture_output=True, text=True)


def arguments(model_path):
    """(name, kind, shape, dtype) of every model argument, from the IR text."""
    text = open(model_path).read()
    found = re.findall(r"%arg\d+: tensor<([0-9x]+)x(f32|i64)> \{graph\.(param|input) = \"([^\"]+)\"",
                       text)
    return [(name, kind, [int(d) for d in dims.split("x")], dtype)
            for dims, dtype, kind, name in found]


def mesh_of(spec):
    axes = [part.split("=") for part in spec.split(",")]
    return [a for a, _ in axes], [int(s) for _, s in axes]


def random_layout(rng, shape, sizes, is_float):
    """A random legal nd-SBP for a tensor of `shape` on a mesh of `sizes`."""
    layout, local = [], list(shape)
    for p in sizes:
        choices = ["B"]
        choices += [f"S({d})" for d in range(len(shape)) if local[d] % p == 0]
        if is_float:
            choices.append("P(sum)")
        pick = choices[rng.integers(len(choices))]
        if pick.startswith("S("):
            local[int(pick[2:-1])] //= p
        layout.append(pick)
    return "[" + ", ".join(layout) + "]"


def bf16_widening(args, work, model, params, inputs, reference):
    """Per output, the factor its bf16 bounds widen by (bf16_conditioning):
    the reference run again on the parameters and float inputs rounded to
    bf16. Prints the outputs it widens."""
    rounded = os.path.join(work, "params-bf16.safetensors")
    write_safetensors(rounded, {name: round_to_bf16(a) if a.dtype == np.float32 else a
                                for name, a in read_safetensors(params).items()})
    rounded_inputs = []
    for flag in inputs:  # "--input", "NAME=PATH", ...
        if "=" in flag:
            name, path = flag.split("=", 1)
            value = np.load(path)
            if value.dtype == np.float32:
                path = path[:-len(".npy")] + "-bf16.npy"
                np.save(path, round_to_bf16(value))
                flag = f"{name}={path}"
        rounded_inputs.append(flag)
    out = os.path.join(work, "reference-bf16")
    ran = sbpc(args, "run", model, "--params", rounded, *rounded_inputs, "--output-dir", out)
    if ran.returncode != 0:
        sys.exit("reference on bf16-rounded parameters: " + ran.stderr)
    widen = {name: bf16_conditioning(expected, np.load(os.path.join(out, name + ".npy")))
             for name, expected in reference.items()}
    for name in sorted(n for n, f in widen.items() if f > 1):
        print(f"bf16 bounds x{widen[name]:.2f} for {name}: its f32 reference moves by "
              f"{widen[name] * BF16_WELL_CONDITIONED:.1e} norm-wise when only the parameters "
              f"and inputs are rounded to bf16")
    return widen


def check_case(args, work, name, compile_flags, inputs, reference, widen, nranks):
    out, res = os.path.join(work, name), os.path.join(work, name + "-res")
    shutil.rmtree(out, ignore_errors=True)
    compile_flags = [*compile_flags, "--precision", args.precision]
    compiled = sbpc(args, "compile", os.path.join(work, "model.mlir"), *compile_flags,
                    "--target", args.target, "-o", out)
    if compiled.returncode != 0:
        message = compiled.stderr.strip().splitlines()[-1] if compiled.stderr.strip() else "?"
        if any(reason in message for reason in NOT_APPLICABLE):
            return "skip", message
        return "FAIL", "compile: " + message
    ran = sbpc(args, "run", out, "--params", os.path.join(work, "params.safetensors"),
               *inputs, "--output-dir", res)
    if ran.returncode != 0:
        return "FAIL", "run: " + ran.stderr.strip()
    problems, worst, worst_norm = [], 0.0, 0.0
    for output, expected in reference.items():
        actual = np.load(os.path.join(res, output + ".npy"))
        if actual.shape != expected.shape:
            problems.append(f"{output}: shape {actual.shape} != {expected.shape}")
            continue
        errors = relative_errors([(expected, actual)])
        worst, worst_norm = max(worst, errors[0]), max(worst_norm, errors[1])
        factor = widen.get(output, 1.0)
        problem = tolerance_problem(output, errors, args.rtol * factor,
                                    args.norm_rtol * factor if args.norm_rtol else None)
        if problem:
            problems.append(problem)
    report = json.load(open(os.path.join(out, "report.json")))
    measured = json.load(open(os.path.join(res, "run.json")))["ranks"]
    planned = {r["rank"]: r for r in report["ranks"]}
    if len(measured) != nranks or len(planned) != nranks:
        problems.append(f"{len(measured)} ranks measured, {len(planned)} planned, {nranks} expected")
    for m in measured:
        p = planned[m["rank"]]
        if m["comm_bytes"] != p["comm_bytes"]:
            problems.append(f"rank {m['rank']} sent {m['comm_bytes']} bytes, report says {p['comm_bytes']}")
        if m["arena_peak_bytes"] != p["arena_bytes"]:
            problems.append(f"rank {m['rank']} arena peak {m['arena_peak_bytes']}, planned {p['arena_bytes']}")
    # The boxings' estimate rounds each boxing to whole bytes per rank; under
    # bf16 it counts 2-byte elements where the programs hold bf16.
    total = sum(m["comm_bytes"] for m in measured)
    estimate = report["totals"]["comm_bytes_per_rank"] * nranks
    if abs(total - estimate) > len(report["boxings"]) * nranks:
        problems.append(f"ranks sent {total} bytes in all, the boxings say {estimate:.0f}")
    sent = max((m["comm_bytes"] for m in measured), default=0)
    if args.precision == "bf16" and worst < 1e-4:
        problems.append(f"max rel err {worst:.1e}: no bf16 rounding shows, was it computed in f32?")
    if problems:
        return "FAIL", "; ".join(problems)
    if args.bundle:
        device = out + "-" + args.bundle_target
        shutil.rmtree(device, ignore_errors=True)
        compiled = sbpc(args, "compile", os.path.join(work, "model.mlir"), *compile_flags,
                        *DEVICE_FLAGS, "--target", args.bundle_target, "-o", device)
        if compiled.returncode != 0:
            return "FAIL", "compile --target " + args.bundle_target + ": " + compiled.stderr.strip()
        try:
            bf16 = args.precision == "bf16"
            kind = ("-grad" if args.autodiff else "") + ("-bf16" if bf16 else "")
            sanitize = nranks == 1  # compute-sanitizer follows one rank
            export_case(args.bundle, f"{args.model}{kind}-{name}",
                        out, device, [("run", ["--params", os.path.join(work, "params.safetensors"),
                                               *inputs])], args.rtol, args.norm_rtol,
                        bf16=bf16, sanitize=sanitize and (BF16_TOOLS if bf16 else True),
                        unsanitized=BF16_UNSANITIZED if sanitize and bf16 else None)
        except RuntimeError as e:
            return "FAIL", f"bundle: {e}"
        shutil.rmtree(device, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(res, ignore_errors=True)
    norm = f" (norm-wise {worst_norm:.1e})" if args.norm_rtol is not None else ""
    return "ok", f"max rel err {worst:.1e}{norm}, {len(report['boxings'])} boxings, " \
                 f"{sent} B sent per rank, arena {planned[0]['arena_bytes']} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", choices=["mlp", "gpt"], required=True)
    ap.add_argument("--cases", nargs="*", default=[], help="STRATEGY@MESH")
    ap.add_argument("--random", type=int, default=0, help="random layout seeds per mesh")
    ap.add_argument("--random-meshes", nargs="*", default=[])
    ap.add_argument("--rtol", type=float, default=1e-5, help="max-wise relative error bound")
    ap.add_argument("--norm-rtol", type=float,
                    help="also bound the norm-wise relative error (bf16's tolerance)")
    ap.add_argument("--autodiff", action="store_true", help="check gradients too")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="sbpc compile --precision (bf16: compare with a looser --rtol)")
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu",
                    help="what the ranks run on (cuda: the GPUs of this machine, shared if fewer)")
    ap.add_argument("--bundle", help="also export every passing case into this GPU bundle "
                    "directory (test/gpu/export.py)")
    ap.add_argument("--bundle-target", choices=["cpu", "cuda"], default="cuda")
    args = ap.parse_args()
    if args.bundle and args.target != "cpu":
        sys.exit("spmd-suite: --bundle takes its expected shards from --target cpu")
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 2**31
    print(f"spmd-suite: {args.model}, seed {seed}")
    rng = np.random.default_rng(seed)
    work = os.path.abspath(args.workdir)  # programs run from their case directory
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model.mlir")
    params = os.path.join(work, "params.safetensors")
    spec = GPT if args.model == "gpt" else MLP
    gen = sbpc(args, "gen", args.model, *[f"--{k}={v}" for k, v in spec.items()], "--loss",
               "-o", model, *(["--params", params, "--seed", str(seed)] if args.model == "mlp" else []))
    if gen.returncode != 0:
        sys.exit("gen: " + gen.stderr)
    if args.autodiff:
        forward = model + ".forward"
        os.replace(model, forward)
        with open(model, "w") as out:
            if subprocess.run([os.path.join(os.path.dirname(args.sbpc), "sbpc-opt") if
                               os.path.dirname(args.sbpc) else "sbpc-opt", forward,
                               "--graph-autodiff"], stdout=out).returncode != 0:
                sys.exit("sbpc-opt --graph-autodiff failed")
    if args.model == "gpt":
        write_safetensors(params, random_gpt_params(spec["layers"], spec["hidden"], spec["vocab"],
                                                    spec["seq"], seed))
    # Fresh random inputs.
    inputs = []
    for name, kind, shape, dtype in arguments(model):
        if kind != "input":
            continue
        path = os.path.join(work, name + ".npy")
        if dtype == "i64":
            high = spec["vocab"] if args.model == "gpt" else spec["outputs"]
            np.save(path, rng.integers(0, high, size=shape).astype(np.int64))
        else:
            np.save(path, rng.standard_normal(shape).astype(np.float32))
        inputs += ["--input", f"{name}={path}"]
    ref = sbpc(args, "run", model, "--params", params, *inputs, "--output-dir",
               os.path.join(work, "reference"))
    if ref.returncode != 0:
        sys.exit("reference: " + ref.stderr)
    reference = {f[:-4]: np.load(os.path.join(work, "reference", f))
                 for f in os.listdir(os.path.join(work, "reference")) if f.endswith(".npy")}
    widen = bf16_widening(args, work, model, params, inputs, reference) \
        if args.precision == "bf16" else {}

    cases = []
    for case in args.cases:
        strategy, mesh = case.split("@")
        cases.append((f"{strategy}-{mesh}", ["--mesh", mesh, "--strategy", strategy],
                      mesh_of(mesh)))
    for mesh in args.random_meshes:
        axes, sizes = mesh_of(mesh)
        for i in range(args.random):
            seeds = []
            for name, kind, shape, dtype in arguments(model):
                seeds += ["--layout", f"{name}={random_layout(rng, shape, sizes, dtype == 'f32')}"]
            cases.append((f"random{i}-{mesh}", ["--mesh", mesh, "--strategy", "propagate", *seeds],
                          (axes, sizes)))
    counts = {"ok": 0, "skip": 0, "FAIL": 0}
    for name, flags, (axes, sizes) in cases:
        status, detail = check_case(args, work, name, flags, inputs, reference, widen,
                                    int(np.prod(sizes)))
        counts[status] += 1
        print(f"{status:4} {name}: {detail}", flush=True)
        if status == "FAIL" and name.startswith("random"):
            print("     flags: " + " ".join(flags))
    print(f"spmd-suite: {counts['ok']} ok, {counts['skip']} skipped, {counts['FAIL']} failed")
    sys.exit(1 if counts["FAIL"] else 0)


if __name__ == "__main__":
    main()
