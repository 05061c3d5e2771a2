// Cases for tools/cuda-emu/cu2cpp.py (cuda-emu.test): what it must rewrite,
// and what it must leave alone.
template <typename A, typename B> struct Pair { A a; B b; };
/* no __shared__ memory here */
__global__ void k(float *out) {
  float total = 1.0f; // __shared__ in a comment, k<<<1, 2>>>(x)
  const char *s = "__shared__ x; <<<";
  __shared__ Pair<float, int> p[4], q;
  __shared__ union { float f[4]; int i[4]; } u;
  __shared__ [[maybe_unused]] float a[4];
  __shared__ __align__(16) float b[2][3], /* c, */ d;
  out[0] = total;
}
void host(float *x) { k<<<1, 2>>>(x); /* k<<<9>>> */ }
