// RUN: sbpc-opt %s | sbpc-opt | FileCheck %s

// Every exec op prints and parses back.
// CHECK-LABEL: func.func @program()
// CHECK: exec.load "param" "w" global [8, 6] [S(0), B] {stored_shape = array<i64: 48>} : tensor<4x6xf32>
// CHECK: exec.all_reduce %{{.*}} axis 1 "sum" : tensor<4x6xf32>
// CHECK: exec.all_gather %{{.*}} axis 0 dim 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK: exec.reduce_scatter %{{.*}} axis 1 dim 1 "max" : tensor<8x6xf32> -> tensor<8x3xf32>
// CHECK: exec.all_to_all %{{.*}} axis 0 split 0 concat 1 : tensor<8x3xf32> -> tensor<4x6xf32>
// CHECK: exec.broadcast %{{.*}} axis 0 root 1 : tensor<4x6xf32>
// CHECK: exec.send %{{.*}} axis 0 to 1 tag 7 : tensor<4x6xf32>
// CHECK: exec.recv axis 0 from 1 tag 7 : tensor<4x6xf32>
// CHECK: exec.local_slice %{{.*}} axis 1 dim 0 : tensor<4x6xf32> -> tensor<2x6xf32>
// CHECK: exec.zero_pad %{{.*}} axis 1 dim 0 "sum" : tensor<2x6xf32> -> tensor<4x6xf32>
// CHECK: exec.keep_one %{{.*}} axis 1 : tensor<4x6xf32>
// CHECK: exec.store %{{.*}} "y" global [8, 6] [S(0), P(sum)] : tensor<4x6xf32>
// CHECK: exec.store %{{.*}} "w2" global [8, 6] [S(0), B] {stored_shape = array<i64: 48>} : tensor<4x6xf32>
// CHECK: exec.store %{{.*}} "z" global [8, 6] [S(0), B] rows [1, 2] : tensor<2x6xf32>
sbp.mesh @m axes ["a", "b"] shape [2, 2]
func.func @program() attributes {exec.ranks = array<i64: 0, 1, 2, 3>} {
  %w = exec.load "param" "w" global [8, 6] [S(0), B] {stored_shape = array<i64: 48>} : tensor<4x6xf32>
  %r = exec.all_reduce %w axis 1 "sum" : tensor<4x6xf32>
  %g = exec.all_gather %r axis 0 dim 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  %s = exec.reduce_scatter %g axis 1 dim 1 "max" : tensor<8x6xf32> -> tensor<8x3xf32>
  %a = exec.all_to_all %s axis 0 split 0 concat 1 : tensor<8x3xf32> -> tensor<4x6xf32>
  %b = exec.broadcast %a axis 0 root 1 : tensor<4x6xf32>
  exec.send %b axis 0 to 1 tag 7 : tensor<4x6xf32>
  %v = exec.recv axis 0 from 1 tag 7 : tensor<4x6xf32>
  %l = exec.local_slice %v axis 1 dim 0 : tensor<4x6xf32> -> tensor<2x6xf32>
  %z = exec.zero_pad %l axis 1 dim 0 "sum" : tensor<2x6xf32> -> tensor<4x6xf32>
  %k = exec.keep_one %z axis 1 : tensor<4x6xf32>
  exec.store %k "y" global [8, 6] [S(0), P(sum)] : tensor<4x6xf32>
  exec.store %w "w2" global [8, 6] [S(0), B] {stored_shape = array<i64: 48>} : tensor<4x6xf32>
  exec.store %l "z" global [8, 6] [S(0), B] rows [1, 2] : tensor<2x6xf32>
  return
}
