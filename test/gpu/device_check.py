"""Checks a GPU bundle's cases on the machine that runs them (numpy only).

For every case directory (test/gpu/export.py) and each of its runs: runs the
device program's ranks (prog/launch.sh) on the run's inputs and checks,
rank by rank, against what the CPU program of the same flags wrote:

- every float output to the case's rtol, relative to its largest magnitude
  over all ranks (max |a - b| / max |b|), and where the case has one to its
  norm_rtol, norm-wise over all ranks (||a - b|| / ||b||; bf16's
  tolerance), infinities exactly where the CPU's are; integer shards
  exactly; the same set of shards;
- the bytes each rank sent (comm_bytes) and its arena peak
  (arena_peak_bytes) exactly: the device runs the same plan;
- a run with bad data ("fails_with") fails, naming the op and the fault
  as the CPU program did.

Cases marked "sanitize" (one rank) are also run under compute-sanitizer's
memcheck, racecheck and initcheck (or the tools the case names) when
--sanitizer names it; a tool the case leaves out is said with its reason.
Where the sanitizer itself cannot run (a GPU it does not support), that is said once
and in the summary, and no case is sanitized.

Every run is bounded: its ranks' watchdog gets --timeout, and a minute past
it mpirun is stopped, and with it its ranks.

Prints one line per case and a summary, writes --json, exits non-zero if
any case failed.

--jobs N checks N cases at a time (they share the GPU; lines come as cases
finish, the JSON in the cases' order).

usage: device_check.py --cases DIR [--json FILE] [--sanitizer compute-sanitizer]
                       [--filter SUBSTRING] [--keep DIR] [--jobs N]
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # npy_tools: beside this script in a bundle
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from npy_tools import mpi_session_env, relative_errors, tolerance_problem  # noqa: E402


def last_line(text):
    # Not the rules around Open MPI's messages.
    lines = [line for line in text.strip().splitlines() if line.strip(" -")]
    for line in lines:  # a rank's own report says most
        if line.startswith("rank ") and " failed in " in line:
            return line
    return lines[-1] if lines else "no output"


def stop(proc):
    """Ends `proc`, started in a session of its own, and what it started:
    SIGTERM first, which mpirun passes to its ranks (Open MPI puts each in
    a process group of its own), then SIGKILL to its process group."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return proc.communicate()
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def run_bounded(command, timeout, **kw):
    """(returncode, output) of `command`, in a session of its own (and an
    Open MPI session directory of its own); past `timeout` seconds it is
    stopped (stop()) and returncode is None."""
    with mpi_session_env() as env:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True, env=env, **kw)
        try:
            output, _ = proc.communicate(timeout=timeout)
            return proc.returncode, output
        except subprocess.TimeoutExpired:
            return None, stop(proc)[0]


def run_program(command, cwd, output_dir, timeout):
    """Runs `command` (a program's launch.sh, or a rank under a tool, with
    its arguments), its shards going to output_dir/.shards and its ranks'
    watchdog set to `timeout` seconds: (None, or why it failed; its output)."""
    os.makedirs(os.path.join(output_dir, ".shards"), exist_ok=True)
    code, output = run_bounded([*command, "--output-dir", output_dir, "--timeout", str(timeout)],
                               timeout + 60, cwd=cwd)
    if code is None:
        return f"did not finish in {timeout + 60} s", output
    if code != 0:
        return f"exit {code}: {last_line(output)}", output
    return None, output


def runtime_warnings(output):
    """The runtime's warnings in a run's output ("sbprt: warning: ..."), each
    once: a fallback taken (cuBLASLt without an epilogue's algorithm, say)
    shows even where the results agree."""
    found = []
    for line in output.splitlines():
        at = line.find("sbprt: warning:")
        if at >= 0 and line[at:] not in found:
            found.append(line[at:])
    return found


