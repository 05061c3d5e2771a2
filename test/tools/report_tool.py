"""Reads an sbpc report.json for tests: checks it against the documented
schema (docs/report.md) and summarizes its reshards.

usage: report_tool.py validate REPORT
       report_tool.py collectives REPORT   (one line per collective: count, bytes, axes)
"""
import json
import sys

LAYOUT = str
SCHEMA = {
    "version": int, "model": str,
    "mesh": {"spec": str, "axes": [str], "shape": [int]},
    "precision": str,
    "cluster": {"name": str, "device_flops": float, "device_bf16_flops": float,
                "device_memory_bytes": float},
    "strategy": {"name": str, "source": str},
    "search": {"algorithm": str, "wall_seconds": float},
    "ops": [{"name": str, "op": str, "location": str, "est_time_s": float,
             "operands": [{"value": str, "shape": [int], "sbp": LAYOUT}],
             "results": [{"value": str, "shape": [int], "sbp": LAYOUT}]}],
    "boxings": [{"value": str, "result": str, "shape": [int], "from": LAYOUT, "to": LAYOUT,
                 "collective": str, "mesh_axes": [str], "element_bytes": int,
                 "bytes_per_rank": int,
                 "est_time_s": float, "location": str, "reason": str}],
    "totals": {"comm_bytes_per_rank": float, "compute_time_s": float, "comm_time_s": float,
               "estimated_step_time_s": float, "peak_memory_bytes": float,
               "fits_device_memory": bool},
}

# Where the peak memory is (totals.peak_memory, pipeline.per_stage[].peak_memory).
PEAK = {"arguments_bytes": float, "activations_bytes": float}
PEAK_AT = {"op": str, "location": str, "micro_batch": int}
PEAK_LIVE = [{"value": str, "op": str, "shape": [int], "sbp": LAYOUT, "location": str,
              "micro_batch": int, "bytes": float}]


def check_peak(peak, total, path, problems):
    """A peak is its arguments and activations; the values listed live at it
    are the largest, largest first, and no more than its activations."""
    check(peak, PEAK, path, problems)
    if not isinstance(peak, dict):
        return
    parts = peak.get("arguments_bytes", 0) + peak.get("activations_bytes", 0)
    if abs(parts - total) > 1e-6 * max(1.0, total):
        problems.append(f"{path}: arguments and activations add up to {parts}, not {total}")
    if "at" in peak:
        check(peak["at"], PEAK_AT, f"{path}.at", problems)
        check(peak.get("largest_live"), PEAK_LIVE, f"{path}.largest_live", problems)
        sizes = [v.get("bytes", 0) for v in peak.get("largest_live") or []]
        if not sizes or sizes != sorted(sizes, reverse=True) or \
                sum(sizes) > peak.get("activations_bytes", 0) * (1 + 1e-9):
            problems.append(f"{path}.largest_live: {sizes} (not the largest first, or more "
                            f"than activations_bytes)")


# What a search (auto, drec, exact) adds.
SEARCH = {"search_seconds": float, "candidates_evaluated": int, "plan_seconds": float,
          "memory_bytes_per_rank": float}
RUNNER_UP = {"operands": [LAYOUT], "results": [LAYOUT], "plan_time_s": float}
# What a pipeline (--mesh pp=N,...) adds.
PIPELINE = {"axis": str, "stages": int, "micro_batches": int, "schedule": str, "chunks": int,
            "per_stage": [{"stage": int, "ranks": [int], "compute_time_s": float,
                           "comm_time_s": float, "comm_bytes_per_rank": float,
                           "peak_memory_bytes": float, "blocks": [str]}],
            "cut": {"by": str, "estimated_stage_bytes": [float]},
            "transfers": [{"value": str, "shape": [int], "sbp": LAYOUT, "from_stage": int,
                           "to_stage": int, "bytes_per_rank": float, "est_time_s": float,
                           "location": str, "reason": str}]}


def check(value, schema, path, problems):
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            problems.append(f"{path}: expected an object")
            return
        for key, sub in schema.items():
            if key not in value:
                problems.append(f"{path}.{key}: missing")
            else:
                check(value[key], sub, f"{path}.{key}", problems)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            problems.append(f"{path}: expected an array")
            return
        for i, item in enumerate(value):
            check(item, schema[0], f"{path}[{i}]", problems)
    elif schema is bool:
        if not isinstance(value, bool):
            problems.append(f"{path}: expected a boolean")
    elif schema is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"{path}: expected a number")
    elif not isinstance(value, schema) or isinstance(value, bool):
        problems.append(f"{path}: expected {schema.__name__}")


