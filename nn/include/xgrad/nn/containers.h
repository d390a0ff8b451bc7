// xgrad/nn/containers.h: ModuleList and Sequential (torch.nn.ModuleList / nn.Sequential).
//
// Both name their children "0", "1", ... in insertion order, so parameters read
// "trf_blocks.0.att.W_query.weight". Sequential::forward feeds each child's output to the next
// (children must override the one-tensor Module::forward).
//
// Random initialisation happens when a module is constructed, so build the children in
// torch's order. C++ evaluates function arguments in an unspecified order: prefer
//   auto seq = std::make_shared<Sequential>();
//   seq->push_back(std::make_shared<Linear>(4, 8));
//   seq->push_back(std::make_shared<GELU>());
// or a braced list (evaluated left to right), over make_shared<Sequential>(a(), b(), c()).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/nn/module.h"

namespace xgrad::nn {

class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);

  // Appends and registers `module` under the name str(size()); returns it.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }
  // Python indexing: negative indices count from the end; throws when out of range.
  std::shared_ptr<Module> operator[](int64_t index) const;
  // The element as its concrete type; throws when it is not an M.
  template <class M>
  std::shared_ptr<M> at(int64_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    if (!m) bad_cast(index);
    return m;
  }
  std::size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  void append(std::shared_ptr<Module> module);
  [[noreturn]] void bad_cast(int64_t index) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

class Sequential : public ModuleList {
 public:
  using ModuleList::ModuleList;
  Tensor forward(const Tensor& input) override;
};

}  // namespace xgrad::nn
