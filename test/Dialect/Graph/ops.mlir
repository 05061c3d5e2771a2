// RUN: sbpc-opt %s | sbpc-opt | FileCheck %s
// RUN: sbpc-opt %s --mlir-print-op-generic | sbpc-opt | FileCheck %s

// Every graph op survives a print/parse round trip in both custom and generic form.

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: {graph.input = "x"}
// CHECK-SAME: {graph.param = "w"}
// CHECK-SAME: {graph.output = "y"}
func.func @elementwise(%x: tensor<2x3xf32> {graph.input = "x"}, %w: tensor<3xf32> {graph.param = "w"})
    -> (tensor<2x3xf32> {graph.output = "y"}) {
  // CHECK: %[[C:.+]] = graph.constant dense<5.000000e-01> : tensor<f32>
  %c = graph.constant dense<0.5> : tensor<f32>
  // CHECK: graph.neg %{{.+}} : tensor<2x3xf32>
  %0 = graph.neg %x : tensor<2x3xf32>
  // CHECK: graph.exp
  %1 = graph.exp %0 : tensor<2x3xf32>
  // CHECK: graph.log
  %2 = graph.log %1 : tensor<2x3xf32>
  // CHECK: graph.tanh
  %3 = graph.tanh %2 : tensor<2x3xf32>
  // CHECK: graph.sqrt
  %4 = graph.sqrt %3 : tensor<2x3xf32>
  // CHECK: graph.rsqrt
  %5 = graph.rsqrt %4 : tensor<2x3xf32>
  // CHECK: graph.relu
  %6 = graph.relu %5 : tensor<2x3xf32>
  // CHECK: graph.gelu
  %7 = graph.gelu %6 : tensor<2x3xf32>
  // CHECK: graph.add %{{.+}}, %{{.+}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %8 = graph.add %7, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sub
  %9 = graph.sub %8, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: graph.mul
  %10 = graph.mul %9, %9 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.div %{{.+}}, %[[C]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %11 = graph.div %10, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %11 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<4x2x8xf32>, %b: tensor<8x5xf32>, %c: tensor<4x5x8xf32>, %d: tensor<4x8x2xf32>)
    -> (tensor<4x2x5xf32>, tensor<4x2x5xf32>, tensor<4x2x2xf32>) {
  // CHECK: graph.matmul %{{.+}}, %{{.+}} : (tensor<4x2x8xf32>, tensor<8x5xf32>) -> tensor<4x2x5xf32>
  %0 = graph.matmul %a, %b : (tensor<4x2x8xf32>, tensor<8x5xf32>) -> tensor<4x2x5xf32>
  // CHECK: graph.matmul %{{.+}}, %{{.+}} transpose_rhs : (tensor<4x2x8xf32>, tensor<4x5x8xf32>) -> tensor<4x2x5xf32>
  %1 = graph.matmul %a, %c transpose_rhs : (tensor<4x2x8xf32>, tensor<4x5x8xf32>) -> tensor<4x2x5xf32>
  // CHECK: graph.matmul %{{.+}}, %{{.+}} transpose_lhs transpose_rhs : (tensor<4x8x2xf32>, tensor<4x2x8xf32>) -> tensor<4x2x2xf32>
  %2 = graph.matmul %d, %a transpose_lhs transpose_rhs : (tensor<4x8x2xf32>, tensor<4x2x8xf32>) -> tensor<4x2x2xf32>
  return %0, %1, %2 : tensor<4x2x5xf32>, tensor<4x2x5xf32>, tensor<4x2x2xf32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) -> (tensor<2x1x1xf32>, tensor<3xf32>, tensor<2x3xf32>) {
  // CHECK: graph.reduce_sum %{{.+}} dims [1, 2] keepdims : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %0 = graph.reduce_sum %x dims [1, 2] keepdims : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  // CHECK: graph.reduce_mean %{{.+}} dims [0, 2] : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %1 = graph.reduce_mean %x dims [0, 2] : (tensor<2x3x4xf32>) -> tensor<3xf32>
  // CHECK: graph.reduce_max %{{.+}} dims [2] : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  %2 = graph.reduce_max %x dims [2] : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<2x1x1xf32>, tensor<3xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @normalizations
func.func @normalizations(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
  // CHECK: graph.softmax %{{.+}} axis = 2 : tensor<2x3x4xf32>
  %0 = graph.softmax %x axis = 2 : tensor<2x3x4xf32>
  // CHECK: graph.log_softmax %{{.+}} axis = 1 : tensor<2x3x4xf32>
  %1 = graph.log_softmax %0 axis = 1 : tensor<2x3x4xf32>
  // CHECK: graph.layer_norm %{{.+}}, %{{.+}}, %{{.+}} eps = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %2 = graph.layer_norm %1, %g, %b eps = 1.0e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %2 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @movement
func.func @movement(%x: tensor<2x4x6xf32>, %y: tensor<2x1x6xf32>, %table: tensor<10x6xf32>, %ids: tensor<2x4xi64>)
    -> (tensor<6x2x4xf32>, tensor<4x12xf32>, tensor<2x2x3xf32>, tensor<2x5x6xf32>, tensor<2x4x6xf32>) {
  // CHECK: graph.transpose %{{.+}} perm [2, 0, 1] : (tensor<2x4x6xf32>) -> tensor<6x2x4xf32>
  %0 = graph.transpose %x perm [2, 0, 1] : (tensor<2x4x6xf32>) -> tensor<6x2x4xf32>
  // CHECK: graph.reshape %{{.+}} : (tensor<2x4x6xf32>) -> tensor<4x12xf32>
  %1 = graph.reshape %x : (tensor<2x4x6xf32>) -> tensor<4x12xf32>
  // CHECK: graph.slice %{{.+}} starts [0, 1, 3] limits [2, 3, 6] : (tensor<2x4x6xf32>) -> tensor<2x2x3xf32>
  %2 = graph.slice %x starts [0, 1, 3] limits [2, 3, 6] : (tensor<2x4x6xf32>) -> tensor<2x2x3xf32>
  // CHECK: graph.concat %{{.+}}, %{{.+}} axis = 1 : (tensor<2x4x6xf32>, tensor<2x1x6xf32>) -> tensor<2x5x6xf32>
  %3 = graph.concat %x, %y axis = 1 : (tensor<2x4x6xf32>, tensor<2x1x6xf32>) -> tensor<2x5x6xf32>
  // CHECK: graph.embedding %{{.+}}, %{{.+}} : (tensor<10x6xf32>, tensor<2x4xi64>) -> tensor<2x4x6xf32>
  %4 = graph.embedding %table, %ids : (tensor<10x6xf32>, tensor<2x4xi64>) -> tensor<2x4x6xf32>
  return %0, %1, %2, %3, %4 : tensor<6x2x4xf32>, tensor<4x12xf32>, tensor<2x2x3xf32>, tensor<2x5x6xf32>, tensor<2x4x6xf32>
}

// CHECK-LABEL: func.func @attention_and_loss
// CHECK-SAME: graph.param_shape = array<i64: 4, 12>
func.func @attention_and_loss(%s: tensor<2x3x5x5xf32>, %logits: tensor<2x5x7xf32>, %t: tensor<2x5xi64>,
                              %w: tensor<4x3x4xf32> {graph.param = "w", graph.param_shape = array<i64: 4, 12>})
    -> (tensor<2x3x5x5xf32>, tensor<f32>) {
  // CHECK: graph.causal_mask %{{.+}} : tensor<2x3x5x5xf32>
  %0 = graph.causal_mask %s : tensor<2x3x5x5xf32>
  // CHECK: graph.cross_entropy %{{.+}}, %{{.+}} : (tensor<2x5x7xf32>, tensor<2x5xi64>) -> tensor<f32>
  %1 = graph.cross_entropy %logits, %t : (tensor<2x5x7xf32>, tensor<2x5xi64>) -> tensor<f32>
  return %0, %1 : tensor<2x3x5x5xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%x: tensor<2x3x4xf32>, %dy: tensor<2x3x4xf32>, %g: tensor<4xf32>,
                     %ids: tensor<2x3xi64>, %s: tensor<2x5x5xf32>, %l: tensor<2x3x4xf32>, %dl: tensor<f32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<10x4xf32>,
        tensor<2x5x5xf32>, tensor<2x3x4xf32>) {
  // CHECK: graph.relu_grad %{{.+}}, %{{.+}} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %0 = graph.relu_grad %x, %dy : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: graph.gelu_grad %{{.+}}, %{{.+}} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = graph.gelu_grad %x, %0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: graph.softmax_grad %{{.+}}, %{{.+}} axis = 1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = graph.softmax_grad %x, %1 axis = 1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: %[[DX:.+]], %[[DSCALE:.+]], %[[DBIAS:.+]] = graph.layer_norm_grad %{{.+}}, %{{.+}}, %{{.+}} eps = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %3:3 = graph.layer_norm_grad %x, %g, %2 eps = 1.0e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: graph.embedding_grad %{{.+}}, %{{.+}} rows = 10 : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  %4 = graph.embedding_grad %ids, %3#0 rows = 10 : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  // CHECK: graph.causal_mask_grad %{{.+}} : tensor<2x5x5xf32>
  %5 = graph.causal_mask_grad %s : tensor<2x5x5xf32>
  // CHECK: graph.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x4xf32>
  %6 = graph.cross_entropy_grad %l, %ids, %dl : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x4xf32>
  return %2, %3#0, %6, %3#1, %4, %5, %1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<10x4xf32>, tensor<2x5x5xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @adjoints
func.func @adjoints(%x: tensor<2x3xf32>, %r: tensor<3x1xf32>) -> (tensor<3x6xf32>, tensor<2x3x4xf32>) {
  // CHECK: graph.pad %{{.+}} low [0, 1] high [1, 2] : (tensor<2x3xf32>) -> tensor<3x6xf32>
  %0 = graph.pad %x low [0, 1] high [1, 2] : (tensor<2x3xf32>) -> tensor<3x6xf32>
  // CHECK: graph.broadcast %{{.+}} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %1 = graph.broadcast %r : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %0, %1 : tensor<3x6xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%w: tensor<8xf32>, %dw: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %step: tensor<f32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[P:.+]], %[[VEL:.+]] = graph.sgd_update %{{.+}}, %{{.+}}, %{{.+}} lr = 1.000000e-01 momentum = 9.000000e-01 weight_decay = 0.000000e+00 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  %0:2 = graph.sgd_update %w, %dw, %m lr = 0.1 momentum = 0.9 weight_decay = 0.0 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  // CHECK: graph.adamw_update %[[P]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} lr = 1.000000e-03 beta1 = 9.000000e-01 beta2 = 0.99899999999999999 eps = 1.000000e-08 weight_decay = 1.000000e-02
  %1:3 = graph.adamw_update %0#0, %dw, %m, %v, %step lr = 1.0e-03 beta1 = 0.9 beta2 = 0.999 eps = 1.0e-08 weight_decay = 1.0e-02 : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %1#0, %1#1, %1#2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
