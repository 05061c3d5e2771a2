//===- SbpOps.td - sbp dialect operations -----------------*- tablegen -*-===//

#ifndef SBPC_SBP_OPS
#define SBPC_SBP_OPS

include "dialects/Sbp/IR/SbpAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Sbp_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sbp_Dialect, mnemonic, traits>;

def Sbp_MeshOp : Sbp_Op<"mesh", [Symbol]> {
  let summary = "an N-D device mesh with named axes";
  let description = [{
    ```mlir
    sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
    ```
    Declares 8 devices arranged as 2 × 4; axis names are unique, every
    size is at least 1, and there are at most 4 axes (each multiplies the
    layouts a search enumerates). Device `r` has coordinates in row-major
    order.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` $axes `shape` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getRank() { return getShape().size(); }
    /// The mesh as the runtime and the cost model see it.
    ::sbprt::Mesh toMesh();
  }];
}

class Sbp_LayoutOp<string mnemonic, list<Trait> traits = []>
    : Sbp_Op<mnemonic, !listconcat(traits, [Pure, AllTypesMatch<["input", "result"]>,
                                            DeclareOpInterfaceMethods<SymbolUserOpInterface>])>;

def Sbp_ConstraintOp : Sbp_LayoutOp<"constraint"> {
  let summary = "pins the layout of a value (a seed for propagation)";
  let description = [{
    The result is `input` with the given layout; propagation treats it as
    fixed.

    ```mlir
    %x1 = sbp.constraint %x mesh @m [S(0), B] : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32, I64]>:$input,
                       FlatSymbolRefAttr:$mesh, Sbp_NdSbpAttr:$layout);
  let results = (outs StaticShapeTensorOf<[F32, I64]>:$result);
  let assemblyFormat = [{
    $input `mesh` $mesh custom<NdSbp>($layout) attr-dict `:` type($input)
  }];
}

def Sbp_BoxingOp : Sbp_LayoutOp<"boxing"> {
  let summary = "an explicit change of layout";
  let description = [{
    Redistributes `input` from one layout to another. Passes that insert it
    record the collective they chose, the bytes each rank moves, and the
    reason: the consumer and location that required the new layout.

    ```mlir
    %y = sbp.boxing %x mesh @m from [P(sum), B] to [B, B] {
        collective = "all-reduce", bytes_per_rank = 24576 : i64,
        reason = "consumer 'graph.gelu' at gpt.mlir:41 needs [B, B] for operand 0"}
        : tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32, I64]>:$input,
                       FlatSymbolRefAttr:$mesh, Sbp_NdSbpAttr:$from, Sbp_NdSbpAttr:$to,
                       OptionalAttr<StrAttr>:$collective,
                       OptionalAttr<StrArrayAttr>:$mesh_axes,
                       OptionalAttr<I64Attr>:$bytes_per_rank,
                       OptionalAttr<StrAttr>:$reason);
  let results = (outs StaticShapeTensorOf<[F32, I64]>:$result);
  let assemblyFormat = [{
    $input `mesh` $mesh `from` custom<NdSbp>($from) `to` custom<NdSbp>($to)
    attr-dict `:` type($input)
  }];
}

#endif // SBPC_SBP_OPS
