// report.json: every layout choice and every reshard of a compiled model,
// with its cost (schema: docs/report.md).
#pragma once

#include "compiler/Cost/CostModel.h"

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>
#include <string>

namespace sbpc {

struct ReportInputs {
  std::string model;
  std::string mesh;
  Cluster cluster;
  std::string strategy;
  std::string strategySource;
  std::string algorithm;
  double searchSeconds = 0;
};

/// The report of a module after --sbp-propagate and --sbp-insert-boxing.
nlohmann::json buildReport(mlir::ModuleOp module, const ReportInputs &inputs);

/// Prints a report for a person: the plan, the layouts op by op, the
/// reshards ranked by estimated time with their reasons, and the totals. Fails with a
/// one-line error naming the missing field when `report` is not one.
mlir::LogicalResult explainReport(const nlohmann::json &report, llvm::raw_ostream &os,
                                  std::string &error);

} // namespace sbpc
