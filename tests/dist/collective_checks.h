// Checks of every Comm collective against closed forms, written once and run on every backend:
// comm_local_test.cc runs them on N threads (LocalComm, N = 1..4), comm_mpitest.cc under
// `mpirun -np 2` and `-np 4`. Inputs depend on the rank so that each expected value is a sum
// derived by hand (all f32 sums below are exact, so the reduction order does not matter).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lmstack/core/half.h"
#include "lmstack/dist/comm.h"

namespace lmstack::dist::test {

// Odd counts on purpose: no collective may assume a multiple of the group size or of 8.
inline constexpr int64_t kOddCounts[] = {1, 7, 1001};

// x_r[i] = (r + 1) / 2 + (i mod 7); sum over r < n = n(n+1)/4 + n (i mod 7).
inline float rank_value(int r, int64_t i) { return 0.5f * (r + 1) + static_cast<float>(i % 7); }
inline float rank_sum(int n, int64_t i) {
  return 0.25f * n * (n + 1) + n * static_cast<float>(i % 7);
}

inline void check_all_reduce_f32(Comm& c) {
  const int n = c.size(), r = c.rank();
  for (int64_t count : kOddCounts) {
    std::vector<float> x(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) x[i] = rank_value(r, i);
    c.all_reduce(x.data(), count, DType::kF32);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(x[i], rank_sum(n, i)) << "i=" << i;
    for (int64_t i = 0; i < count; ++i) x[i] = rank_value(r, i);
    c.all_reduce(x.data(), count, DType::kF32, ReduceOp::kMax);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(x[i], rank_value(n - 1, i));
  }
}

inline void check_all_reduce_int(Comm& c) {
  const int n = c.size(), r = c.rank();
  std::vector<int32_t> a = {r, -r, 1000000 * r + 1};
  c.all_reduce(a.data(), 3, DType::kI32);
  EXPECT_EQ(
      a, (std::vector<int32_t>{n * (n - 1) / 2, -n * (n - 1) / 2, 1000000 * n * (n - 1) / 2 + n}));
  std::vector<int8_t> b = {static_cast<int8_t>(r), static_cast<int8_t>(-r)};
  c.all_reduce(b.data(), 2, DType::kI8, ReduceOp::kMin);
  EXPECT_EQ(b, (std::vector<int8_t>{0, static_cast<int8_t>(-(n - 1))}));
}

// bf16 is reduced in f32 and rounded once: rank 0 holds 1, every other rank 2^-8. Summed in
// bf16 (8 significant bits) each 1 + 2^-8 rounds back to 1; in f32 the sum 1 + (n-1) 2^-8 is
// exact and rounds once (n=3: 1.0078125 exactly; n=4: the tie 1.01171875 -> even 1.015625).
inline void check_bf16_reduced_in_f32(Comm& c) {
  const int n = c.size();
  const int64_t count = 5;
  std::vector<uint16_t> x(count, f32_to_bf16(c.rank() == 0 ? 1.0f : 1.0f / 256));
  c.all_reduce(x.data(), count, DType::kBF16);
  const uint16_t want = f32_to_bf16(1.0f + (n - 1) / 256.0f);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(x[i], want) << bf16_to_f32(x[i]) << " vs " << bf16_to_f32(want);
  // reduce-scatter of bf16 takes the same path: chunk k of every rank holds the values above.
  std::vector<uint16_t> send(static_cast<size_t>(count * n),
                             f32_to_bf16(c.rank() == 0 ? 1.0f : 1.0f / 256));
  std::vector<uint16_t> recv(count);
  c.reduce_scatter(send.data(), recv.data(), count, DType::kBF16);
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[i], want);
}

// reduce_scatter: send[k * count + i] = rank_value(r, i) + 10 k, so chunk k sums to
// rank_sum(n, i) + 10 k n.
inline void check_reduce_scatter(Comm& c) {
  const int n = c.size(), r = c.rank();
  for (int64_t count : kOddCounts) {
    std::vector<float> send(static_cast<size_t>(count * n)), recv(static_cast<size_t>(count));
    for (int k = 0; k < n; ++k)
      for (int64_t i = 0; i < count; ++i) send[k * count + i] = rank_value(r, i) + 10.0f * k;
    c.reduce_scatter(send.data(), recv.data(), count, DType::kF32);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[i], rank_sum(n, i) + 10.0f * r * n);
    // In place: the result lands in this rank's own chunk of the input (ZeRO-2's pattern).
    c.reduce_scatter(send.data(), send.data() + r * count, count, DType::kF32);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(send[r * count + i], recv[i]);
  }
}