def main(cmd, path):
    report = json.load(open(path))
    if cmd == "validate":
        problems = []
        check(report, SCHEMA, "report", problems)
        if report.get("search", {}).get("algorithm") in ("auto", "drec", "exact"):
            check(report["search"], SEARCH, "report.search", problems)
            with_runner_up = [op for op in report.get("ops", []) if "runner_up" in op]
            if not with_runner_up:
                problems.append("report.ops[].runner_up: missing on every op")
            for i, op in enumerate(with_runner_up):
                check(op["runner_up"], RUNNER_UP, f"report.ops[{i}].runner_up", problems)
        # Entries of later micro-batches fold into alike ones of earlier
        # micro-batches (micro_batches counts them); what is left of a
        # later micro-batch says which (micro_batch). Either way the
        # entries add up to the totals.
        for kind in ("ops", "boxings"):
            for i, entry in enumerate(report.get(kind, [])):
                for field, least in (("micro_batches", 2), ("micro_batch", 1)):
                    if field in entry and (not isinstance(entry[field], int) or
                                           entry[field] < least):
                        problems.append(f"report.{kind}[{i}].{field}: expected an int >= {least}")
        times = sum(op.get("est_time_s", 0) * op.get("micro_batches", 1)
                    for op in report.get("ops", []))
        sent = sum(b.get("bytes_per_rank", 0) * b.get("micro_batches", 1)
                   for b in report.get("boxings", []))
        totals = report.get("totals", {})
        check_peak(totals.get("peak_memory"), totals.get("peak_memory_bytes", 0),
                   "report.totals.peak_memory", problems)
        pipeline = report.get("pipeline")
        if pipeline is not None:
            # Every op and boxing on a stage; a stage's compute is its ops',
            # its bytes its boxings' and sends'; the total per rank is
            # their mean over the stages (a rank sends only its stage's).
            check(pipeline, PIPELINE, "report.pipeline", problems)
            stages = pipeline.get("stages", 1)
            per_stage = {s["stage"]: s for s in pipeline.get("per_stage", [])}
            if sorted(per_stage) != list(range(stages)):
                problems.append(f"report.pipeline.per_stage: stages {sorted(per_stage)}")
            stage_sent = {s: 0 for s in range(stages)}
            stage_time = {s: 0 for s in range(stages)}
            for kind in ("ops", "boxings"):
                for i, entry in enumerate(report.get(kind, [])):
                    if entry.get("stage") not in stage_sent:
                        problems.append(f"report.{kind}[{i}].stage: {entry.get('stage')}")
                        continue
                    n = entry.get("micro_batches", 1)
                    if kind == "ops":
                        stage_time[entry["stage"]] += entry.get("est_time_s", 0) * n
                    else:
                        stage_sent[entry["stage"]] += entry.get("bytes_per_rank", 0) * n
            for t in pipeline.get("transfers", []):
                if t.get("from_stage") in stage_sent and t.get("from_stage") != t.get("to_stage"):
                    stage_sent[t["from_stage"]] += t.get("bytes_per_rank", 0)
                else:
                    problems.append(f"report.pipeline.transfers: {t.get('value')} from stage "
                                    f"{t.get('from_stage')} to {t.get('to_stage')}")
            for s, entry in per_stage.items():
                check_peak(entry.get("peak_memory"), entry.get("peak_memory_bytes", 0),
                           f"report.pipeline.per_stage[{s}].peak_memory", problems)
                if s in stage_sent and abs(entry["comm_bytes_per_rank"] - stage_sent[s]) > 0.5:
                    problems.append(f"report.pipeline.per_stage[{s}]: sends {stage_sent[s]}, "
                                    f"comm_bytes_per_rank is {entry['comm_bytes_per_rank']}")
                if s in stage_time and abs(entry["compute_time_s"] - stage_time[s]) > \
                        1e-9 * max(1.0, stage_time[s]):
                    problems.append(f"report.pipeline.per_stage[{s}]: ops take {stage_time[s]}, "
                                    f"compute_time_s is {entry['compute_time_s']}")
            sent = sum(stage_sent.values()) / stages
            # The step's peak is its fullest stage's.
            fullest = (totals.get("peak_memory") or {}).get("stage")
            if fullest not in per_stage or \
                    {k: v for k, v in totals["peak_memory"].items() if k != "stage"} != \
                    per_stage[fullest].get("peak_memory"):
                problems.append(f"report.totals.peak_memory: stage {fullest}, not a stage's "
                                f"peak_memory")
        if abs(times - totals.get("compute_time_s", 0)) > 1e-9 * max(1.0, times):
            problems.append(f"report.ops: est_time_s add up to {times}, "
                            f"totals.compute_time_s is {totals.get('compute_time_s')}")
        if abs(sent - totals.get("comm_bytes_per_rank", 0)) > 0.5:
            problems.append(f"report.boxings: bytes_per_rank add up to {sent}, "
                            f"totals.comm_bytes_per_rank is {totals.get('comm_bytes_per_rank')}")
        for p in problems[:20]:
            print(p)
        print(f"schema: {'ok' if not problems else 'FAIL'} ({len(report.get('ops', []))} ops, "
              f"{len(report.get('boxings', []))} boxings)")
        return 1 if problems else 0
    counts = {}
    for b in report["boxings"]:
        key = (b["collective"], ",".join(b["mesh_axes"]), b["bytes_per_rank"])
        counts[key] = counts.get(key, 0) + b.get("micro_batches", 1)
    for (collective, axes, size), n in sorted(counts.items()):
        print(f"{n} x {collective} over [{axes}] of {size} bytes")
    print(f"total {report['totals']['comm_bytes_per_rank']:g} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
