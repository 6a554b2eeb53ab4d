// The built-in tasks (answers recomputed from the question, seeds reproducible, held-out and
// train disjoint), the reward functions, a user-defined C++ reward and --reward-cmd. ~0.3 s.
#include "lmstack/rl/task.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "lmstack/core/error.h"
#include "lmstack/rl/reward.h"

namespace lmstack::rl {
namespace {

// "Q: <a><op><b>\nA:" → a op b, computed here independently of the task.
std::string arithmetic_answer(const std::string& prompt) {
  const std::string q = prompt.substr(3, prompt.find('\n') - 3);
  const size_t op = q.find_first_of("+*");
  const uint64_t a = std::stoull(q.substr(0, op)), b = std::stoull(q.substr(op + 1));
  return std::to_string(q[op] == '+' ? a + b : a * b);
}

TEST(Task, ArithmeticAnswersAreCorrectAndReproducible) {
  for (const char* spec : {"add:3", "mul:2", "add"}) {
    const auto task = make_task(spec);
    for (int i = 0; i < 200; ++i) {
      const Example e = task->make(7, i, Split::kTrain);
      EXPECT_EQ(e.answer, arithmetic_answer(e.prompt)) << spec << " " << e.prompt;
      EXPECT_TRUE(e.prompt.starts_with("Q: ") && e.prompt.ends_with("\nA:")) << e.prompt;
      EXPECT_EQ(task->make(7, i, Split::kTrain).prompt, e.prompt);
    }
    EXPECT_NE(task->make(7, 0, Split::kTrain).prompt, task->make(8, 0, Split::kTrain).prompt);
  }
}

TEST(Task, ReverseAndSort) {
  const auto rev = make_task("reverse:5");
  const Example r = rev->make(1, 3, Split::kTrain);
  const std::string word = r.prompt.substr(11, 5);
  EXPECT_EQ(r.answer, std::string(word.rbegin(), word.rend()));
  const auto sort = make_task("sort:4");
  const Example s = sort->make(1, 3, Split::kTrain);
  std::string digits;
  for (char c : s.prompt.substr(8))
    if (c >= '0' && c <= '9') digits += c;
  std::sort(digits.begin(), digits.end());
  const std::string sorted = {digits[0], ',', digits[1], ',', digits[2], ',', digits[3]};
  EXPECT_EQ(s.answer, sorted);
  EXPECT_TRUE(sort->is_well_formed("1,2,3"));
  EXPECT_FALSE(sort->is_well_formed("1,2,"));
  EXPECT_FALSE(rev->is_well_formed("ab1"));
}

TEST(Task, HeldOutNeverSharesAQuestionWithTrain) {
  const auto task = make_task("add:1");  // 100 questions: overlap would show
  std::set<std::string> train, held;
  for (int i = 0; i < 500; ++i) train.insert(task->make(3, i, Split::kTrain).prompt);
  for (int i = 0; i < 100; ++i) held.insert(task->make(3, i, Split::kHeldOut).prompt);
  EXPECT_FALSE(held.empty());
  for (const std::string& p : held) EXPECT_EQ(train.count(p), 0u) << p;
}

TEST(Task, BadSpecsAreRefusedByName) {
  EXPECT_THROW(make_task("divide"), RequestError);
  EXPECT_THROW(make_task("add:x"), RequestError);
  EXPECT_THROW(make_task("add:0"), RequestError);
}

TEST(Reward, ExactMatchAndFormat) {
  const auto task = make_task("add:2");
  const Example e{"Q: 12+34\nA:", "46"};
  ExactMatchReward exact;
  EXPECT_EQ(exact.score(e, " 46\n"), 1.0);
  EXPECT_EQ(exact.score(e, " 46"), 1.0);  // cut by max_tokens after the answer: still right
  EXPECT_EQ(exact.score(e, " 47\n"), 0.0);
  EXPECT_EQ(exact.score(e, "46 \n"), 0.0);
  FormatReward format(*task, 0.1);
  EXPECT_EQ(format.score(e, " 47\n"), 0.1);
  EXPECT_EQ(format.score(e, " 4x\n"), 0.0);
  EXPECT_EQ(format.score(e, " 47"), 0.0);  // no newline: the format was not finished
  SumReward sum;
  sum.add(std::make_unique<ExactMatchReward>());
  sum.add(std::make_unique<FormatReward>(*task, 0.1));
  EXPECT_NEAR(sum.score(e, " 46\n"), 1.1, 1e-12);
  EXPECT_EQ(extract_answer(" 46\nQ: more"), "46");
  EXPECT_EQ(sft_text(e), "Q: 12+34\nA: 46\n");
}

// What a user writes to add a reward in C++: derive, score.
class LengthPenalty : public Reward {
 public:
  double score(const Example&, const std::string& completion) override {
    return -0.01 * static_cast<double>(completion.size());
  }
};

TEST(Reward, UserDefinedRewardComposes) {
  SumReward sum;
  sum.add(std::make_unique<ExactMatchReward>());
  sum.add(std::make_unique<LengthPenalty>());
  EXPECT_NEAR(sum.score({"Q: 1+1\nA:", "2"}, " 2\n"), 1.0 - 0.03, 1e-12);
}

TEST(Reward, CommandGetsJsonOnStdinAndPrintsANumber) {
  const Example e{"Q: 12+34\nA:", "46"};
  // The program sees the JSON: it answers 1 only if the completion field is there verbatim.
  CommandReward cmd(R"(grep -q '"completion":" 46' && echo 1 || echo 0.25)");
  EXPECT_EQ(cmd.score(e, " 46\n"), 1.0);
  EXPECT_EQ(cmd.score(e, " 47\n"), 0.25);
  CommandReward words("echo not-a-number");
  EXPECT_THROW(words.score(e, ""), RequestError);
  CommandReward fails("exit 3");
  EXPECT_THROW(fails.score(e, ""), RequestError);
}

}  // namespace
}  // namespace lmstack::rl
