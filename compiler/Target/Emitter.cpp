// The emitters: an exec program (memory planned) as one C++ (CPU) or CUDA
// C++ translation unit. Every value is a typed pointer into the rank's arena
// at the offset the plan gave it; every op is one call into the runtime
// (`kernels::` is runtime/cpu/Ops.h + Kernels.h, or runtime/cuda/Ops.h,
// whose functions take the same arguments; the communicator; the rank
// driver) with its shapes spelled as constants, preceded by r.op("...") so
// a failure names the op and where it came from.
#include "compiler/Target/Emitter.h"

#include "compiler/Sbp/IndexPlaces.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/ProgramInfo.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <sstream>
#include <vector>

using namespace mlir;
using namespace sbpc::graph;
namespace ex = sbpc::exec;

namespace {

std::string quoted(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

template <typename Range> std::string list(const Range &values) {
  std::string out = "{";
  bool first = true;
  for (auto v : values) {
    out += (first ? "" : ", ") + std::to_string(v);
    first = false;
  }
  return out + "}";
}

std::string floatLiteral(double value) {
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<float>::infinity()"
                     : "-std::numeric_limits<float>::infinity()";
  if (std::isnan(value))
    return "std::numeric_limits<float>::quiet_NaN()";
  return llvm::formatv("{0:e9}f", value).str();
}

/// A double exactly (formatv's default keeps two decimals).
std::string doubleLiteral(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string layoutLiteral(const sbprt::NdSbp &layout) {
  std::string out = "sbprt::NdSbp{";
  for (size_t i = 0; i < layout.size(); ++i) {
    const sbprt::Sbp &s = layout[i];
    out += i ? ", " : "";
    if (s.isBroadcast())
      out += "sbprt::Sbp::broadcast()";
    else if (s.isSplit())
      out += "sbprt::Sbp::split(" + std::to_string(s.dim) + ")";
    else
      out += std::string("sbprt::Sbp::partial(sbprt::Sbp::Reduce::") +
             (s.reduce == sbprt::Sbp::Reduce::Sum ? "Sum" : "Max") + ")";
  }
  return out + "}";
}

/// The C++ type of an element of `value` in a generated program.
std::string elementType(Value value) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  return element.isF32() ? "float" : element.isBF16() ? "sbprt::bf16" : "int64_t";
}

/// `op`'s operand and result types, compactly, and its flags
/// ("8x1024x768xbf16, 768x768xbf16 -> 8x1024x768xbf16 transpose_rhs"):
/// what tells apart, in a profile, the ops that share a
/// location (a forward op and its gradients).
std::string signature(Operation *op) {
  auto types = [](TypeRange range) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::interleave(
        range,
        [&](Type type) {
          if (auto tensor = dyn_cast<RankedTensorType>(type)) {
            for (int64_t d : tensor.getShape())
              os << d << "x";
            os << tensor.getElementType();
          } else {
            os << type;
          }
        },
        [&] { os << ", "; });
    return text;
  };
  std::string in = types(op->getOperandTypes()), out = types(op->getResultTypes());
  std::string text = out.empty() ? in : (in.empty() ? "" : in + " ") + "-> " + out;
  // Flags (transpose_lhs, transpose_rhs, gelu, causal ...), as a product
  // and its gradient can have the same types; not the passes' marks
  // (graph.selective ...).
  for (NamedAttribute attr : op->getAttrs())
    if (isa<UnitAttr>(attr.getValue()) && !attr.getName().strref().contains('.'))
      text += " " + attr.getName().str();
  return text;
}

bool isBf16(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType().isBF16();
}

using sbpc::sbp::elementBytes;

/// The verifiers allow "sum" and "max" only.
std::string reduceLiteral(StringRef reduce) {
  return reduce == "sum" ? "sbprt::comm::Reduce::Sum" : "sbprt::comm::Reduce::Max";
}

class Emitter {
public:
  Emitter(func::FuncOp program, const sbprt::Mesh &mesh, sbpc::TargetKind target)
      : program(program), mesh(mesh), target(target) {}

