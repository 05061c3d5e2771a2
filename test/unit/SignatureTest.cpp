// Checks every nd SBP signature of every graph op numerically on simulated meshes.
//
// For each case (a function whose body is one graph op) and each signature
// that ndSignatures lists on a mesh, the global inputs are distributed as the
// signature says, the op is rebuilt with local types and run on every rank's
// shards with the reference evaluator, and the local results, assembled by
// the result layouts, must match the op's result on the global inputs.
#include "compiler/Reference/Evaluator.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "runtime/Layout.h"
#include "runtime/Tensor.h"
#include "runtime/sim/SimulatedMesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace mlir;
using sbprt::Mesh;
using sbprt::NdSbp;
using sbprt::Tensor;

namespace {

/// How a case's random float inputs are drawn.
enum class Floats { Any, Positive };

/// One op to check: `ir` holds `func.func @f` whose body is exactly one graph
/// op and its return; the function's arguments are the op's operands.
struct Case {
  const char *ir;
  /// Positive for ops defined on positive inputs only (log, sqrt, rsqrt, div).
  Floats floats = Floats::Any;
  /// Int64 inputs (indices, targets) are drawn from [0, indexBound).
  int64_t indexBound = 0;
  /// The value of every 0-d f32 input (a loss gradient, an optimizer step).
  float scalar = 0.75f;
};

const Case kCases[] = {
    // Constants.
    {R"(func.func @f() -> tensor<2x3xf32> {
      %0 = graph.constant dense<[[1.0, -2.0, 3.5], [0.25, 4.0, -6.0]]> : tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })"},
    // Unary elementwise.
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.neg %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.exp %x : tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.log %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })",
     Floats::Positive},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.tanh %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.sqrt %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })",
     Floats::Positive},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.rsqrt %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })",
     Floats::Positive},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.relu %x : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.gelu %x : tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    // Binary elementwise with broadcasting.
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x1xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.add %a, %b : (tensor<4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>) -> tensor<4x8xf32> {
      %0 = graph.sub %a, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.sub %a, %b : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.mul %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = graph.mul %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>) -> tensor<4x8xf32> {
      %0 = graph.div %a, %b : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })",
     Floats::Positive},
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = graph.div %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })",
     Floats::Positive},
    // Contractions.
    {R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
      %0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<8x4xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<8x4xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
      %0 = graph.matmul %a, %b transpose_lhs : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.matmul %a, %b transpose_rhs : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<4x8xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.matmul %a, %b transpose_rhs : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    {R"(func.func @f(%a: tensor<2x8x4xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.matmul %a, %b transpose_lhs transpose_rhs : (tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    // Reductions.
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
      %0 = graph.reduce_sum %x dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
      return %0 : tensor<8xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
      %0 = graph.reduce_sum %x dims [1] keepdims : (tensor<4x8xf32>) -> tensor<4x1xf32>
      return %0 : tensor<4x1xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<4xf32> {
      %0 = graph.reduce_sum %x dims [0, 2] : (tensor<2x4x8xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
      %0 = graph.reduce_mean %x dims [0] keepdims : (tensor<4x8xf32>) -> tensor<1x8xf32>
      return %0 : tensor<1x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4xf32> {
      %0 = graph.reduce_mean %x dims [2] : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
      %0 = graph.reduce_max %x dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
      return %0 : tensor<8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x1xf32> {
      %0 = graph.reduce_max %x dims [2] keepdims : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
      return %0 : tensor<2x4x1xf32>
    })"},
    // Normalizations.
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.softmax %x axis = 1 : tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.softmax %x axis = 2 : tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.log_softmax %x axis = 1 : tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.layer_norm %x, %g, %b eps = 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    // Data movement.
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<8x2x4xf32> {
      %0 = graph.transpose %x perm [2, 0, 1] : (tensor<2x4x8xf32>) -> tensor<8x2x4xf32>
      return %0 : tensor<8x2x4xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x8x4xf32> {
      %0 = graph.transpose %x perm [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
      return %0 : tensor<2x8x4xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8x6xf32>) -> tensor<4x8x2x3xf32> {
      %0 = graph.reshape %x : (tensor<4x8x6xf32>) -> tensor<4x8x2x3xf32>
      return %0 : tensor<4x8x2x3xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
      %0 = graph.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
      return %0 : tensor<32xf32>
    })"},
    {R"(func.func @f(%x: tensor<8x4xf32>) -> tensor<2x4x4xf32> {
      %0 = graph.reshape %x : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
      return %0 : tensor<2x4x4xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
      %0 = graph.slice %x starts [0, 2] limits [4, 6] : (tensor<4x8xf32>) -> tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>) -> tensor<2x2x8xf32> {
      %0 = graph.slice %x starts [0, 1, 0] limits [2, 3, 8] : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
      return %0 : tensor<2x2x8xf32>
    })"},
    {R"(func.func @f(%a: tensor<4x2x8xf32>, %b: tensor<4x6x8xf32>) -> tensor<4x8x8xf32> {
      %0 = graph.concat %a, %b axis = 1 : (tensor<4x2x8xf32>, tensor<4x6x8xf32>) -> tensor<4x8x8xf32>
      return %0 : tensor<4x8x8xf32>
    })"},
    {R"(func.func @f(%t: tensor<16x8xf32>, %ids: tensor<4x2xi64>) -> tensor<4x2x8xf32> {
      %0 = graph.embedding %t, %ids : (tensor<16x8xf32>, tensor<4x2xi64>) -> tensor<4x2x8xf32>
      return %0 : tensor<4x2x8xf32>
    })",
     Floats::Any, 16},
    // Attention and loss.
    {R"(func.func @f(%s: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
      %0 = graph.causal_mask %s : tensor<2x2x4x4xf32>
      return %0 : tensor<2x2x4x4xf32>
    })"},
    {R"(func.func @f(%l: tensor<4x2x8xf32>, %t: tensor<4x2xi64>) -> tensor<f32> {
      %0 = graph.cross_entropy %l, %t : (tensor<4x2x8xf32>, tensor<4x2xi64>) -> tensor<f32>
      return %0 : tensor<f32>
    })",
     Floats::Any, 8},
    // Gradients.
    {R"(func.func @f(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = graph.relu_grad %x, %dy : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.gelu_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%y: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.softmax_grad %y, %dy axis = 1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    {R"(func.func @f(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x4x8xf32>)
        -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
      %0:3 = graph.layer_norm_grad %x, %g, %dy eps = 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
      return %0#0, %0#1, %0#2 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
    })"},
    // Eight indices below 4: some repeat, and their rows add up.
    {R"(func.func @f(%ids: tensor<4x2xi64>, %dy: tensor<4x2x8xf32>) -> tensor<8x8xf32> {
      %0 = graph.embedding_grad %ids, %dy rows = 8 : (tensor<4x2xi64>, tensor<4x2x8xf32>) -> tensor<8x8xf32>
      return %0 : tensor<8x8xf32>
    })",
     Floats::Any, 4},
    {R"(func.func @f(%dy: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
      %0 = graph.causal_mask_grad %dy : tensor<2x2x4x4xf32>
      return %0 : tensor<2x2x4x4xf32>
    })"},
    {R"(func.func @f(%l: tensor<4x2x8xf32>, %t: tensor<4x2xi64>, %dl: tensor<f32>) -> tensor<4x2x8xf32> {
      %0 = graph.cross_entropy_grad %l, %t, %dl : (tensor<4x2x8xf32>, tensor<4x2xi64>, tensor<f32>) -> tensor<4x2x8xf32>
      return %0 : tensor<4x2x8xf32>
    })",
     Floats::Any, 8},
    {R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x12xf32> {
      %0 = graph.pad %x low [0, 1] high [0, 3] : (tensor<4x8xf32>) -> tensor<4x12xf32>
      return %0 : tensor<4x12xf32>
    })"},
    {R"(func.func @f(%x: tensor<4x1xf32>) -> tensor<2x4x8xf32> {
      %0 = graph.broadcast %x : (tensor<4x1xf32>) -> tensor<2x4x8xf32>
      return %0 : tensor<2x4x8xf32>
    })"},
    // Optimizers.
    {R"(func.func @f(%w: tensor<4x8xf32>, %dw: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
      %0:2 = graph.sgd_update %w, %dw, %v lr = 0.1 momentum = 0.9 weight_decay = 0.01 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
      return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
    })"},
    // m and v are drawn positive: v is a running mean of squares.
    {R"(func.func @f(%w: tensor<4x8xf32>, %dw: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %step: tensor<f32>)
        -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
      %0:3 = graph.adamw_update %w, %dw, %m, %v, %step lr = 1.0e-03 beta1 = 0.9 beta2 = 0.999 eps = 1.0e-08 weight_decay = 1.0e-02 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
      return %0#0, %0#1, %0#2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
    })",
     Floats::Positive, 0, 3.0f},
};

