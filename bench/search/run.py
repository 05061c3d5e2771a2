#!/usr/bin/env python3
"""Layout-search benchmark: search time and plan quality of sbpc's searches
(auto, drec, exact) and hand-written strategies (dp, tp, dp-tp) on GPT
graphs at GPT-3 175B widths, shapes only (`sbpc compile --emit report`
allocates nothing): the forward with its loss, and one AdamW training step
(`--train`), and the whole compile of micro-batched training steps
(`--micro-batch-cases`: time, memory and the report's size; with ZeRO,
recomputation and the memory check where a case asks).

Writes OUT/results.json (one record per model, mesh and strategy),
OUT/table.md (the tables bench/README.md quotes) and, when matplotlib is
importable, OUT/search.png. `make bench-search` runs it with matplotlib
from a venv under the build directory.

usage: run.py --sbpc build/bin/sbpc [--out bench/search] [--layers 1,12,24,48,96]
              [--train-layers 1,12,96] [--meshes dp=2,tp=4 ...] [--workdir DIR]
              [--micro-batch-cases '12x64@dp=8,tp=8;96x64@pp=8,dp=8,tp=8:zero=3:recompute=full:memory;...' | '']
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

GPT3 = ["--hidden", "12288", "--heads", "96", "--seq", "2048", "--batch", "4096",
        "--vocab", "50257", "--loss"]
MESHES = ["dp=2,tp=4", "dp=8,tp=8", "dp=64,tp=8", "dp=8,tp=8,x=16", "dp=512,tp=8"]
STRATEGIES = ["auto", "drec", "exact", "dp", "tp", "dp-tp"]
CLUSTER = "dgx-h100-cluster"
EXACT_TIMEOUT_S = 300


def devices(mesh):
    n = 1
    for axis in mesh.split(","):
        n *= int(axis.split("=")[1])
    return n


def compile_report(sbpc, model, mesh, strategy, out, memory_aware, train=False):
    """One `sbpc compile --emit report`; a record of what it found."""
    cmd = [sbpc, "compile", model, "--mesh", mesh, "--strategy", strategy, "--cluster", CLUSTER,
           "--emit", "report", "-o", out] + (["--train"] if train else [])
    if not memory_aware:
        cmd.append("--ignore-memory")
    start = time.perf_counter()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=EXACT_TIMEOUT_S if strategy == "exact" else None)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"over {EXACT_TIMEOUT_S} s"}
    elapsed = time.perf_counter() - start
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines()
        return {"ok": False, "error": lines[-1] if lines else f"exit {run.returncode}"}
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    search = report["search"]
    return {"ok": True, "process_seconds": elapsed,
            "search_seconds": search.get("search_seconds", search["wall_seconds"]),
            "wall_seconds": search["wall_seconds"],
            "plan_seconds": search.get("plan_seconds"),
            "step_time_s": report["totals"]["estimated_step_time_s"],
            "comm_bytes_per_rank": report["totals"]["comm_bytes_per_rank"],
            "peak_memory_bytes": report["totals"]["peak_memory_bytes"],
            "fits_device_memory": report["totals"]["fits_device_memory"]}


def micro_batched(sbpc, work, case):
    """`auto` on a training step of LAYERSxMICRO_BATCHES@MESH[:zero=N]
    [:recompute=R][:memory]: the whole compile's time and memory, and the
    report's size (a micro-batched step is unrolled, docs/search.md);
    `--ignore-memory` unless the case says `memory`."""
    shape, rest = case.split("@")
    mesh, *options = rest.split(":")
    layers, micro = (int(x) for x in shape.split("x"))
    settings = dict(o.split("=", 1) for o in options if "=" in o)
    memory_aware = "memory" in options
    model = os.path.join(work, f"gpt3-{layers}.mlir")
    if not os.path.exists(model):
        subprocess.run([sbpc, "gen", "gpt", "--layers", str(layers), *GPT3, "-o", model], check=True)
    out = os.path.join(work, f"micro-{layers}x{micro}-{mesh}-{'-'.join(options)}")
    cmd = ["/usr/bin/time", "-f", "%M", sbpc, "compile", model, "--mesh", mesh, "--strategy", "auto",
           "--cluster", CLUSTER, "--train", "--micro-batches", str(micro),
           *[f"--{k}={v}" for k, v in settings.items()],
           *([] if memory_aware else ["--ignore-memory"]), "--emit", "report", "-o", out]
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    record = {"case": case, "layers": layers, "micro_batches": micro, "mesh": mesh,
              "options": " ".join(f"--{k} {v}" for k, v in settings.items()) +
                         ("" if memory_aware else " --ignore-memory"),
              "memory_aware": memory_aware,
              "ok": run.returncode == 0, "process_seconds": elapsed}
    if not record["ok"]:
        record["error"] = (run.stderr.strip().splitlines() or ["?"])[-1]
        return record
    path = os.path.join(out, "report.json")
    with open(path) as f:
        report = json.load(f)
    record.update({"max_rss_bytes": int(run.stderr.strip().splitlines()[-1]) * 1024,
                   "report_bytes": os.path.getsize(path),
                   "ops": sum(o.get("micro_batches", 1) for o in report["ops"]),
                   "op_entries": len(report["ops"]),
                   "search_seconds": report["search"]["search_seconds"],
                   "starts_seconds": report["search"].get("starts_seconds", 0),
                   "step_time_s": report["totals"]["estimated_step_time_s"],
                   "search_step_time_s": report["search"]["plan_seconds"],
                   "zero": int(settings.get("zero", 0)),
                   "peak_memory_bytes": report["totals"]["peak_memory_bytes"],
                   "search_memory_bytes": report["search"].get("memory_bytes_per_rank"),
                   "fits_device_memory": report["totals"]["fits_device_memory"]})
    if "pipeline" in report:
        pipeline = report["pipeline"]
        record["pipeline"] = {"schedule": pipeline["schedule"],
                              "cut": pipeline.get("cut", {}).get("by"),
                              "blocks": [len(s["blocks"]) for s in pipeline["per_stage"]],
                              "stage_peak_bytes": [s["peak_memory_bytes"]
                                                   for s in pipeline["per_stage"]]}
    return record


def micro_table(records):
    lines = ["### Micro-batched training steps (auto; the whole compile)", "",
             "| layers x micro-batches | mesh | options | ops | compile s | search s (starts) | "
             "compile memory | report (entries) | step s (search's) | peak per rank (search's) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        pipeline = r.get("pipeline")
        stages = (f" ({pipeline['schedule']}, cut by {pipeline['cut']}: "
                  f"{', '.join(map(str, pipeline['blocks']))} layers)" if pipeline else "")
        head = (f"| {r['layers']} x {r['micro_batches']} | `{r['mesh']}` | "
                f"`{r.get('options', '--ignore-memory').strip()}`{stages} |")
        if not r["ok"]:
            lines.append(f"{head} {r['error']} | | | | | | |")
            continue
        search_memory = r.get("search_memory_bytes")
        lines.append(f"{head} {r['ops']:,} | "
                     f"{r['process_seconds']:.3g} | {r['search_seconds']:.3g} "
                     f"({r['starts_seconds']:.3g}) | {r['max_rss_bytes'] / 2**20:.0f} MiB | "
                     f"{r['report_bytes'] / 2**20:.2f} MiB ({r['op_entries']:,}) | "
                     f"{r['step_time_s']:.4g}"
                     + (f" ({r['search_step_time_s']:.4g})" if "search_step_time_s" in r else "")
                     + f" | {r['peak_memory_bytes'] / 2**30:.1f} GiB"
                     + (f" ({search_memory / 2**30:.1f})" if search_memory else "")
                     + ("" if r["fits_device_memory"] else " *") + " |")
    return "\n".join(lines)


def micro_checks(records):
    checks = []
    for r in records:
        if r.get("memory_aware"):
            checks.append((f"memory-aware auto on a {r['layers']}-layer step of "
                           f"{r['micro_batches']} micro-batches, {r['mesh']}, "
                           f"{r['options'].strip()}: a plan that fits the device "
                           f"({r.get('peak_memory_bytes', 0) / 2**30:.1f} GiB), compiled in "
                           f"{r['process_seconds']:.3g} s (target < 120 s)",
                           r["ok"] and r["fits_device_memory"] and r["process_seconds"] < 120, []))
            # (A pipeline's step is the report's schedule's, the search's
            # the whole plan's without stages.)
            if r.get("zero", 0) >= 3 and r["ok"] and not r["mesh"].startswith("pp="):
                # At stage 3 nothing goes back to the stored layouts after the
                # step, so the search's estimate is the report's.
                est, step = r["search_step_time_s"], r["step_time_s"]
                checks.append((f"the search prices ZeRO-3's collectives on that step: it "
                               f"estimates {est:.4g} s, the report {step:.4g} s (target: within 5%)",
                               abs(est - step) <= 0.05 * step, []))
            continue
        checks.append((f"auto on a {r['layers']}-layer step of {r['micro_batches']} micro-batches, "
                       f"{r['mesh']}: compiles in {r['process_seconds']:.3g} s (target < 60 s), "
                       f"its report {r.get('report_bytes', 0) / 2**20:.2f} MiB (target < 10 MiB)",
                       r["ok"] and r["process_seconds"] < 60 and r["report_bytes"] < 10 * 2**20,
                       []))
    return checks


def fmt_time(seconds):
    return "—" if seconds is None else f"{seconds:.3g}"


def tables(records, layers, meshes, workload="forward"):
    records = [r for r in records if r.get("workload", "forward") == workload]
    layers = [l for l in layers if any(r["layers"] == l for r in records)]
    what = "" if workload == "forward" else ", training step"

    def find(l, m, s):
        return next((r for r in records if r["layers"] == l and r["mesh"] == m and r["strategy"] == s), None)

    lines = [f"### Search time{what} (seconds, one core; the search alone, problem building "
             "included)", "",
             "auto (`--ignore-memory`) / auto memory-aware (`no fit`: no plan fits 80 GB per "
             "device) / drec", "",
             "| layers | " + " | ".join(f"`{m}` ({devices(m)})" for m in meshes) + " |",
             "|---|" + "---|" * len(meshes)]
    for l in layers:
        cells = []
        for m in meshes:
            a, am, d = find(l, m, "auto"), find(l, m, "auto-memory"), find(l, m, "drec")
            cells.append(f"{fmt_time(a['search_seconds']) if a and a['ok'] else '✗'} / "
                         f"{fmt_time(am['search_seconds']) if am and am['ok'] else 'no fit'} / "
                         f"{fmt_time(d['search_seconds']) if d and d['ok'] else '✗'}")
        lines.append(f"| {l} | " + " | ".join(cells) + " |")
    lines += ["", f"### Plan quality{what} (estimated step time, seconds; lower is better)", "",
              "| layers | mesh | " + " | ".join(STRATEGIES) + " | auto, memory-aware |",
              "|---|---|" + "---|" * (len(STRATEGIES) + 1)]
    for l in layers:
        for m in meshes:
            cells = []
            for s in STRATEGIES + ["auto-memory"]:
                r = find(l, m, s)
                if r and not r["ok"] and "fits device memory" in r["error"]:
                    cells.append("no fit")
                elif not r or not r["ok"]:
                    cells.append("n/a")
                else:
                    mark = "" if r["fits_device_memory"] else "*"
                    cells.append(f"{r['step_time_s']:.4g}{mark}")
            lines.append(f"| {l} | `{m}` | " + " | ".join(cells) + " |")
    lines += ["", "`*`: the plan does not fit the device's memory (80 GB); no fit: auto found "
              "no plan that does; n/a: the strategy does not apply to the mesh (dp needs the "
              "batch divisible by every device, dp-tp a 2-D dp x tp mesh), or exact refused a "
              "graph too large for it. Every column but the last ignores memory."]
    return "\n".join(lines)


def checks(records, workload="forward"):
    """The issue's targets, as lines of text and whether each holds."""
    records = [r for r in records if r.get("workload", "forward") == workload]
    if not records:
        return []
    what = "" if workload == "forward" else " (training steps)"
    out = []
    by_case = {}
    for r in records:
        by_case.setdefault((r["layers"], r["mesh"]), {})[r["strategy"]] = r
    worse, gaps = [], []
    for (l, m), case in sorted(by_case.items()):
        auto = case.get("auto")
        if not auto or not auto["ok"]:
            worse.append(f"{l} layers on {m}: auto failed")
            continue
        for s in ("drec", "dp", "tp", "dp-tp"):
            other = case.get(s)
            if other and other["ok"] and auto["step_time_s"] > other["step_time_s"] * (1 + 1e-9):
                worse.append(f"{l} layers on {m}: auto {auto['step_time_s']:.4g} > {s} {other['step_time_s']:.4g}")
        exact = case.get("exact")
        if exact and exact["ok"]:
            gaps.append((auto["step_time_s"] / exact["step_time_s"] - 1, l, m))
    out.append((f"auto never worse than drec or a hand-written strategy{what}", not worse, worse))
    worst = max(gaps) if gaps else None
    out.append((f"auto within 2% of exact where exact finishes{what} ({len(gaps)} cases"
                + (f", worst {worst[0] * 100:.2f}% on {worst[1]} layers, {worst[2]})" if worst else ")"),
                all(g[0] <= 0.02 for g in gaps), []))
    big = [r for r in records if r["strategy"] in ("auto", "auto-memory") and r["layers"] == 96
           and devices(r["mesh"]) == 1024]
    for r in big if workload == "forward" else []:
        name = "auto" if r["strategy"] == "auto" else "auto, memory-aware,"
        out.append((f"{name} on 96 layers, {r['mesh']}: "
                    f"{fmt_time(r.get('search_seconds'))} s (target < 1 s)",
                    r["ok"] and r["search_seconds"] < 1.0, []))
    return out


