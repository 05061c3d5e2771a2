// A compiled program as its ranks' caller sees it: what program.json says
// (the mesh, what the ranks load, the outputs they write), and the
// outputs put together from the shards the ranks wrote. Shared by
// `sbpc run DIR` and the bundle's own `bin/assemble`, which needs no sbpc.
#pragma once

#include "runtime/Layout.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sbprt::rank {

/// What a compiled directory's program.json says: the mesh, what the
/// programs load (parameters in their stored shape, inputs) and store.
struct ProgramManifest {
  struct Load {
    bool isParam;
    std::string name;
    std::vector<int64_t> storedShape;
    DType dtype;
    NdSbp layout;
    /// Its global shape (the stored shape, or a reshape of it).
    std::vector<int64_t> shape;
  };
  struct Output {
    std::string name;
    NdSbp layout;
    /// The shape of its file (its global shape, or a reshape of it).
    std::vector<int64_t> storedShape;
    /// The pipeline stage that writes it: its ranks' coordinate on the
    /// mesh's first axis, pp (0 without stages).
    int64_t stage = 0;
    /// Its global shape.
    std::vector<int64_t> shape;
  };
  Mesh mesh;
  std::vector<Load> loads;
  std::vector<Output> outputs;
};

/// Reads `dir`/program.json; nullopt with a one-line `error` where it is
/// missing or is not one sbpc compile wrote.
std::optional<ProgramManifest> readProgramManifest(const std::string &dir, std::string &error);

/// Puts `output` together from the shards the ranks wrote as
/// `dir`/NAME.rankR.npy, in its stored shape; false with a one-line
/// `error` where a rank wrote none.
bool assembleOutput(const ProgramManifest &manifest, const ProgramManifest::Output &output,
                    const std::string &dir, Tensor &global, std::string &error);

/// Puts each output together from the shards the ranks wrote under
/// `outputDir`/.shards (NAME.rankR.npy, a pipeline's from its stage's
/// ranks) as laid out, writes it as `outputDir`/NAME.npy in its stored
/// shape and calls `wrote` with the path and that shape; writes what each
/// rank measured (.shards/rankR.json) as `outputDir`/run.json, naming
/// `programDir` (as given); and removes .shards. False with a one-line
/// `error`, and no output written, where a rank wrote too little.
bool assembleOutputs(
    const ProgramManifest &manifest, const std::string &programDir, const std::string &outputDir,
    const std::function<void(const std::string &, const std::vector<int64_t> &)> &wrote,
    std::string &error);

} // namespace sbprt::rank
