// The proxy test binary's count of operator new calls (the replacement is in
// http2_stream_pool_test.cpp), for tests that assert a path does not allocate.
#pragma once

#include <cstdint>

namespace rondel::test {

// Calls of every form of operator new so far, in this process.
uint64_t operator_new_calls() noexcept;

}  // namespace rondel::test
