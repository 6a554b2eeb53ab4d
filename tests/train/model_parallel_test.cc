// Tensor and pipeline parallelism against one process, in one process (ranks are threads over
// dist's LocalComm; the same code runs under ASan in the sanitizer build):
//  - TP gradients: one micro-batch through ModelParallel at tp 2 (KV heads divided) and tp 4
//    (KV heads replicated) gives TrainModel's loss, and every rank's gradient slice equals the
//    slice of TrainModel's gradient (f32: partial sums over heads and vocabulary reassociate
//    the reductions; measured worst relative error ~1e-6, tolerance 1e-4 of the tensor's max).
//  - Training: (tp 2), (tp 2 x dp 2), (pp 2 x dp 2, 1F1B), (tp 2 x pp 2, GPipe) and (pp 4,
//    interleaved, 2 chunks) give the single-process losses of 10 steps within 2e-5 relative
//    (the gradients' summation order differs; Adam carries it into the next steps).
//  - 1F1B holds at most P micro-batches of activations on stage 0 (measured bytes), GPipe m.
//  - Sequence parallelism: the same gradients and losses, and exactly 1/T of the norm and
//    residual activations.
//  - A (tp 2, pp 2) checkpoint (each rank writes its own slices: bytes checked by hand)
//    resumes at (pp 4), (dp 4), (tp 2 x dp 2) and in one process to the uninterrupted run's
//    losses; a (tp 4) one (replicated KV heads written once), a ZeRO-1 one and a whole one
//    resume at (tp 2, pp 2); export gives the single-process weights; a missing or corrupt
//    shard is named in the error.
#include "lmstack/train/model_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/safetensors.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;

// The tiny llama of the parity tests: C 32, H 4, Hkv 2, F 64, V 64, 2 layers.
model::ModelDir tiny_llama() {
  return model::load_model_dir(test::source_path("tests/data/train/llama/model"));
}

void tokens(std::vector<int32_t>& in, std::vector<int32_t>& tg, int n) {
  in.resize(static_cast<size_t>(n)), tg.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    in[static_cast<size_t>(i)] = (i * 7 + 3) % 64, tg[static_cast<size_t>(i)] = (i * 5 + 1) % 64;
}

void tp_gradients_match(int tp, bool sp = false) {
  const model::ModelDir md = tiny_llama();
  const int batch = 2, seq = 8, n = batch * seq;
  std::vector<int32_t> in, tg;
  tokens(in, tg, n);
  const float scale = 1.0f / n;
  ThreadPool pool(1);
  TrainModel ref(md.config, md.weights, pool, {});
  const double want = ref.forward_backward(in.data(), tg.data(), batch, seq, scale);
  std::vector<ParamRef> ref_params = ref.params();
  model::ModelWeights ref_grads = ref.grads();
  std::mutex mu;
  int compared = 0;
  dist::run_local(tp, [&](dist::Comm& world) {
    dist::Mesh mesh(world, dist::MeshShape{tp, 1, 1});
    ThreadPool mine(1);
    ModelParallelOptions o;
    o.sequence_parallel = sp;
    ModelParallel mp(md.config, md.weights, mesh, mine, o, AdamWConfig{}, nullptr);
    const double sum = mp.forward_backward({in.data()}, {tg.data()}, batch, seq, scale);
    EXPECT_NEAR(sum / n, want, 1e-5 * want);
    const TpLayout& t = mp.chunks()[0]->tp_layout();
    for (const ParamRef& p : mp.params()) {
      const Tensor* full = weight_field(ref_grads, p.name);
      ASSERT_TRUE(full && full->defined()) << p.name;
      const Tensor slice = tp_slice(p.name, *full, t, md.config.head_dim);
      ASSERT_EQ(slice.shape(), p.grad->shape()) << p.name;
      float peak = 0;
      for (int64_t i = 0; i < slice.numel(); ++i)
        peak = std::max(peak, std::fabs(slice.data<float>()[i]));
      for (int64_t i = 0; i < slice.numel(); ++i)
        ASSERT_NEAR(p.grad->data<float>()[i], slice.data<float>()[i], 1e-4f * peak + 1e-9f)
            << p.name << " element " << i << " tp rank " << t.rank;
      std::lock_guard lock(mu);
      ++compared;
    }
  });
  EXPECT_EQ(compared, tp * static_cast<int>(ref_params.size()));
}

