"""Makes a GPU bundle: everything the GPU checks and the GPU benchmark need,
built on a machine that has sbpc, nvcc and MPI but perhaps no GPU, to run
on one that has a GPU but perhaps none of sbpc's build dependencies.

The bundle holds
  cases/      the equality cases of test/e2e/gpu-equal.test: MLP and GPT
              forward + every gradient on 1, 2 and 4 ranks, by strategy and
              at random layouts; training steps with ZeRO, micro-batches
              and recomputation; every op of check_ops.py in one program
              (f32 and bf16). Each is a device program with its inputs
              and the shards the CPU program of the same flags wrote
              (test/gpu/export.py); the suites check the CPU program
              against the reference while making it.
  bench/      GPT-2 small and medium, forward and training step, and their
              GEMM layers alone, in f32 and bf16, compiled (bench/gpu/run.py
              --prepare); parameters are drawn there.
  mpi/        with --carry-mpi: this machine's Open MPI (mpirun, orted,
              libraries, components, help texts), for a machine without one.
  run.sh      the one command to run there (device_check.py, then the
              benchmark), writing results.json files into its output folder.

usage: bundle.py --sbpc build/bin/sbpc --out DIR [--target cuda|cpu] [--quick]
                 [--carry-mpi] [--bench small,medium|none] [--tar FILE.tar.xz]

--target cpu makes the same bundle with CPU programs: the machinery checked
where there is no GPU (test/e2e/gpu-bundle.test).
"""
import argparse
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
E2E = os.path.join(ROOT, "test", "e2e")

# gpu-equal.test's cases: (suite, arguments).
FULL = [
    ("spmd_suite.py", ["--model", "mlp", "--autodiff", "--random", "2", "--random-meshes", "x=4",
                       "--cases", "dp@x=1", "dp@x=2", "tp@x=2", "dp-tp@dp=2,tp=2",
                       "auto@dp=2,tp=2"]),
    ("spmd_suite.py", ["--model", "gpt", "--autodiff", "--random", "2", "--random-meshes",
                       "dp=2,tp=2", "--cases", "dp@x=1", "dp@x=2", "tp@x=2", "dp-tp@dp=2,tp=2",
                       "auto@dp=2,tp=2"]),
    ("train_suite.py", ["--model", "mlp", "--cases", "dp@x=2:zero=1", "tp@x=2:micro-batches=4",
                        "auto@dp=2,tp=2:zero=3:recompute=full"]),
    ("train_suite.py", ["--model", "gpt", "--batch", "8", "--eps", "1e-5", "--cases", "dp@x=1",
                        "dp-tp@dp=2,tp=2:zero=2:micro-batches=4:recompute=selective"]),
    # Pipelines: a program per stage, messages between the stages' ranks.
    ("spmd_suite.py", ["--model", "gpt", "--autodiff", "--cases", "tp@pp=2,tp=2"]),
    ("train_suite.py", ["--model", "gpt", "--batch", "8", "--eps", "1e-5", "--cases",
                        "dp@pp=2,dp=2:zero=1:micro-batches=4",
                        "tp@pp=2,tp=2:micro-batches=4:pipeline-schedule=interleaved"]),
    # --precision bf16: the CPU's bf16 against the f32 reference to
    # bf16.test's tolerance, and the GPU's bf16 against the CPU's to twice
    # it (test/gpu/export.py): each rounds once per write but sums in its
    # own order.
    ("spmd_suite.py", ["--model", "gpt", "--autodiff", "--precision", "bf16", "--rtol", "0.125",
                       "--norm-rtol", "6.25e-2", "--cases", "dp@x=1", "dp-tp@dp=2,tp=2"]),
    ("train_suite.py", ["--model", "gpt", "--batch", "8", "--optimizer", "sgd", "--lr", "0.05",
                        "--momentum", "0.9", "--rtol", "0.125", "--norm-rtol", "6.25e-2", "--cases",
                        "dp@x=2:zero=1:micro-batches=4:precision=bf16",
                        "dp@x=1:recompute=selective:precision=bf16"]),
    # The forward alone in bf16: its attention one exec.attention (flash
    # attention on tensor cores), as a training step's forward is under
    # selective recomputation (above).
    ("spmd_suite.py", ["--model", "gpt", "--precision", "bf16", "--rtol", "0.125",
                       "--norm-rtol", "6.25e-2", "--cases", "dp@x=1", "tp@x=2"]),
    # Every op and fused chain alone, at the widths that choose between the
    # kernels' paths: one program of all of them, in f32 and in bf16 (a
    # single op rounds little: 8 roundings bound it).
    ("check_ops.py", ["--compiled"]),
    ("check_ops.py", ["--compiled", "--precision", "bf16", "--rtol", "3.125e-2"]),
]
QUICK = [
    ("check_ops.py", ["--compiled"]),
    ("spmd_suite.py", ["--model", "gpt", "--autodiff", "--cases", "dp@x=1", "dp-tp@dp=2,tp=2"]),
    ("train_suite.py", ["--model", "mlp", "--cases", "tp@x=2:zero=2:micro-batches=4"]),
]

