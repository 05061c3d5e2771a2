// Operations of the graph dialect.
#pragma once

#include "dialects/Common/Shapes.h"
#include "dialects/Graph/IR/GraphDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace sbpc::graph {
/// Whether a graph tensor may have this shape: static, every size positive,
/// and its size in bytes (8 per element at most) representable in int64.
bool isValidShape(mlir::ShapedType type);

/// Verifies an op by running its shape rule (inferReturnTypes) with the op's
/// location and comparing with the written result types, so that exactly one
/// precise diagnostic is reported (InferTypeOpInterface's own check would add
/// a generic second one).
template <typename ConcreteType>
class ShapeRuleFirst : public mlir::OpTrait::TraitBase<ConcreteType, ShapeRuleFirst> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    llvm::SmallVector<mlir::Type> types;
    if (mlir::failed(ConcreteType::inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(), op->getRawDictionaryAttrs(),
            op->getPropertiesStorage(), op->getRegions(), types)))
      return mlir::failure();
    if (mlir::TypeRange(types) != op->getResultTypes())
      return op->emitOpError() << "result type " << op->getResultTypes()
                               << " does not match the inferred " << mlir::TypeRange(types);
    return mlir::success();
  }
};
} // namespace sbpc::graph

#include "dialects/Graph/IR/GraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Graph/IR/GraphOps.h.inc"

namespace sbpc::graph {

/// The NumPy broadcast of two shapes, or std::nullopt when they do not broadcast.
std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                                          llvm::ArrayRef<int64_t> rhs);

using sbpc::formatShape;

/// What is wrong with `value` for the optimizer hyperparameter `name` of
/// graph.sgd_update and graph.adamw_update (lr, momentum, beta1, beta2,
/// eps, weight_decay), as "must be non-negative, got -1"; "" when nothing.
/// Every one must be finite.
std::string hyperparameterProblem(llvm::StringRef name, double value);

} // namespace sbpc::graph
