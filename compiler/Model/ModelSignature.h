// What a model function takes and returns, and loading its arguments from
// .safetensors / .npy files with checks against the declared types.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/Tensor.h"
#include "runtime/io/Safetensors.h"

#include <map>
#include <string>
#include <vector>

namespace sbpc {

struct ModelArgument {
  enum class Kind { Param, Input };
  Kind kind;
  std::string name;
  mlir::BlockArgument value;
  /// The shape in the file: the type's shape unless `graph.param_shape` says otherwise.
  llvm::SmallVector<int64_t> storedShape;

  mlir::RankedTensorType type() const {
    return mlir::cast<mlir::RankedTensorType>(value.getType());
  }
};

struct ModelSignature {
  mlir::func::FuncOp func;
  std::vector<ModelArgument> arguments;
  /// One name per function result (`graph.output`, else `result<i>`).
  std::vector<std::string> outputs;
};

/// Finds the model function (the only function of the module, or `@main`)
/// and reads its argument and result markings; diagnoses unmarked arguments
/// and duplicate names.
mlir::FailureOr<ModelSignature> getModelSignature(mlir::ModuleOp module);

/// The runtime element type for a tensor type, if the runtime has one.
std::optional<sbprt::DType> toDType(mlir::Type elementType);

/// Loads every argument in order: parameters from `params` (may be null when
/// the model has none) and inputs from `inputFiles` (input name -> .npy path).
/// Diagnostics point at the argument and name the file and the numbers.
mlir::FailureOr<std::vector<sbprt::Tensor>>
loadArguments(const ModelSignature &signature, const sbprt::io::SafetensorsFile *params,
              const std::map<std::string, std::string> &inputFiles);

} // namespace sbpc
