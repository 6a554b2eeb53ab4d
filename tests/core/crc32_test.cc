// CRC-32 against published check values: the CRC catalogue's "123456789", zlib.crc32 of a
// pangram, the IEND chunk type every PNG ends with; chaining over a split equals the whole.
#include "lmstack/core/crc32.h"

#include <string>

#include <gtest/gtest.h>

namespace lmstack {
namespace {

TEST(Crc32, MatchesPublishedCheckValuesAndChains) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("IEND", 4), 0xAE426082u);  // the bytes AE 42 60 82 of every PNG's end
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(crc32(fox.data(), fox.size()), 0x414FA339u);  // zlib.crc32
  EXPECT_EQ(crc32(fox.data() + 10, fox.size() - 10, crc32(fox.data(), 10)),
            crc32(fox.data(), fox.size()));
}

}  // namespace
}  // namespace lmstack