  LogicalResult emit(const std::string &name, std::ostream &out);

private:
  /// The pointer to `value` in the arena, typed by its element type.
  std::string ref(Value value) {
    return llvm::formatv("r.at<{0}>({1}, {2})", elementType(value), offsets.lookup(value),
                         sbpc::exec::valueBytes(value))
        .str();
  }
  std::string shape(Value value) {
    return "Shape" + list(cast<RankedTensorType>(value.getType()).getShape());
  }
  std::string local(Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    return "sbprt::comm::Local{" + list(type.getShape()) + ", " +
           std::to_string(type.getElementTypeBitWidth() / 8) + "}";
  }
  std::string scratch(Operation *op) {
    auto offset = op->getAttrOfType<IntegerAttr>(ex::kScratchOffset);
    std::optional<ex::CollectiveCall> call = ex::collectiveCall(op, mesh);
    if (!offset || !call)
      return "nullptr";
    return llvm::formatv("r.at<void>({0}, {1})", offset.getInt(),
                         sbprt::comm::scratchBytes(call->kind, call->input, call->groupSize,
                                                   call->dim))
        .str();
  }
  /// `value`'s pointer, or where there is none, a null pointer of `like`'s
  /// element type (the kernels are templates on it): an optional operand.
  std::string refOrNull(Value value, Value like) {
    return value ? ref(value) : "static_cast<const " + elementType(like) + " *>(nullptr)";
  }
  /// The same for an optional result: where the op need not write it.
  std::string resultOrNull(Value value, Value like) {
    return value ? ref(value) : "static_cast<" + elementType(like) + " *>(nullptr)";
  }
  std::string elements(Value value) {
    return std::to_string(cast<RankedTensorType>(value.getType()).getNumElements());
  }
  /// The sbprt::IndexPlace of `ids`, an operand of `op`: a static of the
  /// rank's block of them in what exec.index_place says, or without one
  /// (exec IR not from --sbp-spmdize) the block, said to be the rank's;
  /// failure when it is malformed.
  FailureOr<std::string> indexPlace(Operation *op, Value ids) {
    std::string name = "place" + std::to_string(places++);
    std::string block = list(cast<RankedTensorType>(ids.getType()).getShape());
    auto attr = op->getAttr(ex::kIndexPlace);
    if (!attr) {
      line("static const sbprt::IndexPlace " + name + "{" + block +
           ", {}, {}, {}, {}, \"this rank's block\"};");
      return name;
    }
    auto dict = dyn_cast<DictionaryAttr>(attr);
    auto parsed = dict ? ex::parseIndexPlace(dict) : std::nullopt;
    if (!parsed)
      return op->emitOpError() << "has a malformed " << ex::kIndexPlace;
    const auto &[place, layout] = *parsed;
    std::string slices = "std::vector<sbprt::IndexPlace::Slice>{";
    for (size_t i = 0; i < place.slices.size(); ++i)
      slices += (i ? ", " : "") + std::string("sbprt::IndexPlace::Slice{") +
                list(place.slices[i].result) + ", " + list(place.slices[i].source) + ", " +
                list(place.slices[i].starts) + "}";
    slices += "}";
    line(llvm::formatv("static const sbprt::IndexPlace {0} = r.placeOf(sbprt::IndexPlace{{{1}, "
                       "{{}, {2}, {3}, {4}, {5}}, {6});",
                       name, block, list(place.shape), slices, list(place.originShape),
                       quoted(place.origin), layoutLiteral(layout)));
    return name;
  }
  /// graph.matmul, or exec.causal_matmul with `causal` a sbprt::Causal.
  LogicalResult emitMatmul(Value lhs, Value rhs, Value result, bool transposeLhs,
                           bool transposeRhs, llvm::StringRef causal) {
    line(llvm::formatv("kernels::matmulOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}{8});", ref(lhs),
                       shape(lhs), ref(rhs), shape(rhs), ref(result), shape(result),
                       transposeLhs ? "true" : "false", transposeRhs ? "true" : "false",
                       causal.empty() ? std::string() : ", sbprt::Causal::" + causal.str()));
    return success();
  }
  LogicalResult emitOp(Operation *op);
  /// An exec.fused as a function (a loop, or a kernel and its launch) in
  /// `statics`, and its call.
  LogicalResult emitFused(ex::FusedOp op);
  LogicalResult emitGraphOp(Operation *op);
  LogicalResult emitExecOp(Operation *op);
  void line(const std::string &text) { body << "  " << text << "\n"; }