def plot(records, layers, meshes, path):
    records = [r for r in records if r.get("workload", "forward") == "forward"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot (make bench-search installs it)", file=sys.stderr)
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for m in meshes:
        for s, style in (("auto", "-o"), ("drec", "--x")):
            pts = [(r["layers"], r["search_seconds"]) for r in records
                   if r["mesh"] == m and r["strategy"] == s and r["ok"]]
            if pts:
                left.plot(*zip(*sorted(pts)), style, label=f"{s} {m}")
    left.set(xlabel="layers", ylabel="search time (s)", yscale="log",
             title="Search time vs model size (GPT-3 widths)")
    left.axhline(1.0, color="gray", linewidth=0.8)
    left.legend(fontsize=7)
    cases = [(l, m) for l in layers for m in meshes]
    for i, s in enumerate(STRATEGIES):
        xs, ys = [], []
        for j, (l, m) in enumerate(cases):
            auto = next((r for r in records if r["layers"] == l and r["mesh"] == m and r["strategy"] == "auto"), None)
            r = next((r for r in records if r["layers"] == l and r["mesh"] == m and r["strategy"] == s), None)
            if auto and auto["ok"] and r and r["ok"]:
                xs.append(j + (i - 2.5) * 0.12)
                ys.append(r["step_time_s"] / auto["step_time_s"])
        right.scatter(xs, ys, label=s, s=14)
    right.set(ylabel="estimated step time / auto's", yscale="log",
              title="Plan quality (1 = auto; above = slower than auto)")
    right.set_xticks(range(len(cases)), [f"{l}L {devices(m)}" for l, m in cases], rotation=90, fontsize=6)
    right.axhline(1.0, color="gray", linewidth=0.8)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sbpc", required=True)
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--layers", default="1,12,24,48,96")
    parser.add_argument("--train-layers", default="1,12,96",
                        help="the training steps' layer counts ('' for none)")
    parser.add_argument("--meshes", nargs="*", default=MESHES)
    parser.add_argument("--micro-batch-cases",
                        default="12x64@dp=8,tp=8;96x64@dp=64,tp=8:zero=3:recompute=full:memory;"
                                "96x64@pp=8,dp=8,tp=8:zero=3:recompute=full:memory",
                        help="training steps LAYERSxMICRO_BATCHES@MESH[:zero=N][:recompute=R]"
                             "[:memory], separated by ';' ('' for none)")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    layers = [int(x) for x in args.layers.split(",") if x]
    train_layers = [int(x) for x in args.train_layers.split(",") if x]
    work = args.workdir or tempfile.mkdtemp(prefix="sbpc-bench-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    records = []
    cases = [("forward", l) for l in layers] + [("train", l) for l in train_layers]
    for workload, l in cases:
        model = os.path.join(work, f"gpt3-{l}.mlir")
        if not os.path.exists(model):
            subprocess.run([args.sbpc, "gen", "gpt", "--layers", str(l), *GPT3, "-o", model],
                           check=True)
        for m in args.meshes:
            for s in STRATEGIES + ["auto-memory"]:
                strategy = "auto" if s == "auto-memory" else s
                out = os.path.join(work, f"{workload}-{l}-{m}-{s}")
                record = {"workload": workload, "layers": l, "mesh": m, "devices": devices(m),
                          "strategy": s,
                          **compile_report(args.sbpc, model, m, strategy, out, s == "auto-memory",
                                           train=workload == "train")}
                records.append(record)
                status = (f"{record['search_seconds']:.3f} s, step {record['step_time_s']:.4g} s"
                          if record["ok"] else record["error"])
                print(f"{workload:7s} {l:3d} layers  {m:16s} {s:12s} {status}", flush=True)
    micro = []
    for case in (c for c in args.micro_batch_cases.split(";") if c):
        micro.append(micro_batched(args.sbpc, work, case))
        r = micro[-1]
        print(f"micro-batched {case}: " + (f"{r['process_seconds']:.3g} s, report "
                                           f"{r['report_bytes']:,} bytes" if r["ok"] else r["error"]),
              flush=True)
    text = "\n\n".join(tables(records, layers if w == "forward" else train_layers, args.meshes, w)
                        for w in ("forward", "train") if any(r["workload"] == w for r in records))
    if micro:
        text = "\n\n".join(t for t in (text, micro_table(micro)) if t)
    results = checks(records) + checks(records, "train") + micro_checks(micro)
    summary = "\n".join(f"- [{'x' if ok else ' '}] {what}" + "".join(f"\n  - {d}" for d in details[:10])
                        for what, ok, details in results)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "cluster": CLUSTER, "model": "gpt " + " ".join(GPT3),
            "train": "--train (AdamW)"}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "records": records, "micro_batched": micro}, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n\n" + summary + "\n")
    plotted = plot(records, layers, args.meshes, os.path.join(args.out, "search.png"))
    print("\n" + text + "\n\n" + summary)
    print(f"\nwrote {args.out}/results.json, table.md" + (", search.png" if plotted else ""))


if __name__ == "__main__":
    main()
