// Initial parameter values for generated models, deterministic from a seed.
#include "compiler/Gen/ModelGen.h"

#include "runtime/io/Safetensors.h"

#include <cmath>
#include <random>
#include <unistd.h>

namespace {
/// Normal variates from a seed that are the same on every platform
/// (std::normal_distribution is not).
class NormalSource {
public:
  explicit NormalSource(uint64_t seed) : engine(seed) {}
  float next(float stddev) {
    // Box-Muller on two uniforms in (0, 1].
    double u1 = (static_cast<double>(engine() >> 11) + 1.0) / 9007199254740992.0;
    double u2 = static_cast<double>(engine() >> 11) / 9007199254740992.0;
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(2.0 * M_PI * u2));
  }

private:
  std::mt19937_64 engine;
};
} // namespace

bool sbpc::checkParamMemory(const std::vector<ParamInit> &params, const std::string &path,
                            std::string &error) {
  double bytes = 0;
  for (const ParamInit &p : params)
    bytes += 4.0 * static_cast<double>(sbprt::numElements(p.storedShape));
  double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (bytes <= physical / 2)
    return true;
  error = path + ": the parameters need " + std::to_string(static_cast<int64_t>(bytes / 1e9)) +
          " GB, more than half of this machine's memory";
  return false;
}

bool sbpc::writeInitialParams(const std::vector<ParamInit> &params, const std::string &path,
                              uint64_t seed, std::string &error) {
  if (!checkParamMemory(params, path, error))
    return false;
  NormalSource normal(seed);
  std::vector<sbprt::Tensor> tensors;
  tensors.reserve(params.size());
  for (const ParamInit &p : params) {
    sbprt::Tensor &t = tensors.emplace_back(sbprt::DType::F32, p.storedShape);
    float *values = t.as<float>();
    for (int64_t i = 0; i < t.numElements(); ++i)
      values[i] = p.kind == ParamInit::Kind::Ones    ? 1.0f
                  : p.kind == ParamInit::Kind::Zeros ? 0.0f
                                                     : normal.next(p.stddev);
  }
  std::vector<std::pair<std::string, const sbprt::Tensor *>> refs;
  for (size_t i = 0; i < params.size(); ++i)
    refs.emplace_back(params[i].name, &tensors[i]);
  return sbprt::io::writeSafetensors(path, refs, error);
}