  func::FuncOp program;
  const sbprt::Mesh &mesh;
  sbpc::TargetKind target;
  llvm::DenseMap<Value, int64_t> offsets;
  std::ostringstream body; // the ops since the last part
  /// The program's ops, kOpsPerPart to a function: host compilers take
  /// minutes over one function of thousands of calls (GPT-2's training
  /// step: 5 minutes as one function, 26 s in parts).
  static constexpr int kOpsPerPart = 64;
  std::vector<std::string> parts;
  int constants = 0;
  int fusedCount = 0;
  int places = 0;
  std::ostringstream statics; // constant data
};

LogicalResult Emitter::emitExecOp(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ex::LoadOp o) {
        auto type = o.getType();
        std::vector<int64_t> stored;
        if (auto attr = o.getStoredShape())
          stored.assign(attr->begin(), attr->end());
        // A bf16 value is read from f32 in the file, rounded as it is loaded;
        // a resident one (ex::kResident) is where the step before left it.
        std::string flags;
        if (o->hasAttr(ex::kResident))
          flags = isBf16(o.getResult()) ? ", true, true" : ", false, true";
        else if (isBf16(o.getResult()))
          flags = ", true";
        line(llvm::formatv("r.load({0}, {1}, sbprt::DType::{2}, {3}, {4}, {5}, {6}{7});",
                           o.getKind() == "param" ? "true" : "false", quoted(o.getName()),
                           type.getElementType().isInteger(64) ? "I64" : "F32",
                           list(o.getGlobalShape()), list(stored),
                           layoutLiteral(o.getLayout().toLayout()), ref(o.getResult()), flags));
        return success();
      })
      .Case([&](ex::StoreOp o) {
        auto type = cast<RankedTensorType>(o.getValue().getType());
        // A piece of the shard (rows [i, n]) names its place.
        std::string piece;
        if (std::optional<ArrayRef<int64_t>> rows = o.getRows())
          piece = llvm::formatv(", {0}, {1}, {2}", isBf16(o.getValue()) ? "true" : "false",
                                (*rows)[0], (*rows)[1])
                      .str();
        else if (o->hasAttr(ex::kResident))
          piece = llvm::formatv(", {0}, 0, 1, true", isBf16(o.getValue()) ? "true" : "false").str();
        else if (isBf16(o.getValue()))
          piece = ", true";
        line(llvm::formatv("r.store({0}, sbprt::DType::{1}, {2}, {3}, {4}{5});",
                           quoted(o.getName()), type.getElementType().isInteger(64) ? "I64" : "F32",
                           list(o.getGlobalShape()), layoutLiteral(o.getLayout().toLayout()),
                           ref(o.getValue()), piece));
        return success();
      })
      .Case([&](ex::AllReduceOp o) {
        line(llvm::formatv("kernels::copy({0}, {1}, {2});", ref(o.getResult()), ref(o.getInput()),
                           ex::valueBytes(o.getInput())));
        line(llvm::formatv("r.comm().allReduce({0}, {1}, {2}, {3}, {4});", o.getAxis(),
                           ref(o.getResult()), local(o.getInput()), reduceLiteral(o.getReduce()),
                           scratch(o)));
        return success();
      })
      .Case([&](ex::AllGatherOp o) {
        line(llvm::formatv("r.comm().allGather({0}, {1}, {2}, {3}, {4}, {5});", o.getAxis(),
                           ref(o.getInput()), local(o.getInput()), o.getDim(), ref(o.getResult()),
                           scratch(o)));
        return success();
      })
      .Case([&](ex::ReduceScatterOp o) {
        line(llvm::formatv("r.comm().reduceScatter({0}, {1}, {2}, {3}, {4}, {5}, {6});",
                           o.getAxis(), ref(o.getInput()), local(o.getInput()), o.getDim(),
                           reduceLiteral(o.getReduce()), ref(o.getResult()), scratch(o)));
        return success();
      })
      .Case([&](ex::AllToAllOp o) {
        line(llvm::formatv("r.comm().allToAll({0}, {1}, {2}, {3}, {4}, {5}, {6});", o.getAxis(),
                           ref(o.getInput()), local(o.getInput()), o.getSplitDim(),
                           o.getConcatDim(), ref(o.getResult()), scratch(o)));
        return success();
      })
      .Case([&](ex::BroadcastOp o) {
        line(llvm::formatv("kernels::copy({0}, {1}, {2});", ref(o.getResult()), ref(o.getInput()),
                           ex::valueBytes(o.getInput())));
        line(llvm::formatv("r.comm().broadcast({0}, {1}, {2}, {3}, {4});", o.getAxis(),
                           ref(o.getResult()), local(o.getInput()), o.getRoot(), scratch(o)));
        return success();
      })
      .Case([&](ex::SendOp o) {
        line(llvm::formatv("r.comm().send(r.comm().rankAt({0}, {1}), {2}, {3}, {4});",
                           o.getAxis(), o.getPeer(), ref(o.getInput()),
                           ex::valueBytes(o.getInput()), o.getTag()));
        return success();
      })
      .Case([&](ex::RecvOp o) {
        line(llvm::formatv("r.comm().recv(r.comm().rankAt({0}, {1}), {2}, {3}, {4});",
                           o.getAxis(), o.getPeer(), ref(o.getResult()),
                           ex::valueBytes(o.getResult()), o.getTag()));
        return success();
      })
      .Case([&](ex::LocalSliceOp o) {
        auto type = cast<RankedTensorType>(o.getInput().getType());
        line(llvm::formatv("r.localSlice({0}, {1}, {2}, {3}, {4}, {5});", o.getAxis(), o.getDim(),
                           ref(o.getInput()), list(type.getShape()),
                           type.getElementTypeBitWidth() / 8, ref(o.getResult())));
        return success();
      })
      .Case([&](ex::ZeroPadOp o) {
        line(llvm::formatv("r.zeroPad({0}, {1}, sbprt::Sbp::Reduce::{2}, {3}, {4}, {5}, {6});",
                           o.getAxis(), o.getDim(), o.getReduce() == "sum" ? "Sum" : "Max",
                           ref(o.getInput()), list(o.getInput().getType().getShape()),
                           elementBytes(o.getInput()), ref(o.getResult())));
        return success();
      })
      .Case([&](ex::ConvertOp o) {
        line(llvm::formatv("kernels::convert({0}, {1}, {2});", ref(o.getInput()),
                           ref(o.getResult()), elements(o.getInput())));
        return success();
      })
      .Case([&](ex::FusedOp o) { return emitFused(o); })
      .Case([&](ex::LinearOp o) {
        line(llvm::formatv("kernels::linearOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});",
                           ref(o.getInput()), shape(o.getInput()), ref(o.getWeight()),
                           ref(o.getBias()), refOrNull(o.getResidual(), o.getInput()),
                           ref(o.getResult()), shape(o.getResult()),
                           o.getTransposeRhs() ? "true" : "false", o.getGelu() ? "true" : "false",
                           resultOrNull(o.getPreactivation(), o.getInput())));
        return success();
      })
      .Case([&](ex::MatmulGeluGradOp o) {
        line(llvm::formatv("kernels::matmulGeluGradOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7});",
                           ref(o.getGrad()), shape(o.getGrad()), ref(o.getWeight()),
                           ref(o.getPreactivation()), ref(o.getResult()), shape(o.getResult()),
                           o.getTransposeRhs() ? "true" : "false",
                           resultOrNull(o.getBiasGrad(), o.getGrad())));
        return success();
      })
      .Case([&](ex::MatmulBiasGradOp o) {
        line(llvm::formatv("kernels::matmulBiasGradOp({0}, {1}, {2}, {3}, {4}, {5});",
                           ref(o.getInput()), shape(o.getInput()), ref(o.getGrad()),
                           shape(o.getGrad()), ref(o.getResult()), ref(o.getBiasGrad())));
        return success();
      })
      .Case([&](ex::CausalMatmulOp o) {
        return emitMatmul(o.getLhs(), o.getRhs(), o.getResult(), o.getTransposeLhs(),
                          o.getTransposeRhs(), o.getLowerLhs() ? "LowerLhs" : "LowerResult");
      })
      .Case([&](ex::SoftmaxOp o) {
        line(llvm::formatv("kernels::scaledSoftmax({0}, {1}, {2}, {3}, {4});", ref(o.getInput()),
                           refOrNull(o.getScale(), o.getInput()),
                           o.getCausal() ? "true" : "false", ref(o.getResult()),
                           shape(o.getResult())));
        return success();
      })
      .Case([&](ex::AttentionOp o) {
        line(llvm::formatv(
            "kernels::attentionOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});",
            ref(o.getQuery()), shape(o.getQuery()), ref(o.getKey()), shape(o.getKey()),
            ref(o.getValue()), shape(o.getValue()), refOrNull(o.getScale(), o.getQuery()),
            o.getCausal() ? "true" : "false", ref(o.getResult()),
            o.getLse() ? ref(o.getLse()) : "static_cast<float *>(nullptr)"));
        return success();
      })
      .Case([&](ex::AttentionGradOp o) {
        line(llvm::formatv("kernels::attentionGradOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
                           "{9}, {10}, {11}, {12}, {13});",
                           ref(o.getQuery()), shape(o.getQuery()), ref(o.getKey()),
                           shape(o.getKey()), ref(o.getValue()), shape(o.getValue()),
                           ref(o.getOutput()), ref(o.getLse()), ref(o.getGrad()),
                           refOrNull(o.getScale(), o.getQuery()), o.getCausal() ? "true" : "false",
                           ref(o.getQueryGrad()), ref(o.getKeyGrad()), ref(o.getValueGrad())));
        return success();
      })
      .Case([&](ex::SoftmaxGradOp o) {
        line(llvm::formatv("kernels::scaledSoftmaxGrad({0}, {1}, {2}, {3}, {4}, {5});",
                           ref(o.getProbs()), ref(o.getGrad()),
                           refOrNull(o.getScale(), o.getProbs()),
                           o.getCausal() ? "true" : "false", ref(o.getResult()),
                           shape(o.getResult())));
        return success();
      })
      .Case([&](ex::KeepOneOp o) {
        line(llvm::formatv("r.keepOne({0}, {1}, {2}, {3}, {4});", o.getAxis(), ref(o.getInput()),
                           elements(o.getInput()), elementBytes(o.getInput()),
                           ref(o.getResult())));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError() << "has no code for the " << sbpc::targetName(target)
                                    << " target";
      });
}

