// Model signatures and argument loading.
#include "compiler/Model/ModelSignature.h"

#include "dialects/Graph/IR/GraphOps.h"
#include "runtime/io/Npy.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace sbpc;
using sbpc::graph::formatShape;
using sbpc::graph::GraphDialect;

std::optional<sbprt::DType> sbpc::toDType(Type elementType) {
  if (elementType.isF32())
    return sbprt::DType::F32;
  if (elementType.isF64())
    return sbprt::DType::F64;
  if (elementType.isInteger(32))
    return sbprt::DType::I32;
  if (elementType.isInteger(64))
    return sbprt::DType::I64;
  return std::nullopt;
}

FailureOr<ModelSignature> sbpc::getModelSignature(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  func::FuncOp fn;
  if (funcs.size() == 1)
    fn = funcs.front();
  else
    fn = module.lookupSymbol<func::FuncOp>("main");
  if (!fn)
    return (funcs.size() > 1 ? funcs[1].getOperation() : module.getOperation())->emitError()
           << "expected one model function (or one named @main), found "
                              << funcs.size() << " functions";
  if (fn.isExternal())
    return fn.emitError() << "model function @" << fn.getSymName() << " has no body";

  ModelSignature signature{fn, {}, {}};
  llvm::StringSet<> paramNames, inputNames, outputNames;
  for (BlockArgument arg : fn.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto param = fn.getArgAttrOfType<StringAttr>(i, GraphDialect::kParamAttr);
    auto input = fn.getArgAttrOfType<StringAttr>(i, GraphDialect::kInputAttr);
    if (!param == !input)
      return mlir::emitError(arg.getLoc())
             << "argument #" << i << " of @" << fn.getSymName()
             << " must be marked with exactly one of graph.param or graph.input";
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !graph::isValidShape(type) ||
        !(type.getElementType().isF32() || type.getElementType().isInteger(64)))
      return mlir::emitError(arg.getLoc())
             << "argument #" << i << " has type " << arg.getType()
             << "; expected a statically shaped tensor of f32 or i64 with positive sizes";
    ModelArgument model{param ? ModelArgument::Kind::Param : ModelArgument::Kind::Input,
                        (param ? param : input).str(), arg, llvm::to_vector(type.getShape())};
    if (auto stored = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, GraphDialect::kParamShapeAttr))
      model.storedShape = llvm::to_vector(stored.asArrayRef());
    if (!(param ? paramNames : inputNames).insert(model.name).second)
      return mlir::emitError(arg.getLoc())
             << (param ? "parameter" : "input") << " '" << model.name << "' is declared twice";
    signature.arguments.push_back(std::move(model));
  }
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, GraphDialect::kOutputAttr);
    std::string output = name ? name.str() : "result" + std::to_string(i);
    if (!outputNames.insert(output).second)
      return fn.emitError() << "output '" << output << "' is declared twice";
    signature.outputs.push_back(output);
  }
  return signature;
}

/// Checks a loaded tensor against the argument's dtype and (stored) shape.
static LogicalResult checkLoaded(const ModelArgument &arg, const sbprt::Tensor &tensor,
                                 StringRef source) {
  const char *what = arg.kind == ModelArgument::Kind::Param ? "parameter" : "input";
  sbprt::DType expected = *toDType(arg.type().getElementType());
  if (tensor.dtype() != expected)
    return mlir::emitError(arg.value.getLoc())
           << what << " '" << arg.name << "' in " << source << " has dtype "
           << sbprt::dtypeName(tensor.dtype()) << ", expected " << sbprt::dtypeName(expected);
  if (ArrayRef<int64_t>(tensor.shape()) != ArrayRef<int64_t>(arg.storedShape))
    return mlir::emitError(arg.value.getLoc())
           << what << " '" << arg.name << "' in " << source << " has shape "
           << formatShape(tensor.shape()) << ", expected " << formatShape(arg.storedShape);
  return success();
}

/// The tensor reinterpreted with the argument's (graph) shape: a row-major view.
static sbprt::Tensor withGraphShape(const ModelArgument &arg, sbprt::Tensor tensor) {
  ArrayRef<int64_t> shape = arg.type().getShape();
  if (ArrayRef<int64_t>(tensor.shape()) == shape)
    return tensor;
  sbprt::Tensor viewed(tensor.dtype(), {shape.begin(), shape.end()});
  std::memcpy(viewed.data(), tensor.data(), tensor.numBytes());
  return viewed;
}

FailureOr<std::vector<sbprt::Tensor>>
sbpc::loadArguments(const ModelSignature &signature, const sbprt::io::SafetensorsFile *params,
                    const std::map<std::string, std::string> &inputFiles) {
  for (const auto &[name, path] : inputFiles)
    if (llvm::none_of(signature.arguments, [&, &name = name](const ModelArgument &a) {
          return a.kind == ModelArgument::Kind::Input && a.name == name;
        })) {
      std::string known;
      for (const ModelArgument &a : signature.arguments)
        if (a.kind == ModelArgument::Kind::Input)
          known += (known.empty() ? "" : ", ") + a.name;
      return func::FuncOp(signature.func).emitError()
             << "the model has no input named '" << name << "' (its inputs: " << known << ")";
    }

  std::vector<sbprt::Tensor> values;
  for (const ModelArgument &arg : signature.arguments) {
    sbprt::Tensor tensor;
    std::string error, source;
    if (arg.kind == ModelArgument::Kind::Input) {
      auto it = inputFiles.find(arg.name);
      if (it == inputFiles.end())
        return mlir::emitError(arg.value.getLoc())
               << "input '" << arg.name << "' was not given (--input " << arg.name
               << "=FILE.npy)";
      source = it->second;
      if (!sbprt::io::readNpy(source, tensor, error))
        return mlir::emitError(arg.value.getLoc()) << "input '" << arg.name << "': " << error;
    } else {
      if (!params)
        return mlir::emitError(arg.value.getLoc())
               << "parameter '" << arg.name
               << "' needs a parameter file (--params FILE.safetensors)";
      source = params->path();
      const sbprt::io::SafetensorsEntry *entry = params->find(arg.name);
      if (!entry)
        return mlir::emitError(arg.value.getLoc())
               << "parameter '" << arg.name << "' is not in " << source;
      if (!params->read(*entry, tensor, error))
        return mlir::emitError(arg.value.getLoc()) << "parameter '" << arg.name << "': " << error;
    }
    if (failed(checkLoaded(arg, tensor, source)))
      return failure();
    values.push_back(withGraphShape(arg, std::move(tensor)));
  }
  return values;
}
