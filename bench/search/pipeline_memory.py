#!/usr/bin/env python3
"""Pipeline memory benchmark: how close the search's memory estimate of a
pipelined plan (`report.search.memory_bytes_per_rank`, made before the
stages exist) comes to the fullest stage as cut (the largest
`pipeline.per_stage[].peak_memory_bytes`), and whether every plan the
search accepts for a device fits it.

It compiles AdamW training steps of small GPTs (3 and 6 layers) on 2 to 4
stages, alone and beside a data- or tensor-parallel axis, under every
schedule and micro-batch count that applies, without ZeRO, with ZeRO-2,
with ZeRO-3 and full recomputation, and on devices of 1 MB (where the
search must find a plan that fits, or say that none does). Shapes only:
nothing runs. With `--baseline OTHER_SBPC` every case is compiled by both
binaries, side by side (the same cases, the same machine, one run).

Writes OUT/results.json (one record per case and binary) and OUT/table.md
(the summary bench/README.md quotes).

usage: pipeline_memory.py --sbpc build/bin/sbpc [--baseline OLD/bin/sbpc]
                          [--out bench/search/pipeline-memory] [--jobs 2]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

MODELS = {"gpt3l": 3, "gpt6l": 6}
MESHES = ["pp=2", "pp=3", "pp=4", "pp=2,dp=2", "pp=2,tp=2"]
SCHEDULES = [[], ["--pipeline-schedule", "gpipe"], ["--pipeline-schedule", "sequential"],
             ["--pipeline-schedule", "interleaved"],
             ["--pipeline-schedule", "interleaved", "--pipeline-chunks", "3"]]
MICRO_BATCHES = [0, 6, 12]
DEVICE_BYTES = 1e6


def cluster_file(workdir):
    """A cluster of 1 MB devices (the rest as test/tools/Inputs/memory-1m.json)."""
    path = os.path.join(workdir, "memory-1m.json")
    with open(path, "w") as f:
        json.dump({"name": "memory-1m",
                   "device": {"flops": 1e13, "memory_bytes": DEVICE_BYTES,
                              "memory_bandwidth": 1e12},
                   "devices_per_node": 4,
                   "intra_node": {"alpha": 2e-6, "beta": 1e11},
                   "inter_node": {"alpha": 1e-5, "beta": 1e10}}, f)
    return path


def cases(workdir):
    memory = cluster_file(workdir)
    extras = [("", []), ("zero 2", ["--zero", "2"]),
              ("zero 3, recompute", ["--zero", "3", "--recompute", "full"]),
              ("1 MB devices", ["--cluster", memory])]
    for model in MODELS:
        for mesh in MESHES:
            for schedule in SCHEDULES:
                for micro in MICRO_BATCHES:
                    if schedule and not micro:
                        continue  # a schedule orders micro-batches
                    for name, extra in extras:
                        args = ["--mesh", mesh] + schedule
                        args += ["--micro-batches", str(micro)] if micro else []
                        yield {"model": model, "mesh": mesh,
                               "options": " ".join(schedule + (["--micro-batches", str(micro)]
                                                               if micro else []) + ([name] if name else [])),
                               "args": args + extra, "device_bytes": DEVICE_BYTES if extra and extra[0] == "--cluster" else None}


def compile_case(sbpc, case, workdir, tag):
    out = tempfile.mkdtemp(dir=workdir, prefix=tag + "-")
    model = os.path.join(workdir, case["model"] + ".mlir")
    cmd = [sbpc, "compile", model, "--train", "--emit", "report", "-o", out] + case["args"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    record = {"model": case["model"], "mesh": case["mesh"], "options": case["options"],
              "device_bytes": case["device_bytes"], "sbpc": tag}
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines()
        record.update(ok=False, error=lines[-1] if lines else f"exit {run.returncode}")
    else:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        peaks = [s["peak_memory_bytes"] for s in report["pipeline"]["per_stage"]]
        record.update(ok=True, estimate=report["search"]["memory_bytes_per_rank"],
                      stage_peaks=peaks, fits=report["totals"]["fits_device_memory"],
                      cut=report["pipeline"].get("cut", {}).get("by"))
    shutil.rmtree(out, ignore_errors=True)
    return record


def summary(records):
    ok = [r for r in records if r["ok"]]
    ratios = [r["estimate"] / max(r["stage_peaks"]) for r in ok]
    errors = [abs(x - 1) for x in ratios]
    limited = [r for r in records if r["device_bytes"]]
    return {"cases": len(records), "compiled": len(ok),
            "mean_error": statistics.mean(errors) if errors else None,
            "most_under": 1 - min(ratios) if ratios else None,
            "most_over": max(ratios) - 1 if ratios else None,
            "over_10pct": sum(e > 0.1 for e in errors),
            "device_cases": len(limited),
            "accepted": sum(r["ok"] for r in limited),
            "accepted_unfit": sum(r["ok"] and not r["fits"] for r in limited),
            "no_plan_fits": sum(not r["ok"] and "no plan found fits" in r["error"]
                                for r in limited)}


def table(summaries):
    lines = ["| sbpc | cases (compiled) | mean error | most under | most over | error > 10% "
             "| 1 MB devices: accepted (unfit) / no plan fits |", "|---|---|---|---|---|---|---|"]
    for tag, s in summaries.items():
        lines.append(f"| {tag} | {s['cases']} ({s['compiled']}) | {100 * s['mean_error']:.1f}% "
                     f"| {100 * s['most_under']:.1f}% | {100 * s['most_over']:.1f}% "
                     f"| {s['over_10pct']} | {s['accepted']} ({s['accepted_unfit']}) / "
                     f"{s['no_plan_fits']} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sbpc", required=True)
    parser.add_argument("--baseline", help="another sbpc to compile every case with, side by side")
    parser.add_argument("--out", default="bench/search/pipeline-memory")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    binaries = {"sbpc": os.path.abspath(args.sbpc)}
    if args.baseline:
        binaries["baseline"] = os.path.abspath(args.baseline)
    for tag, path in binaries.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"pipeline_memory.py: {tag} '{path}' is not an executable")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sbpc-pipeline-memory-") as workdir:
        for model, layers in MODELS.items():
            subprocess.run([binaries["sbpc"], "gen", "gpt", "--layers", str(layers), "--hidden", "32",
                            "--heads", "4", "--seq", "16", "--batch", "24", "--vocab", "64", "--loss",
                            "-o", os.path.join(workdir, model + ".mlir")], check=True)
        work = [(tag, case) for case in cases(workdir) for tag in binaries]
        records = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(compile_case, binaries[tag], case, workdir, tag)
                       for tag, case in work]
            for i, future in enumerate(futures, 1):
                records.append(future.result())
                if i % 50 == 0 or i == len(futures):
                    print(f"{i}/{len(futures)} compiled", file=sys.stderr, flush=True)
    summaries = {tag: summary([r for r in records if r["sbpc"] == tag]) for tag in binaries}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"summaries": summaries, "records": records}, f, indent=1)
    text = table(summaries)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