LogicalResult Emitter::emitGraphOp(Operation *op) {
  auto unary = [&](const char *kind) {
    line(llvm::formatv("kernels::unary(kernels::UnaryKind::{0}, {1}, {2}, {3});", kind,
                       ref(op->getOperand(0)), ref(op->getResult(0)), elements(op->getOperand(0))));
    return success();
  };
  auto binary = [&](const char *kind) {
    Value l = op->getOperand(0), rhs = op->getOperand(1), y = op->getResult(0);
    line(llvm::formatv("kernels::binary(kernels::BinaryKind::{0}, {1}, {2}, {3}, {4}, {5}, {6});", kind,
                       ref(l), shape(l), ref(rhs), shape(rhs), ref(y), shape(y)));
    return success();
  };
  auto reduce = [&](const char *kind, ArrayRef<int64_t> dims) {
    line(llvm::formatv("kernels::reduce(kernels::ReduceKind::{0}, {1}, {2}, {3}, {4});", kind,
                       ref(op->getOperand(0)), shape(op->getOperand(0)), list(dims),
                       ref(op->getResult(0))));
    return success();
  };
  auto checked = [&](const std::string &call) {
    line("r.check(" + call + ", error);");
    return success();
  };
  // The ops whose ids are checked name a bad one by its place.
  std::string place;
  if (OpOperand *ids = sbpc::idsOperandOf(op)) {
    FailureOr<std::string> name = indexPlace(op, ids->get());
    if (failed(name))
      return failure();
    place = *name;
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp o) -> LogicalResult {
        auto dense = dyn_cast<DenseElementsAttr>(o.getValue());
        if (!dense)
          return o.emitOpError() << "the " << sbpc::targetName(target)
                                 << " target supports dense constants only";
        bool isFloat = dense.getElementType().isF32();
        // A splat (autodiff's zero gradients, say) is a fill: written out,
        // a 50257 x 768 one would be millions of literals for the compiler.
        if (dense.isSplat()) {
          std::string value = isFloat ? floatLiteral(dense.getSplatValue<float>())
                                      : std::to_string(dense.getSplatValue<int64_t>());
          line(llvm::formatv("kernels::fill<{0}>({1}, {2}, {3});", elementType(o.getResult()),
                             ref(o.getResult()), dense.getNumElements(), value));
          return success();
        }
        std::string name = "constant" + std::to_string(constants++);
        statics << "static const " << (isFloat ? "float " : "int64_t ") << name << "[] = {";
        int64_t n = 0;
        if (isFloat)
          for (float v : dense.getValues<float>())
            statics << (n++ % 8 ? ", " : "\n    ") << floatLiteral(v);
        else
          for (int64_t v : dense.getValues<int64_t>())
            statics << (n++ % 8 ? ", " : "\n    ") << v << "LL";
        statics << "};\n";
        line(llvm::formatv("kernels::upload({0}, {1}, sizeof {1});", ref(o.getResult()), name));
        return success();
      })
      .Case([&](NegOp) { return unary("Neg"); })
      .Case([&](ExpOp) { return unary("Exp"); })
      .Case([&](LogOp) { return unary("Log"); })
      .Case([&](TanhOp) { return unary("Tanh"); })
      .Case([&](SqrtOp) { return unary("Sqrt"); })
      .Case([&](RsqrtOp) { return unary("Rsqrt"); })
      .Case([&](ReluOp) { return unary("Relu"); })
      .Case([&](GeluOp) { return unary("Gelu"); })
      .Case([&](AddOp) { return binary("Add"); })
      .Case([&](SubOp) { return binary("Sub"); })
      .Case([&](MulOp) { return binary("Mul"); })
      .Case([&](DivOp) { return binary("Div"); })
      .Case([&](MatmulOp o) {
        return emitMatmul(o.getLhs(), o.getRhs(), o.getResult(), o.getTransposeLhs(),
                          o.getTransposeRhs(), "");
      })
      .Case([&](ReduceSumOp o) { return reduce("Sum", o.getDims()); })
      .Case([&](ReduceMeanOp o) { return reduce("Mean", o.getDims()); })
      .Case([&](ReduceMaxOp o) { return reduce("Max", o.getDims()); })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto o) {
        line(llvm::formatv("kernels::softmax({0}, {1}, {2}, {3}, {4});", ref(o.getInput()),
                           ref(o.getResult()), shape(o.getResult()), o.getAxis(),
                           isa<LogSoftmaxOp>(op) ? "true" : "false"));
        return success();
      })
      .Case([&](LayerNormOp o) {
        line(llvm::formatv("kernels::layerNormOp({0}, {1}, {2}, {3}, {4}, {5});", ref(o.getInput()),
                           ref(o.getScale()), ref(o.getBias()), ref(o.getResult()),
                           shape(o.getResult()), floatLiteral(o.getEps().convertToDouble())));
        return success();
      })
      .Case([&](TransposeOp o) {
        line(llvm::formatv("kernels::transpose({0}, {1}, {2}, {3});", ref(o.getInput()),
                           shape(o.getInput()), list(o.getPerm()), ref(o.getResult())));
        return success();
      })
      .Case([&](ReshapeOp o) {
        // --exec-plan-memory gives a reshape its input's place: nothing to do.
        if (offsets.lookup(o.getResult()) != offsets.lookup(o.getInput()))
          line(llvm::formatv("kernels::copy({0}, {1}, {2});", ref(o.getResult()),
                             ref(o.getInput()), ex::valueBytes(o.getInput())));
        return success();
      })
      .Case([&](SliceOp o) {
        line(llvm::formatv("kernels::slice({0}, sizeof(*{0}), {1}, {2}, {3}, {4});",
                           ref(o.getInput()), shape(o.getInput()), list(o.getStarts()),
                           list(o.getLimits()), ref(o.getResult())));
        return success();
      })
      .Case([&](ConcatOp o) {
        std::string inputs = "{", shapes = "{";
        for (auto [i, v] : llvm::enumerate(o.getInputs())) {
          inputs += (i ? ", " : "") + ref(v);
          shapes += (i ? ", " : "") + shape(v);
        }
        inputs += "}";
        shapes += "}";
        line(llvm::formatv("kernels::concat({0}, {1}, {2}, {3}, {4});", inputs,
                           elementBytes(o.getResult()), shapes, o.getAxis(), ref(o.getResult())));
        return success();
      })
      .Case([&](EmbeddingOp o) {
        return checked(llvm::formatv("kernels::embeddingOp({0}, {1}, {2}, {3}, {4}, {5}, error)",
                                     ref(o.getTable()), shape(o.getTable()), ref(o.getIndices()),
                                     elements(o.getIndices()), ref(o.getResult()), place));
      })
      .Case([&](CausalMaskOp o) {
        line(llvm::formatv("kernels::causalMaskOp({0}, {1}, {2}, {3});", ref(o.getInput()),
                           ref(o.getResult()), shape(o.getResult()),
                           floatLiteral(-std::numeric_limits<double>::infinity())));
        return success();
      })
      .Case([&](CausalMaskGradOp o) {
        line(llvm::formatv("kernels::causalMaskOp({0}, {1}, {2}, 0.0f);", ref(o.getGrad()),
                           ref(o.getResult()), shape(o.getResult())));
        return success();
      })
      .Case([&](CrossEntropyOp o) {
        return checked(llvm::formatv("kernels::crossEntropyOp({0}, {1}, {2}, {3}, {4}, error)",
                                     ref(o.getLogits()), shape(o.getLogits()),
                                     ref(o.getTargets()), ref(o.getResult()), place));
      })
      .Case([&](CrossEntropyGradOp o) {
        return checked(llvm::formatv(
            "kernels::crossEntropyGradOp({0}, {1}, {2}, {3}, {4}, {5}, error)", ref(o.getLogits()),
            shape(o.getLogits()), ref(o.getTargets()), ref(o.getLossGrad()), ref(o.getResult()),
            place));
      })
      .Case([&](ReluGradOp o) {
        line(llvm::formatv("kernels::reluGrad({0}, {1}, {2}, {3});", ref(o.getInput()),
                           ref(o.getGrad()), ref(o.getResult()), elements(o.getInput())));
        return success();
      })
      .Case([&](GeluGradOp o) {
        line(llvm::formatv("kernels::geluGrad({0}, {1}, {2}, {3});", ref(o.getInput()),
                           ref(o.getGrad()), ref(o.getResult()), elements(o.getInput())));
        return success();
      })
      .Case([&](SoftmaxGradOp o) {
        line(llvm::formatv("kernels::softmaxGrad({0}, {1}, {2}, {3}, {4});", ref(o.getOutput()),
                           ref(o.getGrad()), ref(o.getResult()), shape(o.getResult()),
                           o.getAxis()));
        return success();
      })
      .Case([&](LayerNormGradOp o) {
        line(llvm::formatv("kernels::layerNormGradOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7});",
                           ref(o.getInput()), ref(o.getScale()), ref(o.getGrad()),
                           ref(o.getInputGrad()), ref(o.getScaleGrad()), ref(o.getBiasGrad()),
                           shape(o.getInput()), floatLiteral(o.getEps().convertToDouble())));
        return success();
      })
      .Case([&](EmbeddingGradOp o) {
        return checked(llvm::formatv(
            "kernels::embeddingGradOp({0}, {1}, {2}, {3}, {4}, {5}, error)", ref(o.getIndices()),
            elements(o.getIndices()), ref(o.getGrad()), shape(o.getResult()), ref(o.getResult()),
            place));
      })
      .Case([&](PadOp o) {
        line(llvm::formatv("kernels::pad({0}, {1}, {2}, {3}, {4});", ref(o.getInput()),
                           shape(o.getInput()), list(o.getLow()), list(o.getHigh()),
                           ref(o.getResult())));
        return success();
      })
      .Case([&](BroadcastOp o) {
        line(llvm::formatv("kernels::broadcast({0}, {1}, {2}, {3});", ref(o.getInput()),
                           shape(o.getInput()), ref(o.getResult()), shape(o.getResult())));
        return success();
      })
      .Case([&](SgdUpdateOp o) {
        line(llvm::formatv("kernels::sgdUpdate({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8});",
                           ref(o.getParam()), ref(o.getGrad()), ref(o.getVelocity()),
                           elements(o.getParam()), doubleLiteral(o.getLr().convertToDouble()),
                           doubleLiteral(o.getMomentum().convertToDouble()),
                           doubleLiteral(o.getWeightDecay().convertToDouble()), ref(o.getNewParam()),
                           ref(o.getNewVelocity())));
        return success();
      })
      .Case([&](AdamwUpdateOp o) {
        line(llvm::formatv("kernels::adamwUpdateOp({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
                           "{10}, {11}, {12}, {13});",
                           ref(o.getParam()), ref(o.getGrad()), ref(o.getM()), ref(o.getV()),
                           elements(o.getParam()), ref(o.getStep()),
                           doubleLiteral(o.getLr().convertToDouble()),
                           doubleLiteral(o.getBeta1().convertToDouble()),
                           doubleLiteral(o.getBeta2().convertToDouble()),
                           doubleLiteral(o.getEps().convertToDouble()),
                           doubleLiteral(o.getWeightDecay().convertToDouble()),
                           ref(o.getNewParam()), ref(o.getNewM()), ref(o.getNewV())));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError() << "has no code for the " << sbpc::targetName(target)
                                    << " target";
      });
}

