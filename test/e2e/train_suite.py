"""Distributed training equals single-device training.

Generates a model with a loss (MLP or 2-layer GPT) and random parameters,
trains it for --steps steps on one CPU (`sbpc-opt --graph-autodiff
--graph-optimizer`, then `sbpc run step.mlir --steps N`), and for every
case STRATEGY@MESH compiles it with `sbpc compile --train --target cpu` and
trains it on the ranks (`sbpc run DIR --steps N`). Checks the loss of every
step and every final parameter and optimizer state to --rtol relative
error (max |a - b| / max |b| per tensor; with --norm-rtol also norm-wise,
||a - b|| / ||b||: bf16's tolerance), and that each rank's measured
arena peak (run.json) is the arena report.json planned, and that what the
ranks send in a step is what report.json's boxings say. Prints one line per
case.

A case may add compile options: STRATEGY@MESH:zero=2:micro-batches=4:
recompute=full trains with `--zero 2 --micro-batches 4 --recompute full`,
still against the plain single-device reference; :precision=bf16 compiles
the step in bf16 (give a --rtol and --norm-rtol to match, and the case must
show bf16's rounding: an error under 1e-4 fails). An option's value may be
a path (:cluster=/path/small.json); the case's directories are named
without its slashes.

--size KEY=N changes the model's size (--size layers=8 hidden=16 seq=32).

With --bundle DIR, steps 2 and 3 of every passing case are also compiled
with --bundle-target (cuda) and exported into DIR with the CPU ranks'
shards as their expected result (test/gpu/export.py).

usage: train_suite.py --workdir W --model mlp|gpt [--optimizer adamw|sgd]
           [--lr X] [--momentum M] [--steps N] [--size KEY=N ...]
           --cases STRATEGY@MESH[:OPTION=V...] ...
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from npy_tools import read_safetensors, relative_errors, tolerance_problem  # noqa: E402
from models import fresh_workdir, generate, sbpc  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from export import DEVICE_FLAGS, export_case  # noqa: E402

GPT = dict(layers=2, hidden=32, heads=4, seq=8, batch=4, vocab=64)
MLP = dict(layers=2, hidden=32, inputs=16, outputs=8, batch=8)


def case_name(case):
    """A directory name for the case (its options' paths without slashes)."""
    return case.replace(":", "_").replace("/", "_")


def compile_step(args, path, mesh, strategy, extra, target, out):
    """sbpc compile --train of the case's model, with the suite's optimizer."""
    own = ["--momentum", str(args.momentum)] if args.optimizer == "sgd" else ["--eps", str(args.eps)]
    sbpc("compile", path("m.mlir"), "--mesh", mesh, "--strategy", strategy, "--train",
         "--optimizer", args.optimizer, "--lr", str(args.lr), *own, *extra, "--target", target,
         "-o", out)


def export_steps(args, path, case, mesh, strategy, extra, cpu_program, flags):
    """Exports steps 2 and 3 of a case into the GPU bundle: the state after
    one and two steps (the CPU program's, so that the optimizer moments are
    not zero) is each run's --params; and but for a pipeline's, steps 2 to 4
    in one launch (the ranks' --steps 3: each update, left in its place,
    the next step's parameter), whose last step's outputs are checked."""
    device = cpu_program + "-" + args.bundle_target
    compile_step(args, path, mesh, strategy, [*extra, *DEVICE_FLAGS], args.bundle_target, device)
    runs = []
    for steps in (1, 2):
        state = cpu_program + f"-after{steps}"
        sbpc("run", cpu_program, "--params", path("p.safetensors"), *flags, "--steps", str(steps),
             "--output-dir", state)
        runs.append((f"step{steps + 1}", ["--params", os.path.join(state, "params.safetensors"),
                                          *flags]))
    if not mesh.startswith("pp="):
        runs.append(("steps2to4", [*runs[0][1], "--steps", "3"]))
    export_case(args.bundle, f"train-{args.model}-{case_name(case)}", cpu_program, device,
                runs, args.rtol, args.norm_rtol, bf16="precision=bf16" in case)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", choices=["mlp", "gpt"], required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--eps", type=float, default=1e-8, help="AdamW's epsilon")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rtol", type=float, default=1e-4, help="max-wise relative error bound")
    ap.add_argument("--norm-rtol", type=float,
                    help="also bound the norm-wise relative error (bf16's tolerance)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu",
                    help="what the ranks run on (cuda: the GPUs of this machine, shared if fewer)")
    ap.add_argument("--cases", nargs="+", required=True)
    ap.add_argument("--batch", type=int, help="the model's batch (default: 4 GPT, 8 MLP)")
    ap.add_argument("--size", nargs="+", default=[], metavar="KEY=N",
                    help="the model's other sizes (GPT: layers, hidden, heads, seq, vocab)")
    ap.add_argument("--falling", action="store_true",
                    help="each case must need a smaller arena per rank than the one before, "
                         "and no more model state (report.json)")
    ap.add_argument("--matrix", action="store_true",
                    help="run each case with every ZeRO stage (0-3), micro-batches 1 and 4 and "
                         "recomputation none and full")
    ap.add_argument("--bundle", help="also export steps 2 and 3 of every passing case into "
                    "this GPU bundle directory (test/gpu/export.py)")
    ap.add_argument("--bundle-target", choices=["cpu", "cuda"], default="cuda")
    args = ap.parse_args()
    if args.bundle and args.target != "cpu":
        sys.exit("train-suite: --bundle takes its expected shards from --target cpu")
    if args.matrix:
        args.cases = [f"{case}:zero={z}:micro-batches={mb}:recompute={rc}" for case in args.cases
                      for z in range(4) for mb in (1, 4) for rc in ("none", "full")]
    work = os.path.abspath(args.workdir)  # programs run from their case directory
    path = fresh_workdir(work)
    rng = np.random.default_rng(args.seed)
    spec = dict(GPT if args.model == "gpt" else MLP)
    if args.batch:
        spec["batch"] = args.batch
    for size in args.size:
        key, _, value = size.partition("=")
        if key not in spec or not value.isdigit():
            sys.exit(f"train-suite: --size {size}: give KEY=N, KEY one of {', '.join(spec)}")
        spec[key] = int(value)
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
    memory = []
    for case in args.cases:
        # STRATEGY@MESH[:zero=N][:micro-batches=N][:recompute=MODE]
        strategy, rest = case.split("@")
        mesh, *extras = rest.split(":")
        extra = [f"--{e.replace('=', ' ', 1)}".split(" ") for e in extras]
        out, res = path(case_name(case) + "-out"), path(case_name(case) + "-res")
        try:
            compile_step(args, path, mesh, strategy, sum(extra, []), args.target, out)
            sbpc("run", out, *train, "--output-dir", res)
        except RuntimeError as e:
            print(f"FAIL {case}: {e}")
            failed += 1
            continue
        got = np.load(os.path.join(res, "losses.npy"))
        params = read_safetensors(os.path.join(res, "params.safetensors"))
        errors = {"losses": relative_errors([(losses, got)])}
        for name, expected in reference.items():
            if name in params:
                errors[name] = relative_errors([(expected, params[name])])
        worst = max(errors, key=lambda n: errors[n][0])
        worst_norm = max(errors, key=lambda n: errors[n][1])
        problems = [p for p in (tolerance_problem(n, e, args.rtol, args.norm_rtol)
                                for n, e in errors.items()) if p]
        ok = not problems and set(params) == set(reference)
        if problems:
            print(f"FAIL {case}: {problems[0]}")
        if "precision=bf16" in case and errors[worst][0] < 1e-4:
            print(f"FAIL {case}: worst error {errors[worst][0]:.1e}: no bf16 rounding shows")
            ok = False
        # Memory: what the plan says each rank needs is what it touched.
        report = json.load(open(os.path.join(out, "report.json")))
        run = json.load(open(os.path.join(res, "run.json")))
        planned = [r["arena_bytes"] for r in report["ranks"]]
        measured = [r["arena_peak_bytes"] for r in run["ranks"]]
        state = report["zero"]["model_state_bytes_per_rank"]
        memory.append((case, state, max(planned)))
        if planned != measured:
            print(f"FAIL {case}: arena planned {planned} but measured {measured}")
            ok = False
        # Communication: the report's boxings (whole bytes each; an entry
        # folds those of later micro-batches) are what a step sends, in bf16
        # as in f32.
        sent = sum(r["comm_bytes"] for r in run["ranks"])
        estimate = report["totals"]["comm_bytes_per_rank"] * len(run["ranks"])
        boxings = sum(b.get("micro_batches", 1) for b in report["boxings"])
        if abs(sent - estimate) > boxings * len(run["ranks"]):
            print(f"FAIL {case}: the ranks sent {sent} bytes a step, the boxings say "
                  f"{estimate:.0f}")
            ok = False
        if ok and args.bundle:
            try:
                export_steps(args, path, case, mesh, strategy, sum(extra, []), out, flags)
            except RuntimeError as e:
                print(f"FAIL {case}: bundle: {e}")
                ok = False
        failed += not ok
        norm = (f", norm-wise {worst_norm} {errors[worst_norm][1]:.1e}"
                if args.norm_rtol is not None else "")
        print(f"{'ok  ' if ok else 'FAIL'} {case}: {len(params)} tensors, worst {worst} "
              f"{errors[worst][0]:.1e}{norm}; model state {state} B, arena {max(planned)} B "
              "per rank")
    if args.falling:
        for (a, sa, ma), (b, sb, mb) in zip(memory, memory[1:]):
            if not (sb <= sa and mb < ma):
                print(f"FAIL memory does not fall from {a} to {b}: model state {sa} -> {sb} B, "
                      f"arena {ma} -> {mb} B")
                failed += 1
        if failed == 0:
            print("train-suite: memory falls case by case: " +
                  " > ".join(f"{m}" for _, _, m in memory) + " B")
    print(f"train-suite: {len(args.cases) - failed} ok, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