const Mesh kMeshes[] = {Mesh{{"x"}, {2}}, Mesh{{"a", "b"}, {2, 2}}};

/// A context with the graph, sbp and func dialects and the SBP models.
std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registry.insert<sbpc::graph::GraphDialect, sbpc::sbp::SbpDialect, func::FuncDialect>();
  sbpc::registerGraphSbpModels(registry);
  auto ctx = std::make_unique<MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  ctx->printOpOnDiagnostic(false);
  return ctx;
}

/// Collects the context's diagnostics instead of printing them.
struct Diagnostics {
  explicit Diagnostics(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          text += d.str() + "\n";
          return success();
        }) {}
  /// What was reported since the last call.
  std::string take() { return std::exchange(text, ""); }

  std::string text;
  ScopedDiagnosticHandler handler;
};

func::FuncOp onlyFunc(ModuleOp module) { return *module.getOps<func::FuncOp>().begin(); }

/// The one graph op of a case's function.
Operation *graphOp(func::FuncOp func) { return &func.getBody().front().front(); }

std::vector<int64_t> shapeOf(Type type) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

/// A random global input of `type`, drawn as `c` says.
Tensor randomInput(Type type, const Case &c, uint64_t seed) {
  auto ranked = cast<RankedTensorType>(type);
  std::mt19937_64 rng(seed);
  if (ranked.getElementType().isInteger(64)) {
    Tensor t(sbprt::DType::I64, shapeOf(type));
    std::uniform_int_distribution<int64_t> index(0, c.indexBound - 1);
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.as<int64_t>()[i] = index(rng);
    return t;
  }
  Tensor t(sbprt::DType::F32, shapeOf(type));
  if (ranked.getRank() == 0) {
    t.as<float>()[0] = c.scalar;
    return t;
  }
  std::uniform_real_distribution<float> value(c.floats == Floats::Positive ? 0.5f : -2.0f, 2.0f);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.as<float>()[i] = value(rng);
  return t;
}

