// StopMatcher: stop strings split across pieces, hold-back and release, first match wins.
#include "lmstack/model/stop_matcher.h"

#include <gtest/gtest.h>

namespace lmstack::model {
namespace {

TEST(StopMatcher, ReleasesTextThatCannotStartAStop) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("hello "), "hello ");
  EXPECT_EQ(m.push("wE"), "w");  // "E" might begin "END"
  EXPECT_EQ(m.push("x"), "Ex");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MatchSpanningPiecesStopsAndDropsTheStop) {
  StopMatcher m({"</s>", "\n\n"});
  EXPECT_EQ(m.push("abc<"), "abc");
  EXPECT_EQ(m.push("/"), "");
  EXPECT_EQ(m.push("s>tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"cd", "b"});
  EXPECT_EQ(m.push("abcd"), "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, FlushReturnsHeldTextAtEnd) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST"), "");
  EXPECT_EQ(m.flush(), "ST");
  StopMatcher none({});
  EXPECT_EQ(none.push("anything"), "anything");
}

}  // namespace
}  // namespace lmstack::model
