// Jump consistent hash, the reference code of Lamping and Veach (arXiv:1406.2294, Figure 1).
#include "rondel/core/jump.h"

namespace rondel::core {

int32_t jump_hash(uint64_t key, int32_t buckets) noexcept {
  int64_t b = -1;
  int64_t j = 0;
  while (j < buckets) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(int64_t{1} << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int32_t>(b);
}

}  // namespace rondel::core