/// The element of an input of `inShape`, broadcast NumPy-style to
/// `outShape`, that output element `i` reads: an expression in `i`.
std::string broadcastIndex(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape) {
  int64_t in = 1, out = 1;
  for (int64_t d : inShape)
    in *= d;
  for (int64_t d : outShape)
    out *= d;
  if (in == out)
    return "i";
  if (in == 1)
    return "0";
  // A suffix of the output's shape (leading 1s aside): the index repeats.
  ArrayRef<int64_t> kept = inShape.drop_while([](int64_t d) { return d == 1; });
  if (kept == outShape.take_back(kept.size()))
    return "i % " + std::to_string(in);
  std::string index;
  int64_t outStride = 1, inStride = 1;
  size_t offset = outShape.size() - inShape.size();
  for (int64_t d = static_cast<int64_t>(outShape.size()) - 1; d >= 0; --d) {
    int64_t inDim = d >= static_cast<int64_t>(offset) ? inShape[d - offset] : 1;
    if (inDim != 1) {
      std::string coordinate = outStride == 1 ? "i" : "(i / " + std::to_string(outStride) + ")";
      if (d > 0)
        coordinate += " % " + std::to_string(outShape[d]);
      if (inStride != 1)
        coordinate = (d > 0 ? "(" + coordinate + ")" : coordinate) + " * " +
                     std::to_string(inStride);
      index += (index.empty() ? "" : " + ") + coordinate;
      inStride *= inDim;
    }
    outStride *= outShape[d];
  }
  return index;
}