std::string meshName(const Mesh &mesh) {
  std::string s;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    s += (i ? ", " : "") + mesh.axes[i] + "=" + std::to_string(mesh.shape[i]);
  return "{" + s + "}";
}

/// "graph.matmul on {a=2, b=2}: ([S(0), B], [B, S(1)]) -> ([S(0), S(1)])".
std::string describe(Operation *op, const Mesh &mesh, const sbpc::NdSignature &sig) {
  auto list = [](const std::vector<NdSbp> &layouts) {
    std::string s;
    for (size_t i = 0; i < layouts.size(); ++i)
      s += (i ? ", " : "") + sbprt::toString(layouts[i]);
    return "(" + s + ")";
  };
  return op->getName().getStringRef().str() + " on " + meshName(mesh) + ": " +
         list(sig.operands) + " -> " + list(sig.results);
}

bool allBroadcast(const std::vector<NdSbp> &layouts) {
  return llvm::all_of(layouts, [](const NdSbp &layout) {
    return llvm::all_of(layout, [](const sbprt::Sbp &s) { return s.isBroadcast(); });
  });
}

bool anySplit(const std::vector<NdSbp> &layouts) {
  return llvm::any_of(layouts, [](const NdSbp &layout) {
    return llvm::any_of(layout, [](const sbprt::Sbp &s) { return s.isSplit(); });
  });
}

RankedTensorType localType(Type global, const Mesh &mesh, const NdSbp &layout) {
  auto ranked = cast<RankedTensorType>(global);
  return RankedTensorType::get(sbpc::localShape(mesh, layout, shapeOf(global)),
                               ranked.getElementType());
}