def compare_run(expected_dir, actual_dir, rtol, norm_rtol=None):
    """(problems, worst relative error) of one run's shards and measurements."""
    problems, worst = [], 0.0
    expected = sorted(os.path.basename(p) for p in glob.glob(os.path.join(expected_dir, "*.npy")))
    actual = sorted(os.path.basename(p) for p in glob.glob(os.path.join(actual_dir, "*.npy")))
    if expected != actual:
        missing = sorted(set(expected) - set(actual))
        extra = sorted(set(actual) - set(expected))
        problems.append(f"shards differ: missing {missing[:3]}, unexpected {extra[:3]}")
    outputs = {}
    for name in expected:
        if name in actual:
            outputs.setdefault(name.rsplit(".rank", 1)[0], []).append(name)
    for output, files in sorted(outputs.items()):
        pairs = [(np.load(os.path.join(expected_dir, f)), np.load(os.path.join(actual_dir, f)))
                 for f in files]
        for (e, a), f in zip(pairs, files):
            if e.shape != a.shape or e.dtype != a.dtype:
                problems.append(f"{f}: {a.dtype}{list(a.shape)} where the CPU wrote "
                                f"{e.dtype}{list(e.shape)}")
        pairs = [(e, a) for e, a in pairs if e.shape == a.shape and e.dtype == a.dtype]
        if not pairs:
            continue
        if not np.issubdtype(pairs[0][0].dtype, np.floating):
            if any(not np.array_equal(e, a) for e, a in pairs):
                problems.append(f"{output}: integers differ")
            continue
        # Infinities (a causal mask's -inf) must be where the CPU has them;
        # the finite rest is compared.
        if any(not np.array_equal(a[~np.isfinite(e)], e[~np.isfinite(e)]) or
               not np.all(np.isfinite(a[np.isfinite(e)])) for e, a in pairs):
            problems.append(f"{output}: not finite where the CPU's is, or not the CPU's "
                            "infinities")
            continue
        errors = relative_errors([(e[np.isfinite(e)], a[np.isfinite(e)]) for e, a in pairs])
        worst = max(worst, errors[0])
        problem = tolerance_problem(output, errors, rtol, norm_rtol)
        if problem:
            problems.append(problem)
    for path in sorted(glob.glob(os.path.join(expected_dir, "rank*.json"))):
        rank = os.path.basename(path)
        planned = json.load(open(path))
        try:
            measured = json.load(open(os.path.join(actual_dir, rank)))
        except (OSError, ValueError):
            problems.append(f"{rank}: not written")
            continue
        for key in ("comm_bytes", "arena_peak_bytes"):
            if measured.get(key) != planned.get(key):
                problems.append(f"{rank}: {key} {measured.get(key)}, the CPU's {planned.get(key)}")
    return problems, worst


# compute-sanitizer's own failure (its "=========" lines), as on a machine
# whose GPU it does not support (gVisor): not a finding about the program.
SANITIZER_UNUSABLE = re.compile(r"^=+ .*(?:Device not supported|not supported on this"
                                r"|Unable to (?:find|load|connect))")


def sanitize(case_dir, run, sanitizer, tool, work, timeout):
    """(None, or what compute-sanitizer's `tool` found on rank 0; None, or
    why the sanitizer itself cannot run here)."""
    # Under initcheck the runtime zeroes the scratch that cuBLAS's bf16
    # GEMMs write before our kernels read it: initcheck does not see those
    # writes (docs/cuda.md).
    setting = ["env", "SBPRT_CUDA_INITCHECK=1"] if tool == "initcheck" else []
    found, output = run_program([*setting, sanitizer, "--error-exitcode", "1", "--tool", tool,
                                 os.path.join(case_dir, "prog", "bin", "rank0"), *run["args"]],
                                case_dir, os.path.join(work, "sanitize-" + tool), timeout)
    if not found:
        return None, None
    reported = re.search(r"ERROR SUMMARY: ([0-9]+) error", output)
    said = [line.strip("= ") for line in output.splitlines() if SANITIZER_UNUSABLE.search(line)]
    if said and (not reported or reported.group(1) == "0"):
        return None, f"{tool}: {said[0]}"
    return f"{tool}: {found}", None


SAID = threading.Lock()  # args.sanitizer_unusable, set by the cases' threads


