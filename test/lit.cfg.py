# lit configuration for sbpc's IR, tool and end-to-end tests.
import os

import lit.formats

config.name = "sbpc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sbpc_obj_root, "test")
config.excludes = ["unit", "CMakeLists.txt", "lit.cfg.py", "Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.sbpc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["FILECHECK_OPTS"] = "--enable-var-scope --dump-input=fail"
# One thread per BLAS call: tests run in parallel on small machines.
config.environment["OPENBLAS_NUM_THREADS"] = "1"
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%e2e", os.path.join(config.sbpc_src_root, "test", "e2e")))
config.substitutions.append(("%srcroot", config.sbpc_src_root))
config.substitutions.append(("%objroot", config.sbpc_obj_root))
