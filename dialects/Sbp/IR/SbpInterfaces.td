//===- SbpInterfaces.td - how ops take part in SBP ---------*- tablegen -*-===//

#ifndef SBPC_SBP_INTERFACES
#define SBPC_SBP_INTERFACES

include "mlir/IR/OpBase.td"

def Sbp_SbpOpInterface : OpInterface<"SbpOpInterface"> {
  let cppNamespace = "::sbpc::sbp";
  let description = [{
    How an op can run when its operands and results are laid out on one
    mesh axis of `parts` devices. A signature gives one 1-D SBP per operand
    and per result, such that running this same op on every device's local
    operands gives that device's local results: `matmul` has
    `(S(0), B) -> S(0)`, `(B, S(1)) -> S(1)` and `(S(1), S(0)) -> P(sum)`;
    `relu` has no signature with a `P(sum)` operand, because the relu of a
    partial sum is not the partial sum of relus.

    Shapes are the local shapes seen on this axis (after the outer mesh
    axes took their parts): nd signatures are formed axis by axis from
    these rules (see compiler/Sbp/Signatures.h).
  }];
  let methods = [
    InterfaceMethod<[{
        Appends the candidate 1-D signatures for operands and results of the
        given local shapes. Splits need not divide: callers drop those that
        do not divide by `parts`.
      }], "void", "getSbpSignatures",
      (ins "::sbpc::sbp::ShapeList":$operandShapes, "::sbpc::sbp::ShapeList":$resultShapes,
           "::llvm::SmallVectorImpl<::sbpc::sbp::Signature> &":$signatures)>,
    InterfaceMethod<[{
        Floating-point operations of the op for these (local) shapes.
      }], "double", "getFlops",
      (ins "::sbpc::sbp::ShapeList":$operandShapes, "::sbpc::sbp::ShapeList":$resultShapes)>,
  ];
}

#endif // SBPC_SBP_INTERFACES