// all_gather: rank q contributes q * 1000 + i; also in place (input = own chunk of output).
inline void check_all_gather(Comm& c) {
  const int n = c.size(), r = c.rank();
  for (int64_t count : kOddCounts) {
    std::vector<int32_t> send(static_cast<size_t>(count)), recv(static_cast<size_t>(count * n));
    for (int64_t i = 0; i < count; ++i) send[i] = r * 1000 + static_cast<int32_t>(i);
    c.all_gather(send.data(), recv.data(), count, DType::kI32);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[q * count + i], q * 1000 + i);
    std::vector<int32_t> out(static_cast<size_t>(count * n), -1);
    std::copy(send.begin(), send.end(), out.begin() + r * count);
    c.all_gather(out.data() + r * count, out.data(), count, DType::kI32);
    EXPECT_EQ(out, recv);
  }
  // sum_in_rank_order (an all-gather of one double each): the bits of adding ranks 0..n-1.
  double want = 0;
  for (int q = 0; q < n; ++q) want += q + 0.1;
  EXPECT_EQ(sum_in_rank_order(c, r + 0.1), want);
}

inline void check_broadcast(Comm& c) {
  const int n = c.size(), root = n - 1;
  std::vector<uint16_t> x(7, static_cast<uint16_t>(c.rank() == root ? 0x3f80 : 0));
  c.broadcast(x.data(), 7, DType::kBF16, root);
  for (uint16_t v : x) ASSERT_EQ(v, 0x3f80);
}

// all_to_all: chunk k of rank q's send holds 100 q + k; rank r receives 100 q + r as chunk q.
inline void check_all_to_all(Comm& c) {
  const int n = c.size(), r = c.rank();
  const int64_t count = 3;
  std::vector<float> send(static_cast<size_t>(count * n)), recv(static_cast<size_t>(count * n));
  for (int k = 0; k < n; ++k)
    for (int64_t i = 0; i < count; ++i) send[k * count + i] = 100.0f * r + k + 0.25f * i;
  c.all_to_all(send.data(), recv.data(), count, DType::kF32);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[q * count + i], 100.0f * q + r + 0.25f * i);
}

// all_to_all_v with uneven and zero counts: rank q sends (q + r) % 3 elements to rank r (so
// some pairs exchange nothing, rank 0 sends none to itself), element i of them worth
// 1000 q + 10 r + i. Rank r therefore receives, from q = 0..n-1 in order, (q + r) % 3 elements
// 1000 q + 10 r + i; the stats count the elements sent to the other ranks only.
inline void check_all_to_all_v(Comm& c) {
  const int n = c.size(), r = c.rank();
  auto count = [](int from, int to) { return static_cast<int64_t>((from + to) % 3); };
  std::vector<int64_t> send_counts(static_cast<size_t>(n)), recv_counts(send_counts);
  std::vector<float> send, want;
  int64_t to_others = 0;
  for (int q = 0; q < n; ++q) {
    send_counts[static_cast<size_t>(q)] = count(r, q);
    recv_counts[static_cast<size_t>(q)] = count(q, r);
    for (int64_t i = 0; i < count(r, q); ++i) send.push_back(1000.0f * r + 10.0f * q + i);
    for (int64_t i = 0; i < count(q, r); ++i) want.push_back(1000.0f * q + 10.0f * r + i);
    if (q != r) to_others += count(r, q);
  }
  std::vector<float> recv(want.size(), -1.0f);
  const int64_t before = c.stats().all_to_all_bytes;
  c.all_to_all_v(send.data(), send_counts.data(), recv.data(), recv_counts.data(), DType::kF32);
  ASSERT_EQ(recv, want);
  EXPECT_EQ(c.stats().all_to_all_bytes - before, to_others * 4);
  // Non-blocking, bf16 as raw 16-bit elements, everything to rank 0 (the others receive none).
  std::vector<int64_t> sc(static_cast<size_t>(n), 0), rc(static_cast<size_t>(n), 0);
  sc[0] = 2;
  if (r == 0) std::fill(rc.begin(), rc.end(), 2);
  std::vector<uint16_t> out = {static_cast<uint16_t>(r), static_cast<uint16_t>(7 * r)};
  std::vector<uint16_t> in(r == 0 ? static_cast<size_t>(2 * n) : 0);
  RequestPtr req = c.iall_to_all_v(out.data(), sc.data(), in.data(), rc.data(), DType::kBF16);
  req->wait();
  for (int q = 0; q < n && r == 0; ++q) {
    EXPECT_EQ(in[static_cast<size_t>(2 * q)], q);
    EXPECT_EQ(in[static_cast<size_t>(2 * q + 1)], 7 * q);
  }
}

