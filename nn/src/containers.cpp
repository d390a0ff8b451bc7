// nn/src/containers.cpp: ModuleList and Sequential.
#include "xgrad/nn/containers.h"

#include <string>

namespace xgrad::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) append(m);
}

ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) append(m);
}

void ModuleList::append(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](int64_t index) const {
  const auto n = static_cast<int64_t>(modules_.size());
  const int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i >= n) fail(name().c_str(), "index ", index, " is out of range for ", n, " modules");
  return modules_[static_cast<std::size_t>(i)];
}

void ModuleList::bad_cast(int64_t index) const {
  fail(name().c_str(), "element ", index, " is a ", (*this)[index]->name(),
       ", not the requested module type");
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : *this) x = (*m)(x);  // a call: the children's hooks run
  return x;
}

}  // namespace xgrad::nn
