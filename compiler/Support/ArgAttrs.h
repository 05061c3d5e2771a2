// Editing many arguments' attributes of a function at once.
#pragma once

#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/SmallVector.h"

namespace sbpc {

/// Edits to the argument attributes of a function, written back at once by
/// apply() (or the destructor). FunctionOpInterface::setArgAttr rebuilds
/// the whole list of argument attributes on each call, and the context
/// keeps every list it made: over a training step's thousands of arguments
/// (each parameter and its optimizer states) that was quadratic in time and
/// memory (gigabytes on a GPT of 600 layers).
class ArgAttrEdits {
public:
  explicit ArgAttrEdits(mlir::FunctionOpInterface fn) : fn_(fn) {
    llvm::SmallVector<mlir::DictionaryAttr> dicts;
    fn.getAllArgAttrs(dicts);
    attrs_.reserve(dicts.size());
    for (mlir::DictionaryAttr dict : dicts)
      attrs_.emplace_back(dict);
  }
  ArgAttrEdits(const ArgAttrEdits &) = delete;
  ArgAttrEdits &operator=(const ArgAttrEdits &) = delete;
  ~ArgAttrEdits() { apply(); }

  /// Sets attribute `name` of argument `arg` (removes it, with a null
  /// value).
  void set(unsigned arg, llvm::StringRef name, mlir::Attribute value) {
    if (value)
      attrs_[arg].set(name, value);
    else
      attrs_[arg].erase(name);
    changed_ = true;
  }
  /// The attribute as edited so far (null where there is none).
  mlir::Attribute get(unsigned arg, llvm::StringRef name) const { return attrs_[arg].get(name); }

  /// Writes the edits to the function (once; later edits need another).
  void apply() {
    if (!changed_)
      return;
    llvm::SmallVector<mlir::DictionaryAttr> dicts;
    dicts.reserve(attrs_.size());
    for (const mlir::NamedAttrList &list : attrs_)
      dicts.push_back(list.getDictionary(fn_->getContext()));
    fn_.setAllArgAttrs(dicts);
    changed_ = false;
  }

private:
  mlir::FunctionOpInterface fn_;
  llvm::SmallVector<mlir::NamedAttrList> attrs_;
  bool changed_ = false;
};

} // namespace sbpc
