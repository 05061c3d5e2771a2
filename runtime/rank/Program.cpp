#include "runtime/rank/Program.h"

#include "runtime/io/JsonText.h"
#include "runtime/io/Npy.h"
#include "runtime/sim/SimulatedMesh.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

namespace sbprt::rank {

std::optional<ProgramManifest> readProgramManifest(const std::string &dir, std::string &error) {
  std::string path = dir + "/program.json";
  std::ifstream file(path);
  std::error_code ec;
  if (!file || std::filesystem::is_directory(path, ec)) {
    error = dir + " is not a compiled program (no program.json; compile with --target cpu or cuda)";
    return std::nullopt;
  }
  ProgramManifest manifest;
  // A hand-edited or foreign file is an error, not an exception.
  try {
    nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
    if (json.is_discarded())
      throw std::runtime_error("not JSON");
    if (json.at("version") != 1)
      throw std::runtime_error("version " + json.at("version").dump() + ", expected 1");
    if (json.at("target") != "cpu" && json.at("target") != "cuda")
      throw std::runtime_error("target " + json.at("target").dump() + ", expected cpu or cuda");
    manifest.mesh = {json.at("mesh").at("axes").get<std::vector<std::string>>(),
                     json.at("mesh").at("shape").get<std::vector<int64_t>>()};
    std::string problem = checkMesh(manifest.mesh);
    if (!problem.empty())
      throw std::runtime_error(problem);
    if (json.at("ranks").get<int64_t>() != manifest.mesh.numDevices())
      throw std::runtime_error("its rank count is not its mesh's");
    for (const nlohmann::json &load : json.at("loads")) {
      std::string kind = load.at("kind").get<std::string>();
      if (kind != "param" && kind != "input")
        throw std::runtime_error("a load of kind '" + kind + "'");
      std::string dtype = load.at("dtype").get<std::string>();
      std::optional<DType> type = dtypeFromName(dtype);
      if (!type)
        throw std::runtime_error("a load of dtype '" + dtype + "'");
      std::string name = load.at("name").get<std::string>();
      std::optional<NdSbp> layout = parseLayout(load.at("layout").get<std::string>());
      if (!layout)
        throw std::runtime_error("load '" + name + "' has no layout");
      auto stored = load.at("stored_shape").get<std::vector<int64_t>>();
      manifest.loads.push_back(
          {kind == "param", name, stored, *type, *layout, load.value("shape", stored)});
    }
    std::set<std::string> names;
    for (const nlohmann::json &output : json.at("outputs")) {
      std::string name = output.at("name").get<std::string>();
      if (!names.insert(name).second)
        throw std::runtime_error("output '" + name + "' twice");
      std::optional<NdSbp> layout = parseLayout(output.at("layout").get<std::string>());
      if (!layout)
        throw std::runtime_error("output '" + name + "' has no layout");
      auto shape = output.at("shape").get<std::vector<int64_t>>();
      bool isFloat = output.value("dtype", "float32").find("float") != std::string::npos;
      if (std::string wrong = checkLayout(manifest.mesh, *layout, shape, isFloat); !wrong.empty())
        throw std::runtime_error("output '" + name + "' of shape " + shapeToString(shape) +
                                 ": layout " + toString(*layout) + ": " + wrong);
      auto stored = output.value("stored_shape", shape);
      if (numElements(stored) != numElements(shape))
        throw std::runtime_error("output '" + name + "' of shape " + shapeToString(shape) +
                                 " stored as " + shapeToString(stored) +
                                 ", another number of elements");
      int64_t stage = output.value("stage", int64_t(0));
      if (stage < 0 || (stage > 0 && stage >= manifest.mesh.shape.front()))
        throw std::runtime_error("output '" + name + "' of stage " + std::to_string(stage) +
                                 ", not a coordinate of the mesh's first axis");
      manifest.outputs.push_back({name, *layout, stored, stage, shape});
    }
  } catch (const std::exception &e) {
    error =
        path + ": not a program description written by sbpc compile (" + io::jsonErrorText(e) + ")";
    return std::nullopt;
  }
  return manifest;
}

namespace {

/// The rank whose shard of `output` stands for rank r's, or -1 where no
/// shard is read: a pipeline's outputs come from the ranks of the stage
/// that wrote them, read as the first stage's (the layout is B on that
/// axis); a replica (B on an axis) from the coordinate that wrote it
/// (Mesh::replicaWriter), into coordinate 0's place, which sim::assemble
/// reads.
int64_t shardSource(const Mesh &mesh, const ProgramManifest::Output &output, int64_t r) {
  std::vector<int64_t> coords = mesh.coordinates(r);
  for (size_t axis = 0; axis < output.layout.size(); ++axis)
    if (output.layout[axis].isBroadcast()) {
      if (coords[axis] != 0)
        return -1;
      coords[axis] = mesh.replicaWriter(output.name, axis);
    }
  if (output.stage == 0)
    return mesh.rankOf(coords);
  if (coords.front() != 0)
    return -1;
  coords.front() = output.stage;
  return mesh.rankOf(coords);
}

std::string shardPath(const std::string &dir, const std::string &name, int64_t writer) {
  return dir + "/" + name + ".rank" + std::to_string(writer) + ".npy";
}

/// Whether every shard of `output` is in `dir`; else `error` names a rank
/// that wrote none.
bool hasShards(const Mesh &mesh, const ProgramManifest::Output &output, const std::string &dir,
               std::string &error) {
  std::error_code ec;
  for (int64_t r = 0; r < mesh.numDevices(); ++r) {
    int64_t writer = shardSource(mesh, output, r);
    if (writer >= 0 && !std::filesystem::exists(shardPath(dir, output.name, writer), ec)) {
      error = "rank " + std::to_string(writer) + " wrote no shard of output '" + output.name + "'";
      return false;
    }
  }
  return true;
}

} // namespace

bool assembleOutput(const ProgramManifest &manifest, const ProgramManifest::Output &output,
                    const std::string &dir, Tensor &global, std::string &error) {
  const Mesh &mesh = manifest.mesh;
  if (!hasShards(mesh, output, dir, error))
    return false;
  sim::Shards parts(mesh.numDevices());
  for (int64_t r = 0; r < mesh.numDevices(); ++r)
    if (int64_t writer = shardSource(mesh, output, r); writer >= 0)
      if (!io::readNpy(shardPath(dir, output.name, writer), parts[r], error))
        return false;
  global = sim::assemble(parts, mesh, output.layout);
  if (!global.reshape(output.storedShape)) {
    error = "internal: output '" + output.name + "' assembled as " + shapeToString(global.shape()) +
            ", not as program.json says";
    return false;
  }
  return true;
}

bool assembleOutputs(
    const ProgramManifest &manifest, const std::string &programDir, const std::string &outputDir,
    const std::function<void(const std::string &, const std::vector<int64_t> &)> &wrote,
    std::string &error) {
  int64_t ranks = manifest.mesh.numDevices();
  std::string shards = outputDir + "/.shards";
  std::error_code ec;
  // Every shard that is needed, before writing anything.
  for (const ProgramManifest::Output &output : manifest.outputs)
    if (!hasShards(manifest.mesh, output, shards, error))
      return false;
  nlohmann::json measured = nlohmann::json::array();
  for (int64_t r = 0; r < ranks; ++r) {
    std::ifstream stats(shards + "/rank" + std::to_string(r) + ".json");
    nlohmann::json entry = nlohmann::json::parse(stats, nullptr, false);
    if (entry.is_discarded()) {
      error = "rank " + std::to_string(r) + " wrote no measurements";
      return false;
    }
    measured.push_back(entry);
  }
  // Each output is written beside its place and moved there once all are
  // (a shard that cannot be read leaves none of them).
  std::vector<std::pair<std::string, std::vector<int64_t>>> written;
  auto abandon = [&] {
    for (const auto &[path, shape] : written)
      std::filesystem::remove(path + ".partial", ec);
    return false;
  };
  for (const ProgramManifest::Output &output : manifest.outputs) {
    Tensor global;
    if (!assembleOutput(manifest, output, shards, global, error))
      return abandon();
    std::string path = outputDir + "/" + output.name + ".npy";
    written.push_back({path, global.shape()});
    if (!io::writeNpy(path + ".partial", global, error))
      return abandon();
  }
  std::string runPath = outputDir + "/run.json";
  std::ofstream run(runPath);
  run << nlohmann::json{{"program", programDir}, {"ranks", measured}}.dump(2) << "\n";
  run.close();
  if (!run) {
    error = runPath + ": cannot write";
    return abandon();
  }
  for (const auto &[path, shape] : written) {
    std::filesystem::rename(path + ".partial", path, ec);
    if (ec) {
      error = path + ": cannot write: " + ec.message();
      return abandon();
    }
    wrote(path, shape);
  }
  std::filesystem::remove_all(shards, ec);
  return true;
}

} // namespace sbprt::rank
