#include "cli/table.h"

#include "gtest/gtest.h"

namespace gputravel::cli {
namespace {

TEST(TableTest, PadsColumnsAndRightAlignsTheChosenOnes) {
  Table t({"NAME", "N", "NOTE"}, {1});
  t.Add({"a", "7", "x"});
  t.Add({"long-name", "1234", ""});
  EXPECT_EQ(t.Render(),
            "NAME          N  NOTE\n"
            "a             7  x\n"
            "long-name  1234\n");
}

TEST(TableTest, MissingCellsAreEmptyAndExtraOnesDropped) {
  Table t({"A", "B"});
  t.Add({"1"});
  t.Add({"2", "3", "4"});
  EXPECT_EQ(t.Render(), "A  B\n1\n2  3\n");
}

}  // namespace
}  // namespace gputravel::cli