/// A module with `func.func @f` running `op` on local operands as
/// cloneWithLocalShapes forms it, with result types the local shapes of the
/// signature's result layouts.
OwningOpRef<ModuleOp> localModule(Operation *op, const Mesh &mesh,
                                  const sbpc::NdSignature &sig) {
  Location loc = op->getLoc();
  OpBuilder b(op->getContext());
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  SmallVector<Type> operandTypes, resultTypes;
  for (auto [value, layout] : llvm::zip_equal(op->getOperands(), sig.operands))
    operandTypes.push_back(localType(value.getType(), mesh, layout));
  for (auto [value, layout] : llvm::zip_equal(op->getResults(), sig.results))
    resultTypes.push_back(localType(value.getType(), mesh, layout));
  b.setInsertionPointToEnd(module->getBody());
  auto func = b.create<func::FuncOp>(loc, "f", b.getFunctionType(operandTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  IRMapping operands;
  operands.map(op->getOperands(), entry->getArguments());
  Operation *local = sbpc::cloneWithLocalShapes(b, op, operands, resultTypes);
  b.create<func::ReturnOp>(loc, local->getResults());
  return module;
}

/// Empty when `actual` matches `expected` within `tolerance * max(1, max
/// |expected|)` (infinities must match exactly); otherwise what differs.
std::string mismatch(const Tensor &actual, const Tensor &expected, double tolerance) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return std::string("got ") + sbprt::dtypeName(actual.dtype()) +
           sbprt::shapeToString(actual.shape()) + ", expected " +
           sbprt::dtypeName(expected.dtype()) + sbprt::shapeToString(expected.shape());
  int64_t n = expected.numElements();
  if (expected.dtype() == sbprt::DType::I64) {
    for (int64_t i = 0; i < n; ++i)
      if (actual.as<int64_t>()[i] != expected.as<int64_t>()[i])
        return "element " + std::to_string(i) + " is " + std::to_string(actual.as<int64_t>()[i]) +
               ", expected " + std::to_string(expected.as<int64_t>()[i]);
    return "";
  }
  const float *a = actual.as<float>(), *e = expected.as<float>();
  double scale = 1;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(e[i]))
      scale = std::max(scale, std::fabs(static_cast<double>(e[i])));
  double bound = tolerance * scale, worst = 0;
  int64_t worstAt = -1;
  for (int64_t i = 0; i < n; ++i) {
    double diff = std::isfinite(e[i]) ? std::fabs(static_cast<double>(a[i]) - e[i])
                  : a[i] == e[i]      ? 0.0
                                      : INFINITY;
    if (std::isnan(diff))
      diff = INFINITY;
    if (diff > worst) {
      worst = diff;
      worstAt = i;
    }
  }
  if (worst <= bound)
    return "";
  std::ostringstream os;
  os << "max |actual - expected| = " << worst << " > " << bound << " at element " << worstAt
     << " (actual " << a[worstAt] << ", expected " << e[worstAt] << ")";
  return os.str();
}

/// The tolerance relative to the largest expected magnitude: contractions
/// sum in a different order on each shard.
double toleranceFor(Operation *op) { return isa<sbpc::graph::MatmulOp>(op) ? 1e-4 : 1e-5; }

/// Runs one signature of `op` on `mesh` against the global `inputs` and
/// `expected` results; empty when it holds, otherwise why not.
std::string checkSignature(Operation *op, const Mesh &mesh, const sbpc::NdSignature &sig,
                           const std::vector<Tensor> &inputs, const std::vector<Tensor> &expected,
                           uint64_t seed, Diagnostics &diags) {
  diags.take();
  OwningOpRef<ModuleOp> module = localModule(op, mesh, sig);
  if (failed(verify(*module)))
    return "the local op does not verify: " + diags.take();
  func::FuncOp func = onlyFunc(*module);

  std::vector<sbprt::sim::Shards> shards;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const sbprt::Sbp &s : sig.operands[i])
      if (s.isPartial() && inputs[i].dtype() != sbprt::DType::F32)
        return "operand " + std::to_string(i) + " holds integers but is partial";
    shards.push_back(sbprt::sim::distribute(inputs[i], mesh, sig.operands[i], seed + 7919 * i));
  }

  std::vector<sbprt::sim::Shards> results(expected.size());
  for (int64_t rank = 0; rank < mesh.numDevices(); ++rank) {
    std::vector<Tensor> local;
    for (auto [s, arg] : llvm::zip_equal(shards, func.getArguments())) {
      if (s[rank].shape() != shapeOf(arg.getType()))
        return "rank " + std::to_string(rank) + " holds " + sbprt::shapeToString(s[rank].shape()) +
               " of operand " + std::to_string(arg.getArgNumber()) + ", typed " +
               sbprt::shapeToString(shapeOf(arg.getType()));
      local.push_back(s[rank]);
    }
    FailureOr<std::vector<Tensor>> out = sbpc::evaluate(func, std::move(local));
    if (failed(out))
      return "rank " + std::to_string(rank) + " fails to evaluate: " + diags.take();
    for (size_t r = 0; r < expected.size(); ++r)
      results[r].push_back(std::move((*out)[r]));
  }

  std::string errors;
  for (size_t r = 0; r < expected.size(); ++r) {
    Tensor assembled = sbprt::sim::assemble(results[r], mesh, sig.results[r]);
    std::string error = mismatch(assembled, expected[r], toleranceFor(op));
    if (!error.empty())
      errors += "result " + std::to_string(r) + ": " + error + "; ";
  }
  return errors;
}