TEST(TensorParallel, GradientsEqualTheUnsplitModel) { tp_gradients_match(2); }
TEST(TensorParallel, GradientsWithReplicatedKvHeads) { tp_gradients_match(4); }
TEST(TensorParallel, GradientsWithSequenceParallelism) { tp_gradients_match(2, true); }

// Korthikanti et al. 2022, §4.2.2: sequence parallelism divides by T the activations TP
// alone keeps whole. Here, per layer: the input x, the two norm outputs and x_mid ([N, C] each)
// and the two norms' rstd ([N]); per chunk the output x_L, the final norm output and its rstd.
TEST(TensorParallel, SequenceParallelismDividesTheNormAndResidualActivations) {
  const model::ModelDir md = tiny_llama();
  const int batch = 2, seq = 8, tp = 2;
  const int64_t n = batch * seq, c = md.config.hidden_size, layers = md.config.num_layers;
  std::vector<int32_t> in, tg;
  tokens(in, tg, static_cast<int>(n));
  std::mutex mu;
  std::map<bool, int64_t> held;
  for (bool sp : {false, true})
    dist::run_local(tp, [&](dist::Comm& world) {
      dist::Mesh mesh(world, dist::MeshShape{tp, 1, 1});
      ThreadPool pool(1);
      ModelParallelOptions o;
      o.sequence_parallel = sp;
      ModelParallel mp(md.config, md.weights, mesh, pool, o, AdamWConfig{}, nullptr);
      mp.forward_backward({in.data()}, {tg.data()}, batch, seq, 1.0f / n);
      std::lock_guard lock(mu);
      if (world.rank() == 0) held[sp] = mp.last_stats().peak_activation_bytes;
    });
  const int64_t shrinking_floats = layers * (4 * n * c + 2 * n) + 2 * n * c + n;
  EXPECT_EQ(held[false] - held[true], shrinking_floats / tp * 4)
      << held[false] << " vs " << held[true];
}

TEST(TensorParallel, RefusesWhatItCannotSplit) {
  model::ModelDir md = tiny_llama();
  md.config.num_heads = 3;
  EXPECT_THROW(tp_layout(md.config, 2, 0), ConfigError);
  md = tiny_llama();
  md.config.qk_norm = true;
  EXPECT_THROW(check_model_parallel_config(md.config), ConfigError);
}

