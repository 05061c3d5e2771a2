// RUN: sbpc-opt %s | sbpc-opt | FileCheck %s
// RUN: sbpc-opt %s --mlir-print-op-generic | sbpc-opt | FileCheck %s

// Meshes, layouts, constraints and boxings survive a print/parse round trip.

// CHECK: sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
sbp.mesh @m axes ["dp", "tp"] shape [2, 4]
// CHECK: sbp.mesh @line axes ["x"] shape [3]
sbp.mesh @line axes ["x"] shape [3]

// CHECK-LABEL: func.func @layouts
func.func @layouts(%x: tensor<8x64xf32>, %ids: tensor<6x4xi64>) -> (tensor<8x64xf32>, tensor<6x4xi64>) {
  // CHECK: sbp.constraint %{{.+}} mesh @m [S(0), B] : tensor<8x64xf32>
  %0 = sbp.constraint %x mesh @m [S(0), B] : tensor<8x64xf32>
  // CHECK: sbp.boxing %{{.+}} mesh @m from [S(0), B] to [S(0), S(1)] : tensor<8x64xf32>
  %1 = sbp.boxing %0 mesh @m from [S(0), B] to [S(0), S(1)] : tensor<8x64xf32>
  // CHECK: sbp.boxing %{{.+}} mesh @m from [P(max), B] to [B, B] : tensor<8x64xf32>
  %m = sbp.boxing %1 mesh @m from [P(max), B] to [B, B] : tensor<8x64xf32>
  // CHECK: sbp.boxing %{{.+}} mesh @m from [P(sum), P(sum)] to [B, B]
  // CHECK-SAME: bytes_per_rank = 3072 : i64, collective = "all-reduce", reason = "consumer needs [B, B]"
  %2 = sbp.boxing %1 mesh @m from [P(sum), P(sum)] to [B, B] {collective = "all-reduce", bytes_per_rank = 3072 : i64, reason = "consumer needs [B, B]"} : tensor<8x64xf32>
  // Two mesh axes may split the same dimension when it divides their product.
  // CHECK: sbp.constraint %{{.+}} mesh @m [S(1), S(1)] : tensor<8x64xf32>
  %3 = sbp.constraint %2 mesh @m [S(1), S(1)] : tensor<8x64xf32>
  // CHECK: sbp.constraint %{{.+}} mesh @line [S(0)] : tensor<6x4xi64>
  %4 = sbp.constraint %ids mesh @line [S(0)] : tensor<6x4xi64>
  return %3, %4 : tensor<8x64xf32>, tensor<6x4xi64>
}

// Layouts as standalone attributes.
// CHECK-LABEL: func.func @attrs
// CHECK-SAME: layout = #sbp.nd<[S(2), P(sum)]>
// CHECK-SAME: one = #sbp.sbp<P(max)>
func.func @attrs() attributes {layout = #sbp.nd<[S(2), P(sum)]>, one = #sbp.sbp<P(max)>} {
  return
}
