//===- Passes.td - exec passes -----------------------------*- tablegen -*-===//

#ifndef SBPC_EXEC_PASSES
#define SBPC_EXEC_PASSES

include "mlir/Pass/PassBase.td"

def ExecPlanMemory : Pass<"exec-plan-memory", "mlir::ModuleOp"> {
  let summary = "assigns every local tensor a static place in one arena per rank";
  let description = [{
    Walks each exec program in order. A value lives from the op that makes
    it to its last use; the scratch memory a collective needs lives during
    that op only. Each is placed first-fit at the lowest offset (64-byte
    aligned) that overlaps nothing live at the same time; an op's results
    never share memory with its operands. Sets `exec.offsets` (one per
    result) and `exec.scratch_offset` on ops and `exec.arena_bytes` (the
    highest byte any of them reaches) on the program: the rank allocates
    exactly that, once.

    ```mlir
    %0 = exec.load "input" "x" global [8, 4] [S(0)] {exec.offsets = array<i64: 0>}
        : tensor<4x4xf32>
    ```
  }];
}

#endif // SBPC_EXEC_PASSES