/// A parsed case with its global inputs and the op's results on them.
struct Prepared {
  OwningOpRef<ModuleOp> module;
  Operation *op = nullptr;
  std::vector<Tensor> inputs, expected;
};

/// Parses and evaluates `c`; `op` stays null (and a failure is added) when
/// the case is broken.
Prepared prepare(MLIRContext &ctx, const Case &c, uint64_t seed, Diagnostics &diags) {
  Prepared p;
  p.module = parseSourceString<ModuleOp>(c.ir, &ctx);
  if (!p.module || failed(verify(*p.module))) {
    ADD_FAILURE() << "bad case:\n" << c.ir << "\n" << diags.take();
    return p;
  }
  func::FuncOp func = onlyFunc(*p.module);
  for (BlockArgument arg : func.getArguments())
    p.inputs.push_back(randomInput(arg.getType(), c, seed + arg.getArgNumber()));
  FailureOr<std::vector<Tensor>> expected = sbpc::evaluate(func, p.inputs);
  if (failed(expected)) {
    ADD_FAILURE() << "case fails to evaluate:\n" << c.ir << "\n" << diags.take();
    return p;
  }
  p.expected = std::move(*expected);
  p.op = graphOp(func);
  return p;
}

TEST(SignatureTest, EverySignatureMatchesTheUnshardedOp) {
  std::unique_ptr<MLIRContext> ctx = makeContext();
  Diagnostics diags(*ctx);
  size_t checked = 0, failures = 0;
  for (size_t c = 0; c < std::size(kCases); ++c) {
    Prepared p = prepare(*ctx, kCases[c], 1000 * c, diags);
    if (!p.op)
      continue;
    Operation *op = p.op;
    SCOPED_TRACE(op->getName().getStringRef().str() + " (case " + std::to_string(c) + ")");

    for (const Mesh &mesh : kMeshes) {
      std::vector<sbpc::NdSignature> sigs = sbpc::ndSignatures(op, mesh);
      bool broadcast = false, split = false;
      for (size_t s = 0; s < sigs.size(); ++s) {
        const sbpc::NdSignature &sig = sigs[s];
        broadcast |= allBroadcast(sig.operands) && allBroadcast(sig.results);
        split |= anySplit(sig.operands) || anySplit(sig.results);
        ++checked;
        std::string error =
            checkSignature(op, mesh, sig, p.inputs, p.expected, 100000 * c + 100 * s, diags);
        if (!error.empty()) {
          ++failures;
          ADD_FAILURE() << describe(op, mesh, sig) << ": " << error;
        }
      }
      EXPECT_TRUE(broadcast) << "no all-broadcast signature on " << meshName(mesh);
      // A constant has no operand to split.
      if (op->getNumOperands() > 0) {
        EXPECT_TRUE(split) << "no signature with a split on " << meshName(mesh);
      }
    }
  }
  std::printf("[ SIGNATURES ] %zu checked, %zu failed\n", checked, failures);
  ::testing::Test::RecordProperty("signatures_checked", static_cast<int>(checked));
  EXPECT_GT(checked, 300u);
}