LogicalResult Emitter::emitFused(ex::FusedOp op) {
  std::string name = "fused" + std::to_string(fusedCount++);
  auto outShape = op.getResult().getType().getShape();
  int64_t n = op.getResult().getType().getNumElements();
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, std::string> names;
  std::string params, loop, what;
  for (BlockArgument arg : body.getArguments()) {
    std::string in = "in" + std::to_string(arg.getArgNumber());
    params += "const " + elementType(arg) + " *__restrict__ " + in + ", ";
    names[arg] = "v" + std::to_string(names.size());
    loop += "    const float " + names[arg] + " = " + in + "[" +
            broadcastIndex(cast<RankedTensorType>(arg.getType()).getShape(), outShape) + "];\n";
  }
  for (Operation &inner : body.without_terminator()) {
    auto operand = [&](unsigned i) { return names.lookup(inner.getOperand(i)); };
    StringRef opName = inner.getName().getStringRef();
    std::string value;
    if (const char *kind = llvm::StringSwitch<const char *>(opName)
                               .Case("graph.neg", "Neg")
                               .Case("graph.exp", "Exp")
                               .Case("graph.log", "Log")
                               .Case("graph.tanh", "Tanh")
                               .Case("graph.sqrt", "Sqrt")
                               .Case("graph.rsqrt", "Rsqrt")
                               .Case("graph.relu", "Relu")
                               .Case("graph.gelu", "Gelu")
                               .Default(nullptr))
      value = std::string("sbprt::elementwise::unary(sbprt::cpu::UnaryKind::") + kind + ", " +
              operand(0) + ")";
    else if (const char *kind = llvm::StringSwitch<const char *>(opName)
                                    .Case("graph.add", "Add")
                                    .Case("graph.sub", "Sub")
                                    .Case("graph.mul", "Mul")
                                    .Case("graph.div", "Div")
                                    .Default(nullptr))
      value = std::string("sbprt::elementwise::binary(sbprt::cpu::BinaryKind::") + kind + ", " +
              operand(0) + ", " + operand(1) + ")";
    else if (isa<ReluGradOp>(inner))
      value = "sbprt::elementwise::reluGrad(" + operand(0) + ", " + operand(1) + ")";
    else if (isa<GeluGradOp>(inner))
      value = "sbprt::elementwise::geluGrad(" + operand(0) + ", " + operand(1) + ")";
    else
      return inner.emitOpError() << "cannot be part of an exec.fused";
    names[inner.getResult(0)] = "v" + std::to_string(names.size());
    loop += "    const float " + names[inner.getResult(0)] + " = " + value + ";\n";
    what += (what.empty() ? "" : ", ") + opName.drop_front(6).str();
  }
  loop += "    out[i] = " + names.lookup(body.getTerminator()->getOperand(0)) + ";\n";
  // The body computes in f32 whatever the storage; bf16 is rounded once, on
  // the write.
  params += elementType(op.getResult()) + " *__restrict__ out";
  statics << "// exec.fused: " << what << " over " << n << " elements\n";
  if (target == sbpc::TargetKind::Cuda) {
    std::string args;
    for (unsigned i = 0; i < body.getNumArguments(); ++i)
      args += "in" + std::to_string(i) + ", ";
    statics << "__global__ void " << name << "Kernel(" << params << ") {\n"
            << "  SBPRT_FOR_EACH(i, " << n << "LL) {\n"
            << loop << "  }\n}\n"
            << "static void " << name << "(" << params << ") {\n"
            << "  " << name << "Kernel<<<sbprt::cuda::blocksFor(" << n
            << "LL), sbprt::cuda::kThreads, 0, sbprt::cuda::context().stream>>>(" << args
            << "out);\n"
            << "  sbprt::cuda::launched(\"" << name << "\");\n}\n\n";
  } else {
    statics << "static void " << name << "(" << params << ") {\n"
            << "  for (int64_t i = 0; i < " << n << "LL; ++i) {\n"
            << loop << "  }\n}\n\n";
  }
  std::string call = name + "(";
  for (Value input : op.getInputs())
    call += ref(input) + ", ";
  line(call + ref(op.getResult()) + ");");
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  if (isa<func::ReturnOp>(op))
    return success();
  auto resultOffsets = op->getAttrOfType<DenseI64ArrayAttr>(ex::kOffsets);
  if (op->getNumResults() && (!resultOffsets || resultOffsets.size() != op->getNumResults()))
    return op->emitOpError() << "has no place in the arena; run --exec-plan-memory first";
  for (auto [result, offset] : llvm::zip(op->getResults(),
                                         resultOffsets ? resultOffsets.asArrayRef()
                                                       : ArrayRef<int64_t>()))
    offsets[result] = offset;
  std::string what = op->getName().getStringRef().str();
  if (auto load = dyn_cast<ex::LoadOp>(op))
    what += std::string(load.getKind() == "param" ? " of parameter '" : " of input '") +
            load.getName().str() + "'";
  else if (auto store = dyn_cast<ex::StoreOp>(op))
    what += " of output '" + store.getName().str() + "'";
  line("r.op(" + quoted(what + " at " + sbpc::sbp::describeLocation(op->getLoc())) + ", " +
       quoted(signature(op)) + ");");
  if (isa<ex::ExecDialect>(op->getDialect()))
    return emitExecOp(op);
  return emitGraphOp(op);
}

