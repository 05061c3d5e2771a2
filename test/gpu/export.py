"""One case of a GPU bundle (test/gpu/bundle.py): a program compiled for the
device, its inputs, and what the same program compiled for the CPU wrote.

The CPU and the device program come from the same `sbpc compile` flags, so
they are the same exec program: rank by rank, they must write the same
shards and send the same bytes. The suites that export cases have already
checked the CPU program against the reference evaluator (or single-device
training), so a device that matches the CPU shards matches the reference.

A case directory holds:
  prog/                 the device program (sbpc compile -o), sources kept
  inputs/RUN-FILE       every file a run reads
  expected/RUN/         the CPU ranks' shards (NAME.rankR.npy) and rankR.json
  case.json             {"name", "rtol", "norm_rtol", "sanitize"[, "unsanitized"],
                         "runs": [{"name", "args"[, "fails_with"]}]}

"sanitize" is false, true (compute-sanitizer's memcheck, racecheck and
initcheck on rank 0's first run) or the tools to run; "unsanitized" says
why a tool is left out: {tool: reason}.

A run with "fails_with" has bad data (an id out of range): the CPU program
failed on it, and the device program must fail with the same message.
"""
import json
import os
import re
import shutil
import tempfile

from device_check import run_program

# What a suite adds to its CPU program's `sbpc compile` flags for the device
# program: the CPU's cost model (a --target cuda plan is costed on H100s by
# default), so that both are the same plan.
DEVICE_FLAGS = ["--cluster", "cpu"]


def _plan(program):
    """A program's exec.mlir without the search's timings."""
    text = open(os.path.join(program, "exec.mlir")).read()
    return re.sub(r"(\w*seconds) = [-+.0-9eE]+(?: : f64)?", r"\1 = ?", text).splitlines()


def _localize(args, run, inputs_dir, copied):
    """The run's arguments with every file copied into inputs/ and named
    relative to the case directory; a file an earlier run of the case
    copied (`copied`: {source: relative path}) is shared."""
    out, i = [], 0
    while i < len(args):
        flag = args[i]
        if flag in ("--params", "--input") and i + 1 < len(args):
            value = args[i + 1]
            name, path = value.split("=", 1) if flag == "--input" else (None, value)
            rel = copied.get(os.path.abspath(path))
            if rel is None:
                local = f"{run}-{os.path.basename(path)}"
                shutil.copyfile(path, os.path.join(inputs_dir, local))
                rel = copied[os.path.abspath(path)] = os.path.join("inputs", local)
            out += [flag, f"{name}={rel}" if name else rel]
            i += 2
        else:
            out.append(flag)
            i += 1
    return out


# initcheck does not see what cuBLAS's bf16 GEMMs write on Hopper (on an
# H100 with CUDA 13.0 it reported a plain kernel's reads of a batched bf16
# GEMM's result as reads of memory never written; docs/cuda.md, "On a
# GPU"): a bf16 program whose kernels read GEMM results is not
# initchecked.
BF16_TOOLS = ["memcheck", "racecheck"]
BF16_UNSANITIZED = {"initcheck": "cuBLAS's bf16 GEMM results look unwritten to it (docs/cuda.md)"}


def export_case(bundle, name, cpu_program, device_program, runs, rtol, norm_rtol=None,
                bf16=False, sanitize=False, failing=(), unsanitized=None):
    """Writes bundle/name from a CPU-compiled and a device-compiled program
    of the same flags; `runs` is [(run name, launch arguments)] with paths
    as the caller has them; rtol and norm_rtol are the suite's tolerances
    against its reference (npy_tools.relative_errors). `failing` are more
    runs, on which the CPU program must fail: the device must fail alike.
    `sanitize` (True, or the tools) and `unsanitized` ({tool: why not})
    go into case.json as they are.

    The device is checked against the CPU's shards, not the reference. In
    f32 both are within rounding of the reference and the suite's tolerance
    holds between them. In bf16 each errs by up to the tolerance, in its own
    summation order: the case allows twice it (if both are within t of the
    reference, they are within 2t of each other)."""
    if bf16:
        rtol, norm_rtol = 2 * rtol, (2 * norm_rtol if norm_rtol is not None else None)
    cpu_plan, device_plan = _plan(cpu_program), _plan(device_program)
    if cpu_plan != device_plan:
        line = next((i for i, (a, b) in enumerate(zip(cpu_plan, device_plan)) if a != b),
                    min(len(cpu_plan), len(device_plan)))
        raise RuntimeError(f"case {name}: the device program is not the CPU program's plan "
                           f"(exec.mlir differs from line {line + 1}; compile both with the same "
                           "flags and cluster)")
    case = os.path.join(bundle, name)
    if os.path.exists(case):  # two suites' cases by one name: one would be lost
        raise RuntimeError(f"case {name} is already in {bundle}")
    os.makedirs(os.path.join(case, "inputs"))
    shutil.copytree(device_program, os.path.join(case, "prog"), symlinks=True)
    described, copied = [], {}
    for run, args in runs:
        local = _localize(args, run, os.path.join(case, "inputs"), copied)
        expected = os.path.join(case, "expected", run)
        with tempfile.TemporaryDirectory() as tmp:
            failure, _ = run_program([os.path.join(cpu_program, "launch.sh"), "--no-assemble",
                                      *local], case, tmp, 300)
            if failure:
                raise RuntimeError(f"{cpu_program}: launch.sh failed: {failure}")
            shutil.copytree(os.path.join(tmp, ".shards"), expected)
        described.append({"name": run, "args": local})
    for run, args in failing:
        local = _localize(args, run, os.path.join(case, "inputs"), copied)
        with tempfile.TemporaryDirectory() as tmp:
            failure, _ = run_program([os.path.join(cpu_program, "launch.sh"), "--no-assemble",
                                      *local], case, tmp, 300)
        message = failure.split(" failed in ", 1)[1] if failure and " failed in " in failure \
            else None
        if not message:
            raise RuntimeError(f"{cpu_program}: run {run} should fail naming its op, got: "
                               f"{failure or 'success'}")
        described.append({"name": run, "args": local, "fails_with": message})
    with open(os.path.join(case, "case.json"), "w") as f:
        json.dump({"name": name, "rtol": rtol, "norm_rtol": norm_rtol, "sanitize": sanitize,
                   **({"unsanitized": unsanitized} if unsanitized else {}),
                   "runs": described}, f, indent=1)
