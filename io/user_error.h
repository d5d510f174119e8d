// UserError: something the user can fix (deck, files, layout). main prints its message as one
// line on rank 0 and every rank exits with status 2. Never used for programming errors.
#pragma once

#include <stdexcept>
#include <string>

namespace trident::io {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace trident::io