// The harness itself must reject signatures that do not hold, or the test
// above could pass whatever the rules say.
TEST(SignatureTest, WrongSignaturesAreCaught) {
  std::unique_ptr<MLIRContext> ctx = makeContext();
  Diagnostics diags(*ctx);
  const sbprt::Sbp B = sbprt::Sbp::broadcast(), Psum = sbprt::Sbp::partial(),
                   S0 = sbprt::Sbp::split(0), S1 = sbprt::Sbp::split(1);
  struct Wrong {
    Case c;
    sbpc::NdSignature sig;
  };
  const Wrong wrongs[] = {
      // exp is not linear.
      {{R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
        %0 = graph.exp %x : tensor<4x8xf32>
        return %0 : tensor<4x8xf32>
      })"},
       {{{Psum}}, {{Psum}}}},
      // softmax normalizes along the split axis.
      {{R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
        %0 = graph.softmax %x axis = 1 : tensor<4x8xf32>
        return %0 : tensor<4x8xf32>
      })"},
       {{{S1}}, {{S1}}}},
      // Means of halves do not add up to the mean.
      {{R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<8xf32> {
        %0 = graph.reduce_mean %x dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
        return %0 : tensor<8xf32>
      })"},
       {{{S0}}, {{Psum}}}},
      // A product of partial sums is not a partial sum of the product.
      {{R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
        %0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
        return %0 : tensor<4x4xf32>
      })"},
       {{{Psum}, {Psum}}, {{Psum}}}},
      // Treating a split result as broadcast loses half of it.
      {{R"(func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
        %0 = graph.neg %x : tensor<4x8xf32>
        return %0 : tensor<4x8xf32>
      })"},
       {{{S0}}, {{B}}}},
  };
  const Mesh &mesh = kMeshes[0];
  for (const Wrong &w : wrongs) {
    Prepared p = prepare(*ctx, w.c, 7, diags);
    if (!p.op)
      continue;
    EXPECT_NE("", checkSignature(p.op, mesh, w.sig, p.inputs, p.expected, 11, diags))
        << describe(p.op, mesh, w.sig) << " was accepted";
  }
}

TEST(SignatureTest, CasesCoverEveryGraphOp) {
  std::unique_ptr<MLIRContext> ctx = makeContext();
  std::set<std::string> covered;
  for (const Case &c : kCases) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.ir, ctx.get());
    ASSERT_TRUE(module) << c.ir;
    covered.insert(graphOp(onlyFunc(*module))->getName().getStringRef().str());
  }
  size_t ops = 0;
  for (RegisteredOperationName name : ctx->getRegisteredOperations()) {
    if (name.getDialectNamespace() != "graph")
      continue;
    ++ops;
    EXPECT_TRUE(covered.count(name.getStringRef().str())) << name.getStringRef().str();
  }
  EXPECT_GT(ops, 0u);
}

} // namespace

// Ops that differ only in the marks naming their layer or micro-batch (or
// in the layouts a pass gave them) have the same signatures, and share them
// in the cache propagation uses; another attribute or type does not.
TEST(SignatureTest, AlikeOpsShareTheirSignatures) {
  std::unique_ptr<MLIRContext> ctx = makeContext();
  Diagnostics diags(*ctx);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x8xf32>) -> tensor<4x4xf32> {
        %0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
        %1 = graph.matmul %a, %b {graph.region = "h.3", sbp.micro_batch = 5 : i64, sbp.result_layouts = [#sbp.nd<[B]>]} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
        %2 = graph.matmul %a, %c : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
        %3 = graph.matmul %c, %c transpose_lhs : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
        %4 = graph.matmul %c, %c : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
        return %0 : tensor<4x4xf32>
      })",
      ctx.get());
  ASSERT_TRUE(module && succeeded(verify(*module))) << diags.take();
  std::vector<Operation *> ops;
  for (Operation &op : onlyFunc(*module).getBody().front().without_terminator())
    ops.push_back(&op);
  ASSERT_EQ(ops.size(), 5u);
  using sbpc::sbp::signatureKey;
  EXPECT_EQ(signatureKey(ops[0]), signatureKey(ops[1]));
  EXPECT_NE(signatureKey(ops[0]), signatureKey(ops[2])); // types
  EXPECT_NE(signatureKey(ops[3]), signatureKey(ops[4])); // transpose_lhs
  const Mesh &mesh = kMeshes[0];
  sbpc::sbp::SignatureCache cache(mesh);
  const std::vector<sbpc::NdSignature> &first = cache.of(ops[0]);
  EXPECT_EQ(&first, &cache.of(ops[1]));
  EXPECT_NE(&first, &cache.of(ops[2]));
  std::vector<sbpc::NdSignature> direct = sbpc::ndSignatures(ops[1], mesh);
  ASSERT_EQ(first.size(), direct.size());
  for (size_t i = 0; i < direct.size(); ++i)
    EXPECT_TRUE(first[i].operands == direct[i].operands && first[i].results == direct[i].results);
}
