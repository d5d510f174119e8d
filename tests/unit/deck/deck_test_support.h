// Helpers for the deck tests: the message of the UserError an action throws.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "io/user_error.h"  // UserError

namespace trident::io::testing_support {

// Runs `action`, which must throw UserError, and returns its message ("" and a test failure
// when it throws nothing). Every user error must be a single line.
template <typename Action>
std::string user_error_of(Action&& action) {
  try {
    action();
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    return message;
  }
  ADD_FAILURE() << "expected a UserError, none was thrown";
  return "";
}

}  // namespace trident::io::testing_support
