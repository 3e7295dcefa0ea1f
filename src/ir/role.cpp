#include "ir/role.h"

namespace ts {

namespace {
struct Named {
  Role role;
  const char* name;
};
constexpr Named kRoles[] = {
    {Role::State, "state"},   {Role::Grad, "grad"},     {Role::Lr, "lr"},
    {Role::RngSeed, "rng_seed"}, {Role::RngOffset, "rng_offset"}, {Role::Input, "input"},
    {Role::Target, "target"}, {Role::Loss, "loss"},     {Role::Output, "output"},
    {Role::SampleLoss, "sample_loss"}, {Role::BatchLoss, "batch_loss"},
};
}  // namespace

const char* role_name(Role r) {
  for (const auto& n : kRoles)
    if (n.role == r) return n.name;
  return "?";
}

bool parse_role(const std::string& s, Role* out) {
  for (const auto& n : kRoles)
    if (s == n.name) {
      *out = n.role;
      return true;
    }
  return false;
}

std::string role_names() {
  std::string r;
  for (const auto& n : kRoles) r += (r.empty() ? "" : ", ") + std::string(n.name);
  return r;
}

}  // namespace ts
