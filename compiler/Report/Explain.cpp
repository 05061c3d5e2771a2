// `sbpc explain`: report.json for a person.
#include "compiler/Report/Report.h"
#include "compiler/Support/Diagnostics.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using nlohmann::json;

namespace {

std::string secondsText(double s) {
  if (s >= 1)
    return llvm::formatv("{0:f2} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:f2} ms", s * 1e3).str();
  return llvm::formatv("{0:f2} us", s * 1e6).str();
}

/// Checks that `object` has every field in `fields`; names the first missing.
bool require(const json &object, std::initializer_list<const char *> fields,
             const std::string &where, std::string &error) {
  if (!object.is_object()) {
    error = where + " is not an object";
    return false;
  }
  for (const char *field : fields)
    if (!object.contains(field)) {
      error = where + " has no '" + field + "'";
      return false;
    }
  return true;
}

/// What a report's field holds where it is present: the fields explain
/// reads, by path (keys joined by '.'; "[]" after a key: each element of
/// that array; "*": each member of an object). A field of another type
/// is an error naming it, not a zero printed or a library's exception.
struct Kind {
  const char *name;
  bool (*holds)(const json &);
};
constexpr Kind kObject{"an object", [](const json &v) { return v.is_object(); }};
constexpr Kind kArray{"an array", [](const json &v) { return v.is_array(); }};
constexpr Kind kNumber{"a number", [](const json &v) { return v.is_number(); }};
constexpr Kind kString{"a string", [](const json &v) { return v.is_string(); }};
constexpr Kind kBoolean{"true or false", [](const json &v) { return v.is_boolean(); }};
struct Field {
  const char *path;
  const Kind &kind;
};
constexpr Field kFields[] = {
    {"model", kString},
    {"precision", kString},
    {"cluster", kObject},
    {"cluster.name", kString},
    {"cluster.device_memory_bytes", kNumber},
    {"mesh.spec", kString},
    {"strategy", kObject},
    {"strategy.name", kString},
    {"strategy.source", kString},
    {"search", kObject},
    {"search.algorithm", kString},
    {"search.start", kString},
    {"search.wall_seconds", kNumber},
    {"search.plan_seconds", kNumber},
    {"search.candidates_evaluated", kNumber},
    {"search.tied_copies", kNumber},
    {"ops[]", kObject},
    {"ops[].op", kString},
    {"ops[].location", kString},
    {"ops[].results", kArray},
    {"ops[].results[]", kObject},
    {"ops[].results[].sbp", kString},
    {"ops[].est_time_s", kNumber},
    {"ops[].stage", kNumber},
    {"ops[].micro_batch", kNumber},
    {"ops[].micro_batches", kNumber},
    {"ops[].runner_up", kObject},
    {"ops[].runner_up.plan_time_s", kNumber},
    {"ops[].runner_up.results", kArray},
    {"ops[].runner_up.results[]", kString},
    {"boxings[]", kObject},
    {"boxings[].from", kString},
    {"boxings[].to", kString},
    {"boxings[].collective", kString},
    {"boxings[].mesh_axes", kArray},
    {"boxings[].mesh_axes[]", kString},
    {"boxings[].value", kString},
    {"boxings[].reason", kString},
    {"boxings[].bytes_per_rank", kNumber},
    {"boxings[].est_time_s", kNumber},
    {"boxings[].element_bytes", kNumber},
    {"boxings[].micro_batch", kNumber},
    {"boxings[].micro_batches", kNumber},
    {"fused_ops", kObject},
    {"fused_ops.*", kObject},
    {"fused_ops.*.*", kNumber},
    {"zero", kObject},
    {"zero.stage", kNumber},
    {"zero.axes", kArray},
    {"zero.axes[]", kString},
    {"zero.sharded_updates", kNumber},
    {"zero.updates", kNumber},
    {"zero.param_bytes_per_rank", kNumber},
    {"zero.gradient_bytes_per_rank", kNumber},
    {"zero.optimizer_state_bytes_per_rank", kNumber},
    {"pipeline", kObject},
    {"pipeline.stages", kNumber},
    {"pipeline.axis", kString},
    {"pipeline.schedule", kString},
    {"pipeline.chunks", kNumber},
    {"pipeline.cut", kObject},
    {"pipeline.cut.by", kString},
    {"pipeline.cut.fastest_cut_slowest_forward_s", kNumber},
    {"pipeline.cut.slowest_forward_s", kNumber},
    {"pipeline.cut.memory_limit_bytes", kNumber},
    {"pipeline.cut.fastest_cut_fullest_bytes", kNumber},
    {"pipeline.per_stage", kArray},
    {"pipeline.per_stage[]", kObject},
    {"pipeline.per_stage[].stage", kNumber},
    {"pipeline.per_stage[].ranks", kArray},
    {"pipeline.per_stage[].ranks[]", kNumber},
    {"pipeline.per_stage[].blocks", kArray},
    {"pipeline.per_stage[].blocks[]", kString},
    {"pipeline.per_stage[].compute_time_s", kNumber},
    {"pipeline.per_stage[].comm_time_s", kNumber},
    {"pipeline.per_stage[].comm_bytes_per_rank", kNumber},
    {"pipeline.per_stage[].peak_memory_bytes", kNumber},
    {"pipeline.transfers", kArray},
    {"pipeline.transfers[]", kObject},
    {"pipeline.transfers[].value", kString},
    {"pipeline.transfers[].sbp", kString},
    {"pipeline.transfers[].reason", kString},
    {"pipeline.transfers[].from_stage", kNumber},
    {"pipeline.transfers[].to_stage", kNumber},
    {"pipeline.transfers[].bytes_per_rank", kNumber},
    {"pipeline.transfers[].est_time_s", kNumber},
    {"totals.comm_bytes_per_rank", kNumber},
    {"totals.estimated_step_time_s", kNumber},
    {"totals.peak_memory_bytes", kNumber},
    {"totals.arena_bytes_per_rank", kNumber},
    {"totals.flash_attention_saved_bytes", kNumber},
    {"totals.fits_device_memory", kBoolean},
};
/// A peak of memory's fields (totals.peak_memory, and each stage's).
constexpr Field kPeakFields[] = {
    {"", kObject},
    {"at", kObject},
    {"at.op", kString},
    {"at.location", kString},
    {"at.micro_batch", kNumber},
    {"stage", kNumber},
    {"arguments_bytes", kNumber},
    {"activations_bytes", kNumber},
    {"largest_live", kArray},
    {"largest_live[]", kObject},
    {"largest_live[].value", kString},
    {"largest_live[].shape", kArray},
    {"largest_live[].shape[]", kNumber},
    {"largest_live[].sbp", kString},
    {"largest_live[].op", kString},
    {"largest_live[].location", kString},
    {"largest_live[].micro_batch", kNumber},
    {"largest_live[].bytes", kNumber},
};

/// `v` as JSON, cut to 40 characters: what a message shows of a value
/// that may be a whole array.
std::string shown(const json &v) {
  std::string text = v.dump();
  if (text.size() <= 40)
    return text;
  size_t cut = 37; // (not inside a UTF-8 character)
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return text.substr(0, cut) + "...";
}

/// Checks the fields `path` names under `v` (named `where`), where
/// present, hold `kind`.
bool checkField(const json &v, llvm::StringRef path, const Kind &kind, const std::string &where,
                std::string &error) {
  if (path.empty()) {
    if (kind.holds(v))
      return true;
    error = where + " is " + shown(v) + ", not " + kind.name;
    return false;
  }
  auto [head, rest] = path.split('.');
  bool each = head.consume_back("[]");
  if (!v.is_object()) // its own entry says so
    return true;
  std::vector<std::pair<std::string, const json *>> fields;
  auto name = [&](const std::string &key) { return where.empty() ? key : where + "." + key; };
  if (head == "*") {
    for (const auto &[key, member] : v.items())
      fields.push_back({name(key), &member});
  } else if (v.contains(head)) {
    fields.push_back({name(head.str()), &v[head.str()]});
  }
  for (const auto &[field, value] : fields) {
    if (!each) {
      if (!checkField(*value, rest, kind, field, error))
        return false;
      continue;
    }
    for (size_t i = 0; value->is_array() && i < value->size(); ++i)
      if (!checkField((*value)[i], rest, kind, field + "[" + std::to_string(i) + "]", error))
        return false;
  }
  return true;
}

template <size_t N>
bool checkFields(const json &v, const Field (&fields)[N], const std::string &where,
                 std::string &error) {
  for (const Field &field : fields)
    if (!checkField(v, field.path, field.kind, where, error))
      return false;
  return true;
}

std::string str(const json &v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
double num(const json &v) { return v.is_number() ? v.get<double>() : 0.0; }

/// [2, 4, 8] as it is written everywhere else.
std::string shapeText(const json &shape) {
  std::string text = "[";
  for (size_t i = 0; shape.is_array() && i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(static_cast<int64_t>(num(shape[i])));
  return text + "]";
}

} // namespace

/// ", in each of 16 micro-batches" where an entry stands for more than one
/// micro-batch's op, ", micro-batch 3" where it is a later one's alone.
static std::string microBatchesText(const json &entry) {
  std::string text;
  if (entry.contains("micro_batches"))
    text = ", in each of " + std::to_string(static_cast<int64_t>(num(entry["micro_batches"]))) +
           " micro-batches";
  if (entry.contains("micro_batch"))
    text += (text.empty() ? ", micro-batch " : " from micro-batch ") +
            std::to_string(static_cast<int64_t>(num(entry["micro_batch"])));
  return text;
}

/// Where a peak of memory is and what makes it (a report's peak_memory):
/// "peak at graph.softmax_grad (m.mlir:34:11, micro-batch 1): parameters
/// and inputs 3.9 GiB, activations 80.3 GiB", then the largest value live
/// there on the same line (`largest` 1) or up to `largest` of them, one
/// per line. Reports before these fields print nothing.
static void printPeak(llvm::raw_ostream &os, const json &peak, const std::string &indent,
                      size_t largest) {
  if (!peak.is_object() || !peak.contains("at"))
    return;
  auto microBatch = [](const json &entry) {
    int64_t mb = static_cast<int64_t>(num(entry.value("micro_batch", json(0))));
    return mb > 0 ? ", micro-batch " + std::to_string(mb) : std::string();
  };
  // "%3 [2, 8] [S(0)] (graph.matmul at m.mlir:4:8, micro-batch 1): 1.0 KiB"
  auto valueText = [&](const json &v, bool where) {
    return llvm::formatv("{0} {1} {2} ({3}{4}): {5}", str(v.value("value", json("?"))),
                         shapeText(v.value("shape", json::array())), str(v.value("sbp", json("?"))),
                         str(v.value("op", json("?"))),
                         where ? " at " + str(v.value("location", json("?"))) + microBatch(v)
                               : std::string(),
                         sbpc::bytesText(num(v.value("bytes", json(0)))))
        .str();
  };
  const json &at = peak["at"];
  os << indent << "peak at " << str(at.value("op", json("?"))) << " ("
     << str(at.value("location", json("?"))) << microBatch(at) << ")";
  if (peak.contains("stage"))
    os << " on stage " << static_cast<int64_t>(num(peak["stage"]));
  os << ": parameters and inputs " << sbpc::bytesText(num(peak.value("arguments_bytes", json(0))))
     << ", activations " << sbpc::bytesText(num(peak.value("activations_bytes", json(0))));
  const json live = peak.value("largest_live", json::array());
  if (live.empty()) {
    os << "\n";
  } else if (largest == 1) {
    os << "; largest " << valueText(live[0], false) << "\n";
  } else {
    os << "; largest then:\n";
    for (size_t i = 0; i < live.size() && i < largest; ++i)
      os << indent << "  " << i + 1 << ". " << valueText(live[i], true) << "\n";
  }
}

mlir::LogicalResult sbpc::explainReport(const json &report, llvm::raw_ostream &os,
                                        std::string &error) {
  // Versions 1 and 2 are the schemas this reads (docs/report.md: 2 folds
  // the ops and boxings of later micro-batches); a report of another is
  // not guessed at.
  if (report.is_object() && report.contains("version") && report["version"] != 1 &&
      report["version"] != 2) {
    error = "version " + shown(report["version"]) + ", expected 1 or 2";
    return mlir::failure();
  }
  if (!require(report, {"mesh", "strategy", "search", "ops", "boxings", "totals"}, "the report",
               error) ||
      !require(report["totals"],
               {"comm_bytes_per_rank", "estimated_step_time_s", "peak_memory_bytes"}, "totals",
               error) ||
      !require(report["mesh"], {}, "mesh", error) || !report["ops"].is_array() ||
      !report["boxings"].is_array()) {
    if (error.empty())
      error = "'ops' and 'boxings' must be arrays";
    return mlir::failure();
  }
  if (!checkFields(report, kFields, "", error))
    return mlir::failure();
  std::vector<std::pair<std::string, const json *>> peaks;
  if (report["totals"].contains("peak_memory"))
    peaks.push_back({"totals.peak_memory", &report["totals"]["peak_memory"]});
  const json *stages = report.contains("pipeline") && report["pipeline"].contains("per_stage")
                           ? &report["pipeline"]["per_stage"]
                           : nullptr;
  if (stages)
    for (const auto &[i, stage] : llvm::enumerate(*stages)) {
      std::string where = "pipeline.per_stage[" + std::to_string(i) + "]";
      if (stage.contains("ranks") && stage["ranks"].size() != 2) {
        error = where + ".ranks is " + shown(stage["ranks"]) + ", not its first and last rank";
        return mlir::failure();
      }
      if (stage.contains("peak_memory"))
        peaks.push_back({where + ".peak_memory", &stage["peak_memory"]});
    }
  for (const auto &[where, peak] : peaks)
    if (!checkFields(*peak, kPeakFields, where, error))
      return mlir::failure();
  const json &mesh = report["mesh"], &strategy = report["strategy"], &search = report["search"];
  os << "Plan for " << str(report.value("model", json("the model"))) << " on mesh "
     << str(mesh.value("spec", json("?"))) << " (cluster "
     << str(report.value("cluster", json::object()).value("name", json("?")))
     << (report.value("precision", json("f32")) == "bf16" ? ", bf16" : "") << ")\n"
     << "  strategy " << str(strategy.value("name", json("?"))) << " ("
     << str(strategy.value("source", json("?"))) << "), laid out by "
     << str(search.value("algorithm", json("?"))) << " in "
     << secondsText(num(search.value("wall_seconds", json(0)))) << "\n";
  if (search.contains("candidates_evaluated") && search.contains("plan_seconds")) {
    os << "  the search costed " << static_cast<uint64_t>(num(search["candidates_evaluated"]))
       << " candidates; its plan: " << secondsText(num(search["plan_seconds"]));
    // Where auto's plan came from (report.search.start).
    std::string start = str(search.value("start", json("")));
    if (search.value("algorithm", json("")) == "auto") {
      if (start == "exact")
        os << ", solved exactly";
      else if (start == "drec")
        os << ", improved from D-Rec's plan";
      else if (start == "axis-by-axis")
        os << ", improved from an axis-by-axis exact solve";
      else if (!start.empty())
        os << ", improved from strategy " << start << "'s plan";
    }
    // Micro-batches searched as one (report.search.tied_copies).
    if (auto tied = static_cast<uint64_t>(num(search.value("tied_copies", json(0)))))
      os << "; " << tied << " ops of later micro-batches laid out as micro-batch 0's";
    os << "\n";
  }
  os << "\n";

  os << "Layouts, op by op (result layout; operands that differ are boxed first):\n";
  for (const json &op : report["ops"]) {
    if (!require(op, {"op", "location", "results", "est_time_s"}, "an op", error))
      return mlir::failure();
    std::string layouts;
    for (const json &r : op["results"])
      layouts += (layouts.empty() ? "" : " ") + str(r.value("sbp", json("?")));
    os << llvm::formatv("  {0,-24} {1,-22} {2,-20} {3}{4}{5}\n", str(op["location"]), str(op["op"]),
                        layouts, secondsText(num(op["est_time_s"])), microBatchesText(op),
                        op.contains("stage")
                            ? ", stage " + std::to_string(static_cast<int64_t>(num(op["stage"])))
                            : std::string());
  }

  // The closest calls: ops whose best alternative costs the plan least.
  if (search.contains("plan_seconds")) {
    std::vector<std::pair<double, const json *>> calls;
    for (const json &op : report["ops"])
      if (op.contains("runner_up") && op["runner_up"].contains("plan_time_s"))
        calls.push_back({num(op["runner_up"]["plan_time_s"]) - num(search["plan_seconds"]), &op});
    std::stable_sort(calls.begin(), calls.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    if (!calls.empty())
      os << "\nClosest calls (the runner-up signature of the ops where it costs least more):\n";
    for (size_t i = 0; i < calls.size() && i < 5; ++i) {
      const json &op = *calls[i].second;
      std::string chosen, other;
      for (const json &r : op["results"])
        chosen += (chosen.empty() ? "" : " ") + str(r.value("sbp", json("?")));
      for (const json &r : op["runner_up"].value("results", json::array()))
        other += (other.empty() ? "" : " ") + str(r);
      os << llvm::formatv("  {0,-24} {1,-22} {2} rather than {3}: +{4}\n", str(op["location"]),
                          str(op["op"]), chosen, other, secondsText(calls[i].first));
    }
  }

  std::vector<json> reshards(report["boxings"].begin(), report["boxings"].end());
  for (const json &b : reshards)
    if (!require(b, {"from", "to", "collective", "mesh_axes", "bytes_per_rank", "reason"},
                 "a boxing", error))
      return mlir::failure();
  // Costliest first: estimated time, then bytes.
  std::stable_sort(reshards.begin(), reshards.end(), [](const json &a, const json &b) {
    auto key = [](const json &x) {
      return std::make_pair(num(x.value("est_time_s", json(0))), num(x["bytes_per_rank"]));
    };
    return key(a) > key(b);
  });
  size_t count = 0;
  for (const json &b : reshards)
    count += static_cast<size_t>(num(b.value("micro_batches", json(1))));
  os << "\nReshards, costliest first (" << count;
  if (count != reshards.size())
    os << "; " << reshards.size() << " kinds, those of later micro-batches folded";
  os << "):\n";
  if (reshards.empty())
    os << "  none: every op finds its operands laid out as it needs\n";
  for (size_t i = 0; i < reshards.size(); ++i) {
    const json &b = reshards[i];
    std::string axes;
    for (const json &a : b["mesh_axes"])
      axes += (axes.empty() ? "" : ", ") + str(a);
    bool bf16 = num(b.value("element_bytes", json(4))) == 2;
    os << llvm::formatv("  {0}. {1} over {2}: {3} -> {4} of {5}, {6} per rank{7}, {8}{9}\n",
                        i + 1, str(b["collective"]), axes.empty() ? "no axis" : axes,
                        str(b["from"]), str(b["to"]), str(b.value("value", json("?"))),
                        bytesText(num(b["bytes_per_rank"])), bf16 ? " in bf16" : "",
                        secondsText(num(b.value("est_time_s", json(0)))), microBatchesText(b))
       << "     why: " << str(b["reason"]) << "\n";
  }
  if (report.contains("fused_ops") && report["fused_ops"].is_object()) {
    os << "\nFused ops (--exec-fuse), per program:\n";
    for (const auto &[program, counts] : report["fused_ops"].items()) {
      std::string line;
      if (counts.is_object())
        for (const auto &[op, count] : counts.items())
          line += (line.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(num(count))) +
                  " " + op;
      os << "  " << program << ": " << (line.empty() ? "none" : line) << "\n";
    }
  }
  // What --sbp-zero did (report.zero), and a word where it could do nothing.
  if (report.contains("zero") && report["zero"].is_object()) {
    const json &zero = report["zero"];
    auto stage = static_cast<int64_t>(num(zero.value("stage", json(0))));
    std::string axes;
    for (const json &a : zero.value("axes", json::array()))
      axes += (axes.empty() ? "" : ", ") + str(a);
    os << "\nZeRO stage " << stage;
    if (stage > 0 && axes.empty())
      os << ": nothing sharded, as the plan splits no input's batch on any mesh axis (no "
            "data-parallel axis)\n";
    else
      os << (axes.empty() ? "" : " on " + axes) << ": "
         << static_cast<int64_t>(num(zero.value("sharded_updates", json(0)))) << " of "
         << static_cast<int64_t>(num(zero.value("updates", json(0))))
         << " optimizer updates split on a data-parallel axis; per rank, parameters "
         << bytesText(num(zero.value("param_bytes_per_rank", json(0)))) << ", gradients "
         << bytesText(num(zero.value("gradient_bytes_per_rank", json(0))))
         << ", optimizer states "
         << bytesText(num(zero.value("optimizer_state_bytes_per_rank", json(0)))) << "\n";
  }
  // The stages of a pipeline (report.pipeline) and what crosses between them.
  if (report.contains("pipeline") && report["pipeline"].is_object()) {
    const json &pipeline = report["pipeline"];
    os << "\nPipeline: " << static_cast<int64_t>(num(pipeline.value("stages", json(0))))
       << " stages on axis " << str(pipeline.value("axis", json("pp"))) << ", schedule "
       << str(pipeline.value("schedule", json("?")));
    if (int64_t chunks = static_cast<int64_t>(num(pipeline.value("chunks", json(1)))); chunks > 1)
      os << ", " << chunks << " chunks a stage";
    os << "\n";
    // A cut made for memory: what the fastest would have needed, and what
    // fitting costs.
    json cut = pipeline.value("cut", json::object());
    if (!cut.is_object())
      cut = json::object();
    if (str(cut.value("by", json(""))) == "memory") {
      double fastest = num(cut.value("fastest_cut_slowest_forward_s", json(0)));
      double slowest = num(cut.value("slowest_forward_s", json(0)));
      os << "  cut to fit device memory ("
         << bytesText(num(cut.value("memory_limit_bytes", json(0))))
         << "): the fastest cut's fullest stage would need about "
         << bytesText(num(cut.value("fastest_cut_fullest_bytes", json(0))));
      if (fastest > 0 && slowest > 0)
        os << llvm::formatv("; its slowest stage's forward takes {0:F1}% longer",
                            100 * (slowest / fastest - 1));
      os << "\n";
    }
    for (const json &stage : pipeline.value("per_stage", json::array())) {
      const json ranks = stage.value("ranks", json::array({0, 0}));
      // Its blocks: all of a few, else the first two and the last.
      std::vector<std::string> blocks;
      for (const json &block : stage.value("blocks", json::array()))
        blocks.push_back(str(block));
      std::string held;
      for (size_t i = 0; i < blocks.size(); ++i)
        if (blocks.size() <= 4 || i < 2 || i + 1 == blocks.size())
          held += (held.empty()                                  ? ""
                   : i == blocks.size() - 1 && blocks.size() > 4 ? " .. "
                                                                 : ", ") +
                  blocks[i];
      if (blocks.size() > 4)
        held += " (" + std::to_string(blocks.size()) + " blocks)";
      os << llvm::formatv("  stage {0} (ranks {1}..{2}{7}): compute {3}, communication {4} ({5} "
                          "per rank), peak memory {6}\n",
                          static_cast<int64_t>(num(stage.value("stage", json(0)))),
                          static_cast<int64_t>(num(ranks.at(0))),
                          static_cast<int64_t>(num(ranks.at(1))),
                          secondsText(num(stage.value("compute_time_s", json(0)))),
                          secondsText(num(stage.value("comm_time_s", json(0)))),
                          bytesText(num(stage.value("comm_bytes_per_rank", json(0)))),
                          bytesText(num(stage.value("peak_memory_bytes", json(0)))),
                          held.empty() ? std::string() : "; " + held);
      printPeak(os, stage.value("peak_memory", json::object()), "    ", 1);
    }
    const json transfers = pipeline.value("transfers", json::array());
    std::vector<json> sent(transfers.begin(), transfers.end());
    std::stable_sort(sent.begin(), sent.end(), [](const json &a, const json &b) {
      return num(a.value("bytes_per_rank", json(0))) > num(b.value("bytes_per_rank", json(0)));
    });
    os << "  " << sent.size() << " values cross between stages"
       << (sent.empty() ? "" : ", largest first:") << "\n";
    for (size_t i = 0; i < sent.size() && i < 5; ++i)
      os << llvm::formatv("  {0}. {1} {2} from stage {3} to {4}: {5} per rank, {6}\n     why: {7}\n",
                          i + 1, str(sent[i].value("value", json("?"))),
                          str(sent[i].value("sbp", json("?"))),
                          static_cast<int64_t>(num(sent[i].value("from_stage", json(0)))),
                          static_cast<int64_t>(num(sent[i].value("to_stage", json(0)))),
                          bytesText(num(sent[i].value("bytes_per_rank", json(0)))),
                          secondsText(num(sent[i].value("est_time_s", json(0)))),
                          str(sent[i].value("reason", json(""))));
  }
  const json &totals = report["totals"];
  os << "\nTotals per rank and step: communication "
     << bytesText(num(totals["comm_bytes_per_rank"])) << ", estimated time "
     << secondsText(num(totals["estimated_step_time_s"])) << ", peak memory "
     << bytesText(num(totals["peak_memory_bytes"]));
  // With --target, what the programs' memory plans hold: after fusion (a
  // fused op's intermediates take no memory), exactly what a rank allocates.
  if (totals.contains("arena_bytes_per_rank"))
    os << " (the compiled programs' arena: " << bytesText(num(totals["arena_bytes_per_rank"]))
       << ")";
  os << "\n";
  printPeak(os, totals.value("peak_memory", json::object()), "  ", 5);
  if (totals.contains("flash_attention_saved_bytes"))
    os << "Flash attention keeps attention's scores and probabilities out of memory: "
       << bytesText(num(totals["flash_attention_saved_bytes"]))
       << " less at the peak than with them stored (--fused-attention=false)\n";
  if (totals.value("fits_device_memory", json(true)) == json(false))
    os << "Warning: the peak memory per rank exceeds the device's "
       << bytesText(num(report.value("cluster", json::object()).value("device_memory_bytes", json(0))))
       << ": this plan does not fit\n";
  return mlir::success();
}