def check_case(case_dir, args):
    case = json.load(open(os.path.join(case_dir, "case.json")))
    problems, worst, start, warnings = [], 0.0, time.time(), []
    with tempfile.TemporaryDirectory(dir=args.keep) as work:
        for run in case["runs"]:
            out = os.path.join(work, run["name"])
            failure, output = run_program([os.path.join(case_dir, "prog", "launch.sh"),
                                           "--no-assemble", *run["args"]], case_dir, out,
                                          args.timeout)
            warnings += [w for w in runtime_warnings(output) if w not in warnings]
            if "fails_with" in run:
                if not failure or run["fails_with"] not in failure:
                    problems.append(f"{run['name']}: should fail with '{run['fails_with']}', "
                                    f"got: {failure or 'success'}")
                continue
            if failure:
                problems.append(f"{run['name']}: {failure}")
                continue
            found, err = compare_run(os.path.join(case_dir, "expected", run["name"]),
                                     os.path.join(out, ".shards"), case["rtol"],
                                     case.get("norm_rtol"))
            problems += [f"{run['name']}: {p}" for p in found]
            worst = max(worst, err)
        tools = []
        wanted = case.get("sanitize")
        wanted = ["memcheck", "racecheck", "initcheck"] if wanted is True else wanted or []
        if wanted and args.sanitizer and not args.sanitizer_unusable:
            for tool in wanted:
                found, unusable = sanitize(case_dir, case["runs"][0], args.sanitizer, tool, work,
                                           args.timeout)
                if unusable:
                    # Said once, by the first case to find it (--jobs); the
                    # other cases are not sanitized either.
                    with SAID:
                        first = not args.sanitizer_unusable
                        args.sanitizer_unusable = unusable
                    if first:
                        print(f"device-check: compute-sanitizer cannot run here ({unusable}); "
                              "no case is sanitized", flush=True)
                    tools = []
                    break
                if found:
                    problems.append(found)
                tools.append(tool)
        if problems and args.keep:
            kept = os.path.join(args.keep, case["name"])
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(work, kept)
    return {"name": case["name"], "ok": not problems, "problems": problems,
            "max_rel_err": worst, "rtol": case["rtol"], "runs": len(case["runs"]),
            "sanitized": tools, "unsanitized": case.get("unsanitized", {}) if tools else {},
            "warnings": warnings, "seconds": round(time.time() - start, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", required=True, help="the bundle's cases directory")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--sanitizer", help="compute-sanitizer, to run the one-rank cases under")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--keep", help="keep the outputs of failing cases here")
    ap.add_argument("--jobs", type=int, default=1, help="cases checked at a time (default 1)")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    args.sanitizer_unusable = None
    cases = sorted(d for d in glob.glob(os.path.join(args.cases, "*"))
                   if os.path.exists(os.path.join(d, "case.json")) and args.filter in d)
    if not cases:
        sys.exit(f"device-check: no cases in {args.cases}")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    results = []  # (the case's index, its result)

    def write_json():
        if args.json:
            failed = sum(not r["ok"] for _, r in results)
            ordered = [r for _, r in sorted(results, key=lambda r: r[0])]
            with open(args.json, "w") as f:
                json.dump({"cases": ordered, "ok": len(results) - failed, "failed": failed,
                           "of": len(cases), "sanitizer": args.sanitizer,
                           "sanitizer_unusable": args.sanitizer_unusable}, f, indent=1)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        pending = {pool.submit(check_case, case_dir, args): i for i, case_dir in enumerate(cases)}
        for future in concurrent.futures.as_completed(pending):
            result = future.result()
            results.append((pending[future], result))
            write_json()  # after each case: a run cut short keeps what it checked
            detail = "; ".join(result["problems"][:4]) if result["problems"] else \
                f"max rel err {result['max_rel_err']:.1e} over {result['runs']} run(s)" + \
                (", " + "/".join(result["sanitized"]) + " clean" if result["sanitized"] else "") + \
                "".join(f" ({tool} not run: {why})" for tool, why in result["unsanitized"].items())
            print(f"{'ok  ' if result['ok'] else 'FAIL'} {result['name']}: {detail}", flush=True)
            for warning in result["warnings"][:8]:
                print(f"     {warning}", flush=True)
    failed = sum(not r["ok"] for _, r in results)
    print(f"device-check: {len(results) - failed} ok, {failed} failed" +
          (f"; compute-sanitizer could not run ({args.sanitizer_unusable})"
           if args.sanitizer_unusable else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
