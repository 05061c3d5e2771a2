//===- SbpDialect.td - the sbp dialect --------------------*- tablegen -*-===//
//
// Layouts of tensors on a device mesh (OneFlow's SBP) and the ops that pin
// or change them.
//
//===----------------------------------------------------------------------===//

#ifndef SBPC_SBP_DIALECT
#define SBPC_SBP_DIALECT

include "mlir/IR/OpBase.td"

def Sbp_Dialect : Dialect {
  let name = "sbp";
  let cppNamespace = "::sbpc::sbp";
  let summary = "SBP layouts (split, broadcast, partial) on N-D device meshes";
  let description = [{
    A tensor of the `graph` dialect is global; the `sbp` dialect says how it
    is laid out across a mesh of devices. On one mesh axis a tensor is:

    - `B`: broadcast, every device holds all of it;
    - `S(d)`: split evenly along tensor dimension `d`;
    - `P(sum)` / `P(max)`: partial, every device holds a tensor of the full
      shape and the value is the sum (maximum) over the devices of the axis.

    An nd-SBP has one of these per mesh axis: `[S(0), S(1)]` on a
    `(dp, tp)` mesh splits dimension 0 over `dp` and dimension 1 over `tp`.

    The passes write, and the dialect verifies, these attributes: on an
    op, `sbp.operand_layouts` and `sbp.result_layouts` (one nd-SBP per
    operand and per result) and `sbp.stage` (its pipeline stage, from 0);
    on a function, `sbp.mesh` (the mesh its layouts are on: a symbol
    naming an `sbp.mesh`), `sbp.stages` (how many, at least 1; every op's
    `sbp.stage` below it) and `sbp.layout` on an argument (an nd-SBP).
  }];
  let useDefaultAttributePrinterParser = 1;
  // sbp.layout on an argument must be an nd-SBP: a seed of another kind
  // was silently ignored.
  let hasRegionArgAttrVerify = 1;
  // So are the layouts, stages and stage an op or function carries: passes
  // read them as such.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

#endif // SBPC_SBP_DIALECT