// A ring of non-blocking send/recv: each rank sends its rank to the next, receives the previous.
inline void check_send_recv(Comm& c) {
  const int n = c.size(), r = c.rank();
  std::vector<int32_t> out = {r, r * r}, in(2, -1);
  RequestPtr rx = c.irecv(in.data(), 2, DType::kI32, (r + n - 1) % n, 7);
  RequestPtr tx = c.isend(out.data(), 2, DType::kI32, (r + 1) % n, 7);
  rx->wait();
  tx->wait();
  const int p = (r + n - 1) % n;
  EXPECT_EQ(in, (std::vector<int32_t>{p, p * p}));
}

// Two reductions in flight while this rank computes, waited in the opposite order.
inline void check_nonblocking_overlap(Comm& c) {
  const int n = c.size(), r = c.rank();
  const int64_t count = 100003;
  std::vector<float> a(count), b(count * n), b_out(count);
  for (int64_t i = 0; i < count; ++i) a[i] = rank_value(r, i);
  for (int64_t i = 0; i < count * n; ++i) b[i] = 1.0f;
  RequestPtr ra = c.iall_reduce(a.data(), count, DType::kF32);
  RequestPtr rb = c.ireduce_scatter(b.data(), b_out.data(), count, DType::kF32);
  double busy = 0;  // compute while the transfers run; poll as a training step would
  for (int k = 0; k < 200; ++k) {
    for (int j = 0; j < 10000; ++j) busy += j * 1e-9;
    ra->test();
  }
  EXPECT_GT(busy, 0);
  rb->wait();
  ra->wait();
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(a[i], rank_sum(n, i));
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(b_out[i], static_cast<float>(n));
}

// split by parity, ordered by descending old rank: the new rank is the position among
// same-parity ranks counted from the top, and a sum over the subgroup sees only them.
inline void check_split(Comm& c) {
  const int n = c.size(), r = c.rank();
  std::unique_ptr<Comm> sub = c.split(r % 2, -r);
  ASSERT_NE(sub, nullptr);
  int members = 0, higher = 0, sum = 0;
  for (int q = r % 2; q < n; q += 2) {
    ++members;
    sum += q;
    if (q > r) ++higher;
  }
  EXPECT_EQ(sub->size(), members);
  EXPECT_EQ(sub->rank(), higher);
  int32_t x = r;
  sub->all_reduce(&x, 1, DType::kI32);
  EXPECT_EQ(x, sum);
  // A negative color leaves a rank out (MPI_UNDEFINED).
  std::unique_ptr<Comm> only_zero = c.split(r == 0 ? 0 : -1, 0);
  EXPECT_EQ(only_zero != nullptr, r == 0);
  c.barrier();
}

// Bytes by the cost model: ring all-reduce 2(n-1)/n S, reduce-scatter (n-1)/n S_in, all-gather
// (n-1)/n S_out; bf16 reductions travel as f32.
inline void check_stats(Comm& c) {
  const int n = c.size();
  c.reset_stats();
  std::vector<float> x(1000, 1.0f), y(1000 * n);
  c.all_reduce(x.data(), 1000, DType::kF32);
  c.all_gather(x.data(), y.data(), 1000, DType::kF32);
  c.reduce_scatter(y.data(), x.data(), 1000, DType::kF32);
  std::vector<uint16_t> h(1000);
  c.all_reduce(h.data(), 1000, DType::kBF16);
  const CommStats& s = c.stats();
  EXPECT_EQ(s.all_reduce_bytes, 2 * (n - 1) * 4000 / n + 2 * (n - 1) * 4000 / n);
  EXPECT_EQ(s.all_gather_bytes, (n - 1) * 4000);
  EXPECT_EQ(s.reduce_scatter_bytes, (n - 1) * 4000);
  EXPECT_EQ(s.calls, 4);
}

// Every check above, in order (all ranks call the same sequence).
inline void check_all_collectives(Comm& c) {
  check_all_reduce_f32(c);
  check_all_reduce_int(c);
  check_bf16_reduced_in_f32(c);
  check_reduce_scatter(c);
  check_all_gather(c);
  check_broadcast(c);
  check_all_to_all(c);
  check_all_to_all_v(c);
  check_send_recv(c);
  check_nonblocking_overlap(c);
  check_split(c);
  check_stats(c);
}

}  // namespace lmstack::dist::test