# What the device tool (/work/.library/device) carries to a GPU machine.
CARRY_MIB = 64

# Open MPI as Debian installs it: where its pieces are, under prefix /usr.
LIBDIR = "/usr/lib/x86_64-linux-gnu"
MPI_COMPONENTS = LIBDIR + "/openmpi/lib/openmpi3"
PMIX_ROOT = LIBDIR + "/pmix2"
# What every Linux machine has; not carried.
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libpthread.so", "libdl.so",
               "librt.so", "libstdc++.so", "libgcc_s.so")
# Libraries the carried components may need beyond the core's: shared
# memory, PMIx. Components that need others (InfiniBand, UCX, libfabric,
# OpenSHMEM) are network transports one machine does not use.
MPI_EXTRA_LIBS = ("libmpi.so.40", "libpmix.so.2", "libmunge.so.2", "libmca_common_sm.so.40",
                  "libmca_common_monitoring.so.50", "libmca_common_ompio.so.41")


def log(message):
    print("bundle: " + message, flush=True)


def shared_libraries(path):
    """{soname: resolved path or None} of what `path` loads, per ldd."""
    found = {}
    listed = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        parts = line.split()
        if "=>" in parts:
            at = parts.index("=>")
            target = parts[at + 1] if at + 1 < len(parts) else "not"
            found[parts[0]] = None if target == "not" else target
    return found


def carry_mpi(out):
    """Copies Open MPI into out/mpi: programs and components where the
    prefix /usr puts them (run.sh points OPAL_PREFIX there), libraries
    flat in mpi/lib."""
    orterun = os.path.realpath(shutil.which("mpirun") or "/usr/bin/mpirun")
    if not os.path.basename(orterun).startswith("orterun"):
        sys.exit(f"bundle: --carry-mpi knows Debian's Open MPI 4; mpirun here is {orterun}")
    mpi = os.path.join(out, "mpi")
    usr = os.path.join(mpi, "usr")
    os.makedirs(os.path.join(usr, "bin"))
    os.makedirs(os.path.join(mpi, "lib"))
    for program in (orterun, "/usr/bin/orted"):
        shutil.copy2(program, os.path.join(usr, "bin"))
    os.symlink("orterun", os.path.join(usr, "bin", "mpirun"))
    core = {}
    for path in (orterun, "/usr/bin/orted", LIBDIR + "/libmpi.so.40"):
        core.update(shared_libraries(path))
    core["libmpi.so.40"] = LIBDIR + "/libmpi.so.40"
    allowed = set(core) | set(MPI_EXTRA_LIBS)
    libraries = {name: path for name, path in core.items() if not name.startswith(SYSTEM_LIBS)}
    skipped = []
    for source in (MPI_COMPONENTS, PMIX_ROOT + "/lib/pmix"):
        dest = usr + source[len("/usr"):]
        os.makedirs(dest)
        for component in sorted(glob.glob(source + "/*.so")):
            needs = {n: p for n, p in shared_libraries(component).items()
                     if not n.startswith(SYSTEM_LIBS)}
            if set(needs) - allowed or None in needs.values():
                skipped.append(os.path.basename(component))
                continue
            shutil.copy2(component, dest)
            libraries.update(needs)
    for name, path in sorted(libraries.items()):
        if path is None:
            sys.exit(f"bundle: Open MPI needs {name}, which is not installed here")
        shutil.copyfile(path, os.path.join(mpi, "lib", name))
    for data in ("/usr/share/openmpi", PMIX_ROOT + "/share"):
        shutil.copytree(data, usr + data[len("/usr"):], symlinks=False)
    shutil.copytree("/etc/openmpi", os.path.join(mpi, "etc", "openmpi"))
    log(f"carried Open MPI: {len(libraries)} libraries, components but {len(skipped)} "
        "network transports")


def make_cases(args, out):
    cases = os.path.join(out, "cases")
    os.makedirs(cases)
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(args.sbpc)) + os.pathsep +
               os.environ.get("PATH", ""))
    for i, (suite, suite_args) in enumerate(QUICK if args.quick else FULL):
        command = [sys.executable, os.path.join(E2E, suite), "--workdir",
                   os.path.join(args.workdir, f"suite{i}"), "--bundle", cases, "--bundle-target",
                   args.target, *suite_args]
        if suite in ("spmd_suite.py", "check_ops.py"):
            command += ["--sbpc", "sbpc"]
        if suite == "spmd_suite.py" and "--rtol" not in suite_args:
            command += ["--rtol", "1e-4"]
        log("making cases: " + " ".join(command[1:]))
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        with open(os.path.join(out, "make.log"), "a") as f:
            f.write("$ " + " ".join(command) + "\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            sys.exit(f"bundle: {suite} failed on the CPU, so no expected results "
                     f"(see {os.path.join(out, 'make.log')}):\n" + done.stdout[-2000:] +
                     done.stderr[-2000:])
    return sorted(os.listdir(cases))


