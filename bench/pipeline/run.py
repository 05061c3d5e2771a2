#!/usr/bin/env python3
"""Pipeline-schedule benchmark: one AdamW training step of a small GPT on
the CPU, run for real (`sbpc run --repeat`), on one rank and on `pp=S`
stages under each schedule (sequential, GPipe, 1F1B, interleaved 1F1B),
side by side in one run, against the closed forms of each schedule's time
from the one-rank step.

Every case runs --rounds times, the cases taking turns, and each run
repeats the step --repeat times; a case's time is the median over its
runs of the median repeat (the slowest rank's). The machine's other work
shows up as noise; the turns spread it over the cases.

Writes OUT/results.json (the settings, the machine, one record per case)
and OUT/table.md (the table bench/README.md quotes), and prints the table.

usage: run.py --sbpc build/bin/sbpc [--out bench/pipeline] [--workdir DIR]
              [--stages 2] [--micro-batches 4] [--chunks 2] [--layers 4]
              [--hidden 256] [--seq 128] [--batch 16] [--vocab 512]
              [--repeat 9] [--rounds 3]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "e2e"))
from npy_tools import main as npy_tools  # noqa: E402


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        sys.exit("bench-pipeline: " + " ".join(cmd[:3]) + " failed: " +
                 (lines[-1] if lines else f"exit {done.returncode}"))
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sbpc", required=True)
    ap.add_argument("--out", default=os.path.join(HERE))
    ap.add_argument("--workdir")
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench-pipeline-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    model = os.path.join(work, "gpt.mlir")
    fresh = os.path.join(work, "fresh.safetensors")
    params = os.path.join(work, "params.safetensors")
    run([args.sbpc, "gen", "gpt", "--layers", str(args.layers), "--hidden", str(args.hidden),
         "--heads", str(args.heads), "--seq", str(args.seq), "--batch", str(args.batch),
         "--vocab", str(args.vocab), "--loss", "-o", model, "--params", fresh])
    npy_tools(["adamw-state", fresh, params])
    rng = np.random.default_rng(0)
    inputs = []
    for name in ("tokens", "targets"):
        path = os.path.join(work, name + ".npy")
        np.save(path, rng.integers(0, args.vocab, (args.batch, args.seq)).astype(np.int64))
        inputs += ["--input", f"{name}={path}"]

    s, m, v = args.stages, args.micro_batches, args.chunks
    cases = [("one rank", "dp=1", [])]
    for schedule in ("sequential", "gpipe", "1f1b", "interleaved"):
        flags = ["--pipeline-schedule", schedule]
        if schedule == "interleaved":
            flags += ["--pipeline-chunks", str(v)]
        cases.append((schedule, f"pp={s}", flags))
    records = []
    for name, mesh, flags in cases:
        out = os.path.join(work, name.replace(" ", "-"))
        run([args.sbpc, "compile", model, "--mesh", mesh, "--strategy", "dp", "--train",
             "--micro-batches", str(m), "--target", "cpu", "-o", out] + flags)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        stages = report.get("pipeline", {}).get("per_stage", [])
        records.append({"case": name, "mesh": mesh, "flags": flags, "dir": out, "runs": [],
                        "estimated_step_time_s": report["totals"]["estimated_step_time_s"],
                        "peak_memory_bytes": [st["peak_memory_bytes"] for st in stages] or
                        [report["totals"]["peak_memory_bytes"]],
                        "messages": len(report.get("pipeline", {}).get("transfers", []))})
    for turn in range(args.rounds):
        for r in records:
            res = os.path.join(work, "res-" + os.path.basename(r["dir"]))
            run([args.sbpc, "run", r["dir"], "--params", params, "--output-dir", res,
                 "--repeat", str(args.repeat)] + inputs)
            with open(os.path.join(res, "run.json")) as f:
                ranks = json.load(f)["ranks"]
            r["runs"].append(max(statistics.median(x["compute_seconds"] for x in k["repeats"])
                                 for k in ranks))
            print(f"bench-pipeline: round {turn + 1}/{args.rounds}, {r['case']}: "
                  f"{r['runs'][-1]:.3f} s", flush=True)
    one = statistics.median(records[0]["runs"])
    closed = {"one rank": one, "sequential": one,
              "gpipe": one * (m + s - 1) / (m * s), "1f1b": one * (m + s - 1) / (m * s),
              "interleaved": one * (m + (s - 1) / v) / (m * s)}
    for r in records:
        r["seconds"] = statistics.median(r["runs"])
        r["closed_form_s"] = closed[r["case"]]
        del r["dir"]

    rows = ["| schedule | mesh | step s (median of runs) | closed form s | vs one rank | "
            "messages | peak per stage (MiB) | report's estimate s |",
            "|---|---|---:|---:|---:|---:|---|---:|"]
    for r in records:
        peaks = ", ".join(f"{p / 2**20:.1f}" for p in r["peak_memory_bytes"])
        rows.append(f"| {r['case']} | `{r['mesh']}` | {r['seconds']:.3f} | "
                    f"{r['closed_form_s']:.3f} | {one / r['seconds']:.2f}x | {r['messages']} | "
                    f"{peaks} | {r['estimated_step_time_s']:.3g} |")
    table = "\n".join(rows) + "\n"
    settings = {k: getattr(args, k) for k in ("stages", "micro_batches", "chunks", "layers",
                                              "hidden", "heads", "seq", "batch", "vocab",
                                              "repeat", "rounds")}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"settings": settings, "machine": {"cpus": os.cpu_count(),
                                                     "platform": platform.platform()},
                   "cases": records}, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print(table, end="")


if __name__ == "__main__":
    main()
