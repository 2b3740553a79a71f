// expectError(st, {"part", ...}): st failed as an invalid argument with a
// message containing every part. Shared by the parser tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "base/error.h"

namespace testsupport {

inline void expectError(const hoccl::Status& st, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(st.ok()) << "expected an error containing \"" << *parts.begin() << "\"";
  EXPECT_EQ(st.code(), hocclInvalidArgument);
  for (const char* p : parts)
    EXPECT_NE(st.message().find(p), std::string::npos) << "missing \"" << p << "\" in: " << st.message();
}

}  // namespace testsupport
