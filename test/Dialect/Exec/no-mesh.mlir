// RUN: sbpc-opt %s --verify-diagnostics

// An exec op's layout parses in a module without any sbp op (the sbp
// dialect loads with exec's): the missing mesh is then an error, not a
// crash.
func.func @f() {
  // expected-error @+1 {{'exec.load' op needs an sbp.mesh in its module}}
  %x = exec.load "input" "x" global [4, 8] [B] : tensor<4x8xf32>
  return
}