LogicalResult Emitter::emit(const std::string &name, std::ostream &out) {
  auto arena = program->getAttrOfType<IntegerAttr>(ex::kArenaBytes);
  if (!arena)
    return program.emitOpError() << "has no memory plan; run --exec-plan-memory first";
  int emitted = 0;
  for (Operation &op : program.getBody().front()) {
    if (failed(emitOp(&op)))
      return failure();
    if (++emitted % kOpsPerPart == 0) {
      parts.push_back(body.str());
      body.str("");
    }
  }
  if (!body.str().empty())
    parts.push_back(body.str());
  std::string functions, calls;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string part = "part" + std::to_string(i);
    functions += "static void " + part +
                 "(sbprt::rank::Rank &r, [[maybe_unused]] std::string &error) {\n" + parts[i] +
                 "}\n\n";
    calls += "    " + part + "(r, error);\n";
  }
  std::string axes = "{", meshText;
  for (size_t i = 0; i < mesh.axes.size(); ++i) {
    axes += (i ? ", " : "") + quoted(mesh.axes[i]);
    meshText += (i ? "," : "") + mesh.axes[i] + "=" + std::to_string(mesh.shape[i]);
  }
  axes += "}";
  auto ranks = program->getAttrOfType<DenseI64ArrayAttr>(ex::kProgramRanks);
  bool cuda = target == sbpc::TargetKind::Cuda;
  out << "// Generated by sbpc: " << name << ", the program of ranks " << list(ranks.asArrayRef())
      << " on mesh " << meshText << ".\n"
      << (cuda ? "// Built by sbpc compile with nvcc against libsbprt_cuda, libsbprt_rank,\n"
                 "// libsbprt, cuBLAS, NCCL and MPI (the command is in build.sh).\n"
                 "#include \"runtime/cuda/Context.h\"\n"
                 "#include \"runtime/cuda/Ops.h\"\n"
               : "// Built by sbpc compile against libsbprt_rank, libsbprt, a BLAS and MPI\n"
                 "// (the command is in build.sh).\n")
      << "#include \"runtime/Elementwise.h\"\n"
      << "#include \"runtime/rank/Rank.h\"\n\n"
      << "#include <cstring>\n#include <limits>\n\n"
      << "using sbprt::cpu::Shape;\nnamespace kernels = sbprt::" << (cuda ? "cuda" : "cpu")
      << ";\n\n"
      << statics.str() << (constants ? "\n" : "")
      << "// The program's ops in order, " << kOpsPerPart << " to a function.\n"
      << functions << "int main(int argc, char **argv) {\n"
      << (cuda ? "  sbprt::cuda::Backend gpu;\n" : "")
      << "  sbprt::rank::Rank r(argc, argv, {" << quoted(name) << ", sbprt::Mesh{" << axes
      << ", " << list(mesh.shape) << "}, " << arena.getInt() << (cuda ? ", &gpu" : "")
      << "});\n"
      << "  [[maybe_unused]] std::string error;\n"
      << "  for (int64_t repeat = 0; repeat < r.repeats(); ++repeat) {\n"
      << "    r.beginRepeat();\n"
      << calls << "    r.endRepeat();\n  }\n  return r.finish();\n}\n";
  return success();
}

} // namespace

const char *sbpc::targetName(TargetKind kind) {
  return kind == TargetKind::Cuda ? "cuda" : "cpu";
}

LogicalResult sbpc::emitProgram(func::FuncOp program, const sbprt::Mesh &mesh,
                                const std::string &name, TargetKind target, std::ostream &out) {
  return Emitter(program, mesh, target).emit(name, out);
}