def drop_runtime_sources(out):
    """Removes the runtime's sources that every compiled program's folder
    carries for its build.sh (runtime/, include/): the programs here are
    built already, and the copies would fill the device tool's carry.
    Returns how many folders held them."""
    folders = [os.path.dirname(path) for pattern in ("cases/*/prog/build.sh", "bench/*/build.sh")
               for path in glob.glob(os.path.join(out, pattern))]
    for folder in folders:
        for name in ("runtime", "include"):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    return len(folders)


def strip_programs(out):
    """Strips the symbol tables of the cases' and the benchmark's rank
    programs (about a tenth of each; their kernels and messages stay): the
    device tool carries at most CARRY_MIB. Returns how many."""
    strip = shutil.which("strip")
    if not strip:
        return 0
    programs = [path for pattern in ("cases/*/prog/bin/*", "bench/*/bin/*")
                for path in glob.glob(os.path.join(out, pattern))
                if os.path.isfile(path) and not os.path.islink(path)]
    for path in programs:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        if subprocess.run([strip, path], capture_output=True).returncode != 0:
            sys.exit(f"bundle: strip {path} failed")
    return len(programs)


def cuda_version():
    """The CUDA toolkit's release ("13.0") that nvcc reports, or None."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:
        listed = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    found = [w.rstrip(",") for line in listed.splitlines() if "release" in line
             for w in line.split() if w[:1].isdigit()]
    return found[0] if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sbpc", required=True)
    ap.add_argument("--out", required=True, help="the bundle directory (replaced)")
    ap.add_argument("--target", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--quick", action="store_true", help="four cases, not gpu-equal.test's all")
    ap.add_argument("--carry-mpi", action="store_true",
                    help="carry this machine's Open MPI, for a machine that has none")
    ap.add_argument("--bench", default="small,medium", help="models to compile, or 'none'")
    ap.add_argument("--bench-args", default="", help="more bench/gpu/run.py --prepare options")
    ap.add_argument("--tar", help="also write the bundle as this .tar.xz (or .tar.gz)")
    ap.add_argument("--workdir", help="default: OUT.work (removed at the end)")
    args = ap.parse_args()
    if args.tar and not args.tar.endswith((".tar.xz", ".tar.gz")):
        ap.error(f"--tar: {args.tar} should end in .tar.xz or .tar.gz")
    out = os.path.abspath(args.out)
    args.workdir = os.path.abspath(args.workdir or out + ".work")
    for path in (out, args.workdir):
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(out)
    for source in (os.path.join(HERE, "run.sh"), os.path.join(HERE, "device_check.py"),
                   os.path.join(E2E, "npy_tools.py"), os.path.join(ROOT, "bench", "gpu", "run.py")):
        shutil.copy2(source, out)
    cases = make_cases(args, out)
    log(f"{len(cases)} cases")
    models = [] if args.bench == "none" else args.bench.split(",")
    if models:
        command = [sys.executable, os.path.join(ROOT, "bench", "gpu", "run.py"), "--sbpc",
                   os.path.abspath(args.sbpc), "--prepare", os.path.join(out, "bench"),
                   "--models", args.bench, "--target", args.target, "--cuda-arch", args.cuda_arch,
                   *args.bench_args.split()]
        log("compiling the benchmark: " + " ".join(command[2:]))
        if subprocess.run(command).returncode != 0:
            sys.exit("bundle: the benchmark's programs did not compile")
    log(f"stripped {strip_programs(out)} programs, "
        f"dropped the runtime's sources from {drop_runtime_sources(out)} folders")
    if args.carry_mpi:
        carry_mpi(out)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(out, "bundle.json"), "w") as f:
        json.dump({"made": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "commit": commit or None, "target": args.target, "cuda_arch": args.cuda_arch,
                   "cuda_version": cuda_version() if args.target == "cuda" else None,
                   "cases": cases, "bench_models": models, "carries_mpi": args.carry_mpi},
                  f, indent=1)
    shutil.rmtree(args.workdir, ignore_errors=True)
    if args.tar:
        # xz: its window spans programs, whose CUDA runtime code is the same
        # in each (the whole bundle: 16 MiB, where gzip's is 65).
        with tarfile.open(args.tar, "w:xz" if args.tar.endswith(".xz") else "w:gz") as tar:
            tar.add(out, arcname=os.path.basename(out))
        mib = os.path.getsize(args.tar) / 2**20
        log(f"wrote {args.tar} ({mib:.1f} MiB)")
        if mib > CARRY_MIB:
            log(f"warning: over the {CARRY_MIB} MiB the device tool carries to a GPU machine; "
                "--bench small makes it smaller")
    log(f"wrote {out}: run {os.path.join(out, 'run.sh')} [--no-bench] [OUTPUT_DIR] on the GPU "
        "machine")


if __name__ == "__main__":
    main()
