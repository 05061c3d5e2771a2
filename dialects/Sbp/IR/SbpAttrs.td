//===- SbpAttrs.td - SBP layout attributes ----------------*- tablegen -*-===//

#ifndef SBPC_SBP_ATTRS
#define SBPC_SBP_ATTRS

include "dialects/Sbp/IR/SbpDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Sbp_Broadcast : I32EnumAttrCase<"Broadcast", 0, "B">;
def Sbp_Split : I32EnumAttrCase<"Split", 1, "S">;
def Sbp_Partial : I32EnumAttrCase<"Partial", 2, "P">;
def Sbp_SbpKind : I32EnumAttr<"SbpKind", "how a tensor is laid out on one mesh axis",
                              [Sbp_Broadcast, Sbp_Split, Sbp_Partial]> {
  let cppNamespace = "::sbpc::sbp";
  let genSpecializedAttr = 0;
}

def Sbp_ReduceSum : I32EnumAttrCase<"Sum", 0, "sum">;
def Sbp_ReduceMax : I32EnumAttrCase<"Max", 1, "max">;
def Sbp_ReduceKind : I32EnumAttr<"ReduceKind", "how partial values combine",
                                 [Sbp_ReduceSum, Sbp_ReduceMax]> {
  let cppNamespace = "::sbpc::sbp";
  let genSpecializedAttr = 0;
}

def Sbp_SbpAttr : AttrDef<Sbp_Dialect, "Sbp"> {
  let mnemonic = "sbp";
  let summary = "a 1-D SBP: B, S(d), P(sum) or P(max)";
  let description = [{
    The layout of a tensor on one mesh axis.

    ```mlir
    #sbp.sbp<B>        // every device holds the whole tensor
    #sbp.sbp<S(1)>     // split along tensor dimension 1
    #sbp.sbp<P(sum)>   // the tensor is the sum of the devices' tensors
    ```

    `dim` is meaningful for `S` only, `reduce` for `P` only.
  }];
  let parameters = (ins "SbpKind":$kind, DefaultValuedParameter<"int64_t", "0">:$dim,
                        DefaultValuedParameter<"ReduceKind", "ReduceKind::Sum">:$reduce);
  let builders = [
    AttrBuilder<(ins "SbpKind":$kind, CArg<"int64_t", "0">:$dim,
                     CArg<"ReduceKind", "ReduceKind::Sum">:$reduce), [{
      // Canonical form: unused fields are zero so that equal layouts are equal attributes.
      return $_get($_ctxt, kind, kind == SbpKind::Split ? dim : 0,
                   kind == SbpKind::Partial ? reduce : ReduceKind::Sum);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static SbpAttr broadcast(::mlir::MLIRContext *ctx) { return get(ctx, SbpKind::Broadcast); }
    static SbpAttr split(::mlir::MLIRContext *ctx, int64_t dim) { return get(ctx, SbpKind::Split, dim); }
    static SbpAttr partial(::mlir::MLIRContext *ctx, ReduceKind reduce = ReduceKind::Sum) {
      return get(ctx, SbpKind::Partial, 0, reduce);
    }
    bool isBroadcast() const { return getKind() == SbpKind::Broadcast; }
    bool isSplit() const { return getKind() == SbpKind::Split; }
    bool isPartial() const { return getKind() == SbpKind::Partial; }
    /// Parses and prints the bare form `S(0)` used inside op syntax.
    static SbpAttr parseBare(::mlir::AsmParser &parser);
    void printBare(::llvm::raw_ostream &os) const;
    /// The runtime's plain form (which also prints it).
    ::sbprt::Sbp toSbp() const;
  }];
}

def Sbp_NdSbpAttr : AttrDef<Sbp_Dialect, "NdSbp"> {
  let mnemonic = "nd";
  let summary = "an nd-SBP: one 1-D SBP per mesh axis";
  let description = [{
    ```mlir
    #sbp.nd<[S(0), B]>        // on (dp, tp): batch split over dp, replicated over tp
    #sbp.nd<[P(sum), S(1)]>
    ```
    Inside `sbp` ops it is written bare: `[S(0), B]`.
  }];
  let parameters = (ins ArrayRefParameter<"SbpAttr">:$axes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    size_t size() const { return getAxes().size(); }
    SbpAttr operator[](size_t i) const { return getAxes()[i]; }
    static NdSbpAttr parseBare(::mlir::AsmParser &parser);
    void printBare(::llvm::raw_ostream &os) const;
    ::sbprt::NdSbp toLayout() const;
    static NdSbpAttr get(::mlir::MLIRContext *ctx, const ::sbprt::NdSbp &layout);
  }];
}

#endif // SBPC_SBP_ATTRS
