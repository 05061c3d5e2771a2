module {
  func.func @f() {
    %0 = exec.load "input" "x" global [2] [B] : tensor<2xf32>
    return
  }
}