// GPT-2 (LayerNorm, GELU, learned positions, tied embeddings) is refused by name, at tp 2 for
// its architecture and at pp 2 for its tied embeddings, before any step runs.
TEST(ModelParallelConfig, RefusesWhatItDoesNotSplit) {
  const std::string data = make_data("mp_refuse_data");
  for (const auto& [tp, pp, what] : {std::tuple{2, 1, "LayerNorm"}, std::tuple{1, 2, "ties"}}) {
    TrainConfig c = test_fixtures::tiny_config(data, test::temp_dir("mp_refuse"), "gpt2");
    c.tp = tp, c.pp = pp;
    try {
      dist::run_local(2, [&](dist::Comm& comm) {
        TrainConfig mine = c;
        mine.comm = &comm;
        ThreadPool pool(1);
        run_training(mine, pool);
      });
      ADD_FAILURE() << "tp " << tp << " pp " << pp << " trained";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

TrainConfig mp_config(const std::string& data, const std::string& out) {
  TrainConfig c;
  c.init_config = test_fixtures::deep_llama_config();
  c.data_dir = data;
  c.out_dir = out;
  c.steps = 10;
  c.batch = 4;
  c.seq = 16;
  c.grad_accum = 4;  // pipeline micro-batches
  c.lr.lr = 3e-3f;
  c.lr.warmup = 2;
  c.lr.schedule = LrSchedule::kConstant;
  c.save_every = 0;
  c.eval_every = 0;
  c.seed = 5;
  c.log_path = path_join(out, "log.jsonl");
  c.progress = false;
  return c;
}

struct Layout {
  int tp, pp, dp;
  const char* schedule;
  bool sp = false;
};

void run_layout(int world, TrainConfig c, const Layout& l) {
  c.tp = l.tp, c.pp = l.pp, c.dp = l.dp, c.pp_schedule = l.schedule, c.sequence_parallel = l.sp;
  dist::run_local(world, [&](dist::Comm& comm) {
    TrainConfig mine = c;
    mine.comm = &comm;
    ThreadPool pool(1);
    run_training(mine, pool);
  });
}

const std::string& data_dir() {
  static const std::string d = make_data("mp_data");
  return d;
}

const std::string& single_run() {
  static const std::string out = [] {
    const std::string dir = test::temp_dir("mp_single");
    ThreadPool pool(1);
    run_training(mp_config(data_dir(), dir), pool);
    return dir;
  }();
  return out;
}

void expect_losses_near(const std::string& have_log, const std::string& want_log, double rel) {
  const std::vector<double> want = losses_of(want_log), have = losses_of(have_log);
  ASSERT_EQ(have.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(have[i] - want[i]) / want[i]);
    EXPECT_NEAR(have[i], want[i], rel * want[i]) << "step " << i + 1;
  }
  std::printf("worst relative loss difference %.2e over %zu steps\n", worst, want.size());
}

class ModelParallelParity : public ::testing::TestWithParam<Layout> {};

TEST_P(ModelParallelParity, LossesEqualOneProcess) {
  const Layout l = GetParam();
  const std::string out = test::temp_dir(
      fmt::format("mp_tp{}_pp{}_dp{}_{}{}", l.tp, l.pp, l.dp, l.schedule, l.sp ? "_sp" : ""));
  run_layout(l.tp * l.pp * l.dp, mp_config(data_dir(), out), l);
  expect_losses_near(path_join(out, "log.jsonl"), path_join(single_run(), "log.jsonl"), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ModelParallelParity,
                         ::testing::Values(Layout{2, 1, 1, "1f1b"}, Layout{2, 1, 2, "1f1b"},
                                           Layout{1, 2, 2, "1f1b"}, Layout{2, 2, 1, "gpipe"},
                                           Layout{1, 4, 1, "interleaved"},
                                           Layout{2, 2, 1, "1f1b", true}),
                         [](const auto& i) {
                           return fmt::format("tp{}_pp{}_dp{}_{}{}", i.param.tp, i.param.pp,
                                              i.param.dp, i.param.schedule,
                                              i.param.sp ? "_sp" : "");
                         });

// Stage 0's peak activation bytes over one step of m = 8 micro-batches at pp 4.
Json stage0(const std::string& schedule) {
  const std::string out = test::temp_dir("mp_mem_" + schedule);
  TrainConfig c = mp_config(data_dir(), out);
  c.steps = 1;
  c.grad_accum = 8;
  run_layout(4, c, Layout{1, 4, 1, schedule.c_str()});
  return read_train_log(path_join(out, "log.jsonl")).back()["measured"]["parallel"]["ranks"][0];
}

TEST(PipelineParallel, OneFOneBHoldsAtMostPMicroBatchesOnStageZero) {
  const Json f1b = stage0("1f1b"), gpipe = stage0("gpipe");
  const int64_t one = f1b["micro_batch_activation_bytes"].get<int64_t>();
  ASSERT_GT(one, 0);
  EXPECT_EQ(gpipe["micro_batch_activation_bytes"].get<int64_t>(), one);
  EXPECT_EQ(f1b["max_micro_batches_held"].get<int>(), 4);
  EXPECT_EQ(f1b["peak_activation_bytes"].get<int64_t>(), 4 * one);
  EXPECT_EQ(gpipe["max_micro_batches_held"].get<int>(), 8);
  EXPECT_EQ(gpipe["peak_activation_bytes"].get<int64_t>(), 8 * one);
}

// Copies a run directory (its checkpoint and log) so another layout can resume from it.
std::string copy_run(const std::string& from, const std::string& name) {
  const std::string to = test::temp_dir(name);
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  return to;
}

// The (tp 2, pp 2) run saved at step 5, shared by the checkpoint tests (copy it to resume).
const std::string& tp2pp2_step5() {
  static const std::string out = [] {
    const std::string dir = test::temp_dir("mp_ckpt_tp2pp2");
    TrainConfig c = mp_config(data_dir(), dir);
    c.steps = 5;
    run_layout(4, c, Layout{2, 2, 1, "1f1b"});
    return dir;
  }();
  return out;
}

// Resumes a copy of run `saved` at layout l to step 10; its losses must be the uninterrupted
// run's. `tag` names the copy apart from others of the same layout. Returns the copy.
std::string resume_at(const std::string& saved, const Layout& l, int tag = 0) {
  const std::string out = copy_run(
      saved, fmt::format("mp_ckpt_to_tp{}_pp{}_dp{}_{}_{}", l.tp, l.pp, l.dp, l.schedule, tag));
  TrainConfig r = mp_config(data_dir(), out);
  r.resume = true;
  if (l.tp * l.pp * l.dp == 1) {
    ThreadPool pool(1);
    run_training(r, pool);
  } else {
    run_layout(l.tp * l.pp * l.dp, r, l);
  }
  expect_losses_near(path_join(out, "log.jsonl"), path_join(single_run(), "log.jsonl"), 2e-5);
  return out;
}

TEST(ModelParallelCheckpoint, ResumesAtAnyLayout) {
  for (const Layout& l : {Layout{1, 4, 1, "1f1b"}, Layout{1, 1, 4, "1f1b"}, Layout{2, 1, 2, "1f1b"},
                          Layout{1, 1, 1, "1f1b"}}) {
    SCOPED_TRACE(fmt::format("resumed at tp {} pp {} dp {}", l.tp, l.pp, l.dp));
    const std::string out = resume_at(tp2pp2_step5(), l);
    if (l.tp != 2) continue;
    // Its own step-10 checkpoint: DP rank 1 (world ranks 2, 3) holds replicas and writes none.
    const std::string dir = *latest_checkpoint(out);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(file_exists(path_join(dir, shard_file_name(r, 4))), r < 2) << "rank " << r;
  }
}

// A data-parallel ZeRO-1 checkpoint (element ranges, format v1) resumes at (tp 2, pp 2).
TEST(ModelParallelCheckpoint, ZeroCheckpointResumesAtTpPp) {
  const std::string saved = test::temp_dir("mp_ckpt_zero1");
  TrainConfig c = mp_config(data_dir(), saved);
  c.steps = 5;
  c.zero = 1;
  run_layout(2, c, Layout{1, 1, 2, "1f1b"});
  resume_at(saved, Layout{2, 2, 1, "1f1b"}, 1);
}

// Each rank writes exactly its own slices of weights, m and v: one copy of the state in all.
// Deep llama: V 320, C 32, F 64, 8 layers, H 4 x head_dim 8, Hkv 2. Stage 0 (world ranks 0, 1)
// holds the embedding and layers 0-3, stage 1 (ranks 2, 3) layers 4-7, final_norm, lm_head;
// TP rank 0 (ranks 0, 2) also writes the replicated norms.
TEST(ModelParallelCheckpoint, EachRankWritesItsOwnSlices) {
  const int64_t split = (32 * 32 + 2 * (16 * 32) + 32 * 32 + 3 * (64 * 32)) / 2;  // per layer
  const int64_t norms = 2 * 32, vocab_half = 320 * 32 / 2;
  const int64_t want[4] = {vocab_half + 4 * (split + norms), vocab_half + 4 * split,
                           vocab_half + 4 * (split + norms) + 32, vocab_half + 4 * split};
  const int64_t params = 2 * 320 * 32 + 8 * (2 * 32 + 2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32) + 32;
  EXPECT_EQ(want[0] + want[1] + want[2] + want[3], params);
  const std::string dir = *latest_checkpoint(tp2pp2_step5());
  for (int r = 0; r < 4; ++r) {
    const model::SafetensorsFile f(path_join(dir, shard_file_name(r, 4)));
    int64_t bytes = 0;
    for (const auto& [name, e] : f.entries()) bytes += static_cast<int64_t>(e.end - e.begin);
    EXPECT_EQ(bytes, 3 * 4 * want[r]) << "rank " << r;  // weights, m, v in f32
  }
}

// At tp 4 each KV head (Hkv 2) is replicated on two TP ranks: only the first of them writes
// it, so the shards still hold one copy (12 bytes per parameter), and the run resumes at
// (tp 2, pp 2).
TEST(ModelParallelCheckpoint, ReplicatedKvHeadsAreWrittenOnce) {
  const std::string saved = test::temp_dir("mp_ckpt_tp4");
  TrainConfig c = mp_config(data_dir(), saved);
  c.steps = 5;
  run_layout(4, c, Layout{4, 1, 1, "1f1b"});
  const std::string dir = *latest_checkpoint(saved);
  int64_t bytes = 0;
  for (int r = 0; r < 4; ++r) {
    const model::SafetensorsFile f(path_join(dir, shard_file_name(r, 4)));
    for (const auto& [name, e] : f.entries()) bytes += static_cast<int64_t>(e.end - e.begin);
  }
  EXPECT_EQ(bytes, 3 * 4 * 94752);  // the parameter count of EachRankWritesItsOwnSlices
  resume_at(saved, Layout{2, 2, 1, "1f1b"}, 4);
}

// The single-process run saved at step 5 (a whole checkpoint).
const std::string& single_step5() {
  static const std::string out = [] {
    const std::string dir = test::temp_dir("mp_ckpt_single5");
    TrainConfig c = mp_config(data_dir(), dir);
    c.steps = 5;
    ThreadPool pool(1);
    run_training(c, pool);
    return dir;
  }();
  return out;
}

// A whole (single-process) checkpoint resumes at (tp 2, pp 2) and at (pp 2, interleaved).
TEST(ModelParallelCheckpoint, WholeCheckpointResumesAtTpPp) {
  resume_at(single_step5(), Layout{2, 2, 1, "1f1b"}, 9);
  resume_at(single_step5(), Layout{1, 2, 1, "interleaved"}, 9);
}

// `checkpoint export` of the (tp 2, pp 2) checkpoint gives the single-process run's step-5
// weights (within the f32 reassociation the loss comparisons allow).
TEST(ModelParallelCheckpoint, ExportEqualsTheSingleProcessCheckpoint) {
  const std::string single = single_step5();
  const std::string out = test::temp_dir("mp_ckpt_export");
  export_checkpoint(*latest_checkpoint(tp2pp2_step5()), out);
  model::ModelDir have = model::load_model_dir(out);
  model::ModelDir want = model::load_model_dir(*latest_checkpoint(single));
  auto want_fields = weight_fields(want.weights, false);
  int compared = 0;
  double worst = 0;
  for (auto& [name, t] : weight_fields(have.weights, false)) {
    const Tensor* w = weight_field(want.weights, name);
    ASSERT_TRUE(w && w->defined()) << name;
    ASSERT_EQ(t->shape(), w->shape()) << name;
    const std::vector<float> a = t->to_f32_vector(), b = w->to_f32_vector();
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    ++compared;
  }
  std::printf("worst absolute weight difference %.2e\n", worst);
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(compared, static_cast<int>(want_fields.size()));
}

// A missing shard (caught when the index is opened, on every rank) and a corrupt one (caught by
// the rank reading it) stop the resume with an error naming the file.
TEST(ModelParallelCheckpoint, MissingOrCorruptShardNamesTheFile) {
  for (const bool missing : {true, false}) {
    const std::string out = copy_run(tp2pp2_step5(), missing ? "mp_ckpt_missing" : "mp_ckpt_bad");
    const std::string file = path_join(*latest_checkpoint(out), shard_file_name(2, 4));
    if (missing)
      std::filesystem::remove(file);
    else
      write_file_atomic(file, "not a safetensors file");
    TrainConfig r = mp_config(data_dir(), out);
    r.resume = true;
    try {
      run_layout(missing ? 1 : 4, r, missing ? Layout{1, 1, 1, "1f1b"} : Layout{2, 2, 1, "1f1b"});
      ADD_FAILURE() << "resumed from a " << (missing ? "missing" : "corrupt") << " shard";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("shard-00002-of-00004.safetensors"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace lmstack::train
