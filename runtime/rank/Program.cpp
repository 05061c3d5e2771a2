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
      manifest.loads.push_back({kind == "param", load.at("name").get<std::string>(),
                                load.at("stored_shape").get<std::vector<int64_t>>(), *type});
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
      manifest.outputs.push_back({name, *layout, stored, stage});
    }
  } catch (const std::exception &e) {
    error =
        path + ": not a program description written by sbpc compile (" + io::jsonErrorText(e) + ")";
    return std::nullopt;
  }
  return manifest;
}

bool assembleOutputs(
    const ProgramManifest &manifest, const std::string &programDir, const std::string &outputDir,
    const std::function<void(const std::string &, const std::vector<int64_t> &)> &wrote,
    std::string &error) {
  const Mesh &mesh = manifest.mesh;
  int64_t ranks = mesh.numDevices();
  std::string shards = outputDir + "/.shards";
  std::error_code ec;
  // Rank r's shard of `output`: a pipeline's comes from the ranks of the
  // stage that wrote it, read as the first stage's (the layout is B on
  // that axis); none for the other stages' ranks.
  auto writerOf = [&](const ProgramManifest::Output &output, int64_t r) -> int64_t {
    if (output.stage == 0)
      return r;
    std::vector<int64_t> coords = mesh.coordinates(r);
    if (coords.front() != 0)
      return -1;
    coords.front() = output.stage;
    return mesh.rankOf(coords);
  };
  auto shardPath = [&](const ProgramManifest::Output &output, int64_t writer) {
    return shards + "/" + output.name + ".rank" + std::to_string(writer) + ".npy";
  };
  // Where rank r's shard of `output` is read back from: a replica (B on
  // an axis) from the coordinate that wrote it (Mesh::replicaWriter), into
  // coordinate 0's place, which sim::assemble reads; -1 where nothing is
  // read (other coordinates of a replica, other stages).
  auto sourceOf = [&](const ProgramManifest::Output &output, int64_t r) -> int64_t {
    std::vector<int64_t> coords = mesh.coordinates(r);
    for (size_t axis = 0; axis < output.layout.size(); ++axis)
      if (output.layout[axis].isBroadcast()) {
        if (coords[axis] != 0)
          return -1;
        coords[axis] = mesh.replicaWriter(output.name, axis);
      }
    return writerOf(output, mesh.rankOf(coords));
  };
  // Every shard that is needed, before writing anything.
  for (const ProgramManifest::Output &output : manifest.outputs)
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t writer = sourceOf(output, r);
      if (writer >= 0 && !std::filesystem::exists(shardPath(output, writer), ec)) {
        error =
            "rank " + std::to_string(writer) + " wrote no shard of output '" + output.name + "'";
        return false;
      }
    }
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
    sim::Shards parts(ranks);
    for (int64_t r = 0; r < ranks; ++r)
      if (int64_t writer = sourceOf(output, r); writer >= 0)
        if (!io::readNpy(shardPath(output, writer), parts[r], error))
          return abandon();
    Tensor global = sim::assemble(parts, mesh, output.layout);
    if (!global.reshape(output.storedShape)) {
      error = "internal: output '" + output.name + "' assembled as " +
              shapeToString(global.shape()) + ", not as program.json says";
      return abandon();
    }
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
