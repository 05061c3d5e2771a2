// RUN: sbpc-opt %s --exec-fuse --split-input-file | FileCheck %s
// RUN: sbpc-opt %s --exec-fuse=attention=false --split-input-file | FileCheck %s --check-prefix=OFF

// bf16 attention whose probabilities only the product by the values reads
// (inference): the scores' product, the scaled causal softmax and the
// product by the values become one exec.attention, the region attribute
// the last product carried kept; a softmax without mask or scale too.
sbp.mesh @m axes ["x"] shape [1]
func.func @attention() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %k = exec.load "input" "k" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %v = exec.load "input" "v" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %s = exec.load "param" "s" global [] [B] : tensor<bf16>
  %0 = graph.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %1 = graph.mul %0, %s : (tensor<2x4x8x8xbf16>, tensor<bf16>) -> tensor<2x4x8x8xbf16>
  %2 = graph.causal_mask %1 : tensor<2x4x8x8xbf16>
  %3 = graph.softmax %2 axis = 3 : tensor<2x4x8x8xbf16>
  %4 = graph.matmul %3, %v {graph.region = "h.0"} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %4 "o" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  %5 = graph.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  %6 = graph.softmax %5 axis = 3 : tensor<2x4x8x8xbf16>
  %7 = graph.matmul %6, %v : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  exec.store %7 "plain" global [2, 4, 8, 16] [B] : tensor<2x4x8x16xbf16>
  return
}

// CHECK-LABEL: func.func @attention()
// CHECK: %[[Q:.*]] = exec.load "input" "q"
// CHECK: %[[K:.*]] = exec.load "input" "k"
// CHECK: %[[V:.*]] = exec.load "input" "v"
// CHECK: %[[S:.*]] = exec.load "param" "s"
// CHECK-NEXT: %[[O:.*]] = exec.attention %[[Q]], %[[K]], %[[V]] scale %[[S]] causal {graph.region = "h.0"} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<bf16>) -> tensor<2x4x8x16xbf16>
// CHECK-NEXT: exec.store %[[O]] "o"
// CHECK-NEXT: %[[P:.*]] = exec.attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
// CHECK-NEXT: exec.store %[[P]] "plain"
// CHECK-NOT: graph.matmul
// OFF-LABEL: func.func @attention()
// OFF-NOT: exec.attention
// OFF: exec.softmax

// -----

// What stays: probabilities a training step's backward reads too, f32,
// heads of an odd width (9) or wider than 128, values of another width.
sbp.mesh @m axes ["x"] shape [1]
func.func @stays() attributes {exec.ranks = array<i64: 0>} {
  %q = exec.load "input" "q" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %v = exec.load "input" "v" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  %0 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %1 = graph.causal_mask %0 : tensor<2x8x8xbf16>
  %2 = graph.softmax %1 axis = 2 : tensor<2x8x8xbf16>
  %3 = graph.matmul %2, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  exec.store %3 "o" global [2, 8, 16] [B] : tensor<2x8x16xbf16>
  exec.store %2 "probs" global [2, 8, 8] [B] : tensor<2x8x8xbf16>
  %f = exec.load "input" "f" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  %4 = graph.matmul %f, %f transpose_rhs : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %5 = graph.softmax %4 axis = 2 : tensor<2x8x8xf32>
  %6 = graph.matmul %5, %f : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  exec.store %6 "f32" global [2, 8, 16] [B] : tensor<2x8x16xf32>
  %n = exec.load "input" "n" global [2, 8, 9] [B] : tensor<2x8x9xbf16>
  %7 = graph.matmul %n, %n transpose_rhs : (tensor<2x8x9xbf16>, tensor<2x8x9xbf16>) -> tensor<2x8x8xbf16>
  %8 = graph.softmax %7 axis = 2 : tensor<2x8x8xbf16>
  %9 = graph.matmul %8, %n : (tensor<2x8x8xbf16>, tensor<2x8x9xbf16>) -> tensor<2x8x9xbf16>
  exec.store %9 "odd" global [2, 8, 9] [B] : tensor<2x8x9xbf16>
  %w = exec.load "input" "w" global [2, 8, 160] [B] : tensor<2x8x160xbf16>
  %10 = graph.matmul %w, %w transpose_rhs : (tensor<2x8x160xbf16>, tensor<2x8x160xbf16>) -> tensor<2x8x8xbf16>
  %11 = graph.softmax %10 axis = 2 : tensor<2x8x8xbf16>
  %12 = graph.matmul %11, %w : (tensor<2x8x8xbf16>, tensor<2x8x160xbf16>) -> tensor<2x8x160xbf16>
  exec.store %12 "wide" global [2, 8, 160] [B] : tensor<2x8x160xbf16>
  %u = exec.load "input" "u" global [2, 8, 32] [B] : tensor<2x8x32xbf16>
  %13 = graph.matmul %q, %q transpose_rhs : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %14 = graph.softmax %13 axis = 2 : tensor<2x8x8xbf16>
  %15 = graph.matmul %14, %u : (tensor<2x8x8xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x32xbf16>
  exec.store %15 "values" global [2, 8, 32] [B] : tensor<2x8x32xbf16>
  return
}

// CHECK-LABEL: func.func @stays()
// CHECK-NOT: exec.attention
// CHECK: return
