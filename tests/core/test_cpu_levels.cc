// SPDX-License-Identifier: Apache-2.0
// The CPU kernels give the same bits at every instruction-set level this CPU runs (baseline,
// AVX, AVX2, AVX-512; core/cpu/dispatch.h): every kernel of the table on random inputs at the
// widths around the SIMD boundaries, compared byte for byte with the baseline's output. Levels
// the CPU lacks are skipped by name; TESSERA_CPU is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "core/cpu/dispatch.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using cpu::CpuLevel;
using cpu::KernelTable;
using test::kWidths;
using test::random_floats;

// Appends the bytes of `values` to `out`.
template <class T>
void append(std::vector<std::byte>& out, const std::vector<T>& values) {
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  out.insert(out.end(), p, p + values.size() * sizeof(T));
}

// One kernel at one width: everything it writes, as bytes.
struct Case {
  std::string name;
  std::function<std::vector<std::byte>(const KernelTable&, std::int64_t f)> run;
};

std::vector<Case> cases() {
  constexpr std::int64_t kRows = 301;  // odd: vector tails in the row loops too
  static const Csr weighted = test::random_csr(kRows, kRows, 7, true);
  static const Csr plain = test::random_csr(kRows, kRows, 8, false);
  static const std::vector<NodeId> listed = {0, 1, 5, 17, 300, 2, 99};
  static const std::vector<std::int64_t> labels = [] {
    std::vector<std::int64_t> l(kRows);
    for (std::int64_t r = 0; r < kRows; ++r) l[r] = r % 3 == 0 ? -1 : r % 5;
    return l;
  }();
  const auto x = [](std::int64_t f, std::uint32_t seed) {
    return random_floats(static_cast<std::size_t>(kRows * f), seed);
  };
  const auto n = [](std::int64_t f) { return static_cast<std::size_t>(kRows * f); };
  std::vector<Case> out;
  for (const Csr* a : {&weighted, &plain}) {
    out.push_back(
        {a == &weighted ? "spmm (weighted)" : "spmm", [=](const KernelTable& k, std::int64_t f) {
           std::vector<float> y(n(f));
           k.spmm(y.data(), a->view(), x(f, 1).data(), f);
           std::vector<float> rows(n(f), 0.0f);
           k.spmm_rows(rows.data(), a->view(), x(f, 1).data(), listed, f);
           std::vector<std::byte> b;
           append(b, y);
           append(b, rows);
           return b;
         }});
  }
  out.push_back({"to_bf16, spmm_bf16, spmm_rows_bf16", [=](const KernelTable& k, std::int64_t f) {
                   std::vector<std::uint16_t> bits(n(f));
                   k.to_bf16(bits.data(), x(f, 20).data(), kRows * f);
                   std::vector<float> y(n(f)), rows(n(f), 0.0f);
                   k.spmm_bf16(y.data(), weighted.view(), bits.data(), f);
                   k.spmm_rows_bf16(rows.data(), plain.view(), bits.data(), listed, f);
                   std::vector<std::byte> b;
                   append(b, bits);
                   append(b, y);
                   append(b, rows);
                   return b;
                 }});
  out.push_back({"gemm", [=](const KernelTable& k, std::int64_t f) {
                   std::vector<std::byte> b;
                   for (const bool trans : {false, true}) {
                     // (kRows, f) x (f, 37), and the weight-gradient shape (f, kRows) x (kRows,
                     // 37).
                     std::vector<float> c(static_cast<std::size_t>(kRows * 37), 0.5f);
                     k.gemm(c.data(), x(f, 2).data(), false, random_floats(f * 37, 3).data(), trans,
                            1.0f, 0.5f, kRows, 37, f);
                     std::vector<float> g(static_cast<std::size_t>(f * 37));
                     k.gemm(g.data(), x(f, 2).data(), true, random_floats(kRows * 37, 4).data(),
                            false, 1.0f, 0.0f, f, 37, kRows);
                     append(b, c);
                     append(b, g);
                   }
                   return b;
                 }});
  out.push_back({"gemm_bf16_a, gemm_bf16_c", [=](const KernelTable& k, std::int64_t f) {
                   std::vector<std::byte> b;
                   for (const std::int64_t rows : {kRows, std::int64_t{2100}}) {  // 1 and 3 slabs
                     std::vector<std::uint16_t> a(static_cast<std::size_t>(rows * f));
                     k.to_bf16(a.data(), random_floats(rows * f, 5).data(), rows * f);
                     std::vector<float> c(static_cast<std::size_t>(rows * 37), 0.5f);
                     k.gemm_bf16_a(c.data(), a.data(), false, random_floats(f * 37, 6).data(),
                                   false, 1.0f, 0.5f, rows, 37, f);
                     std::vector<float> g(static_cast<std::size_t>(f * 37));
                     k.gemm_bf16_a(g.data(), a.data(), true, random_floats(rows * 37, 7).data(),
                                   false, 1.0f, 0.0f, f, 37, rows);
                     std::vector<std::uint16_t> r(static_cast<std::size_t>(rows * 37));
                     k.gemm_bf16_c(r.data(), random_floats(rows * f, 8).data(),
                                   random_floats(37 * f, 9).data(), true, 0.5f, rows, 37, f);
                     append(b, c);
                     append(b, g);
                     append(b, r);
                   }
                   return b;
                 }});
  out.push_back(
      {"axpy, column_sums, add_doubles, adam_update", [=](const KernelTable& k, std::int64_t f) {
         std::vector<float> y = x(f, 5), sums(static_cast<std::size_t>(f), 1.0f);
         k.axpy(y.data(), 0.3f, x(f, 6).data(), kRows * f);
         k.column_sums(sums.data(), x(f, 7).data(), true, kRows, f);
         std::vector<double> d(n(f));
         for (std::size_t i = 0; i < d.size(); ++i) d[i] = 1e-3 * static_cast<double>(i) / 7.0;
         std::vector<float> added = x(f, 8);
         k.add_doubles(added.data(), d.data(), kRows * f);
         std::vector<float> p = x(f, 9), m = x(f, 10), v = random_floats(n(f), 11, 0.0f, 1.0f);
         const std::vector<float> decay(n(f), 1e-4f);
         k.adam_update(p.data(), m.data(), v.data(), x(f, 12).data(), decay.data(),
                       AdamStep{.step_size = 0.01f, .inv_sqrt_bias2 = 1.3f}, kRows * f);
         std::vector<std::byte> b;
         for (const auto* part : {&y, &sums, &added, &p, &m, &v}) append(b, *part);
         return b;
       }});
  out.push_back(
      {"bias_act, dropout, positive_bits, relu_backward_bits",
       [=](const KernelTable& k, std::int64_t f) {
         const std::vector<float> bias = random_floats(static_cast<std::size_t>(f), 13);
         std::vector<float> y(n(f)), d_x(n(f)), d_bias(static_cast<std::size_t>(f), 0.0f);
         k.bias_act_forward(y.data(), x(f, 14).data(), bias.data(), Activation::Relu, kRows, f);
         k.bias_act_backward(d_x.data(), d_bias.data(), x(f, 15).data(), y.data(), Activation::Relu,
                             kRows, f);
         const CounterRng rng(3, 4, 1, RngPurpose::Dropout);
         std::vector<GlobalId> ids(kRows);
         for (std::int64_t r = 0; r < kRows; ++r) ids[r] = 1000 + 3 * r;
         std::vector<float> dropped(n(f)), d_dropped(n(f));
         k.dropout_forward(dropped.data(), x(f, 16).data(), 0.4f, rng, ids.data(), kRows, f);
         k.dropout_backward(d_dropped.data(), x(f, 17).data(), 0.4f, rng, ids.data(), kRows, f);
         std::vector<std::uint8_t> bits(static_cast<std::size_t>(kRows * ((f + 7) / 8)));
         k.positive_bits(bits.data(), x(f, 20).data(), kRows, f);
         std::vector<float> masked(n(f)), d_bias_bits(static_cast<std::size_t>(f), 0.0f);
         k.relu_backward_bits(masked.data(), d_bias_bits.data(), x(f, 21).data(), bits.data(),
                              kRows, f);
         std::vector<std::byte> b;
         for (const auto* part : {&y, &d_x, &d_bias, &dropped, &d_dropped, &masked, &d_bias_bits})
           append(b, *part);
         append(b, bits);
         return b;
       }});
  out.push_back({"gather_rows, scatter_add_rows", [=](const KernelTable& k, std::int64_t f) {
                   std::vector<float> gathered(listed.size() * static_cast<std::size_t>(f));
                   k.gather_rows(gathered.data(), x(f, 18).data(), listed, f);
                   std::vector<float> scattered = x(f, 19);
                   k.scatter_add_rows(scattered.data(), gathered.data(), listed, f);
                   std::vector<NodeId> distinct(listed.begin(), listed.end());
                   std::sort(distinct.begin(), distinct.end());
                   distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
                   std::vector<float> placed = x(f, 20);
                   k.scatter_rows(placed.data(), gathered.data(), distinct, f);
                   std::vector<std::byte> b;
                   append(b, gathered);
                   append(b, scattered);
                   append(b, placed);
                   return b;
                 }});
  out.push_back({"losses", [=](const KernelTable& k, std::int64_t f) {
                   const std::int64_t c = std::max<std::int64_t>(f, 5);  // labels are in [0, 5)
                   const std::vector<float> logits =
                       random_floats(static_cast<std::size_t>(kRows * c), 20, -4, 4);
                   std::vector<float> logp(logits.size()), d_logits(logits.size());
                   k.log_softmax_forward(logp.data(), logits.data(), kRows, c);
                   const std::vector<double> nll = {
                       k.nll_loss_sum(logp.data(), labels.data(), listed, c)};
                   k.log_softmax_nll_backward(d_logits.data(), logp.data(), labels.data(), listed,
                                              0.1f, kRows, c);
                   std::vector<float> targets = random_floats(n(f), 21, 0.0f, 1.0f);
                   for (std::size_t i = 0; i < targets.size(); i += 7) targets[i] = std::nanf("");
                   std::int64_t count = 0;
                   const std::vector<double> bce = {
                       k.sigmoid_bce_loss_sum(&count, x(f, 22).data(), targets.data(), listed, f)};
                   std::vector<float> d_bce(n(f));
                   k.sigmoid_bce_backward(d_bce.data(), x(f, 22).data(), targets.data(), listed,
                                          0.2f, kRows, f);
                   std::vector<std::byte> b;
                   for (const auto* part : {&logp, &d_logits, &d_bce}) append(b, *part);
                   append(b, nll);
                   append(b, bce);
                   append(b, std::vector<std::int64_t>{count});
                   return b;
                 }});
  out.push_back({"batch_norm", [=](const KernelTable& k, std::int64_t f) {
                   std::vector<double> sum(static_cast<std::size_t>(f)), sum_sq(sum.size()),
                       sum_dy(sum.size()), sum_dy_xhat(sum.size());
                   k.batch_norm_stats(sum.data(), sum_sq.data(), x(f, 23).data(), kRows, f);
                   const std::vector<float> mean = random_floats(sum.size(), 24),
                                            inv_std = random_floats(sum.size(), 25, 0.5f, 2.0f),
                                            gamma = random_floats(sum.size(), 26),
                                            beta = random_floats(sum.size(), 27);
                   std::vector<float> y(n(f)), x_hat(n(f)), d_x(n(f));
                   k.batch_norm_forward(y.data(), x_hat.data(), x(f, 23).data(), mean.data(),
                                        inv_std.data(), gamma.data(), beta.data(), kRows, f);
                   k.batch_norm_backward_stats(sum_dy.data(), sum_dy_xhat.data(), x(f, 28).data(),
                                               x_hat.data(), kRows, f);
                   k.batch_norm_backward(d_x.data(), x(f, 28).data(), x_hat.data(), gamma.data(),
                                         inv_std.data(), sum_dy.data(), sum_dy_xhat.data(), kRows,
                                         kRows, f);
                   std::vector<std::byte> b;
                   for (const auto* part : {&sum, &sum_sq, &sum_dy, &sum_dy_xhat}) append(b, *part);
                   for (const auto* part : {&y, &x_hat, &d_x}) append(b, *part);
                   return b;
                 }});
  out.push_back(
      {"gat attention", [=](const KernelTable& k, std::int64_t f) {
         // 3 heads of width f over the plain pattern (its columns are its rows).
         const std::int64_t heads = 3, hd = heads * f, w = hd + heads;
         const CounterRng rng(1, 2, 3, RngPurpose::AttentionDropout);
         std::vector<GlobalId> ids(kRows);
         std::iota(ids.begin(), ids.end(), GlobalId{500});
         const cpu::AttentionDropoutArgs drop{0.3f, &rng, ids.data()};
         std::vector<NodeId> all(kRows);
         std::iota(all.begin(), all.end(), NodeId{0});
         const std::vector<float> z = random_floats(n(hd), 29), att = random_floats(2 * hd, 30),
                                  g = random_floats(n(hd), 31);
         std::vector<float> zs(n(w)), s_dst(n(heads)), y(n(hd)), alpha(plain.nnz() * heads),
             d_score(alpha.size()), d_s_dst(n(heads)), d_z(n(hd)), d_att(2 * hd, 0.0f);
         k.gat_project(zs.data(), s_dst.data(), z.data(), att.data(), kRows, heads, f);
         k.gat_attention_forward(y.data(), alpha.data(), plain.view(), zs.data(), s_dst.data(),
                                 heads, f, 0.2f, drop, all);
         k.gat_attention_backward(d_score.data(), d_s_dst.data(), alpha.data(), plain.view(),
                                  g.data(), zs.data(), s_dst.data(), heads, f, 0.2f, drop, all);
         k.gat_project_backward(d_z.data(), d_att.data(), zs.data(), d_s_dst.data(), zs.data(),
                                att.data(), kRows, heads, f);
         std::vector<std::byte> b;
         for (const auto* part : {&zs, &s_dst, &y, &alpha, &d_score, &d_s_dst, &d_z, &d_att})
           append(b, *part);
         return b;
       }});
  return out;
}

// The level in use is restored after each test.
class CpuLevels : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = cpu::cpu_level(); }
  void TearDown() override { cpu::set_cpu_level(saved_); }

 private:
  CpuLevel saved_ = CpuLevel::Baseline;
};

TEST_F(CpuLevels, EveryKernelGivesTheBaselinesBitsAtEveryLevel) {
  test::ThreadCount threads(2);
  std::vector<CpuLevel> levels;
  for (CpuLevel level : cpu::built_cpu_levels()) {
    if (level == CpuLevel::Baseline) continue;
    if (cpu::cpu_supports(level)) {
      levels.push_back(level);
    } else {
      std::printf("[ skipped  ] %s: not run by this CPU\n", cpu::to_string(level));
    }
  }
  if (levels.empty()) GTEST_SKIP() << "no level beside the baseline built and runnable here";
  for (const Case& c : cases()) {
    for (const std::int64_t f : kWidths) {
      cpu::set_cpu_level(CpuLevel::Baseline);
      const std::vector<std::byte> want = c.run(cpu::kernels(), f);
      for (CpuLevel level : levels) {
        cpu::set_cpu_level(level);
        const std::vector<std::byte> got = c.run(cpu::kernels(), f);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
            << c.name << " at width " << f << ": " << cpu::to_string(level)
            << " differs from the baseline";
      }
    }
  }
}

// Where SpMM prefetches the rows it gathers changes its speed only: the spmm kernels give the
// same bits prefetching into L1 or L2, at every level this CPU runs.
TEST_F(CpuLevels, SpmmGivesTheSameBitsPrefetchingIntoL1OrL2) {
  test::ThreadCount threads(2);
  const cpu::PrefetchTarget saved = cpu::spmm_prefetch_target();
  int compared = 0;
  for (CpuLevel level : cpu::built_cpu_levels()) {
    if (!cpu::cpu_supports(level)) continue;
    cpu::set_cpu_level(level);
    for (const Case& c : cases()) {
      if (c.name.find("spmm") == std::string::npos) continue;
      for (const std::int64_t f : kWidths) {
        cpu::set_spmm_prefetch_target(cpu::PrefetchTarget::L1);
        const std::vector<std::byte> l1 = c.run(cpu::kernels(), f);
        cpu::set_spmm_prefetch_target(cpu::PrefetchTarget::L2);
        const std::vector<std::byte> l2 = c.run(cpu::kernels(), f);
        ASSERT_EQ(l1.size(), l2.size());
        EXPECT_EQ(std::memcmp(l1.data(), l2.data(), l1.size()), 0)
            << c.name << " at width " << f << ", " << cpu::to_string(level)
            << ": prefetching into L2 changes the result";
        ++compared;
      }
    }
  }
  cpu::set_spmm_prefetch_target(saved);
  EXPECT_GT(compared, 0);
  EXPECT_NE(
      cpu::cpu_kernels_description().find(std::string("SpMM prefetch ") + cpu::to_string(saved)),
      std::string::npos)
      << cpu::cpu_kernels_description();
}

// The default target by vendor and family: L2 where it was measured to win (AMD Zen 4, family
// 0x19) and on the Zen generations before it; L1 on Zen 5 (0x1A), where it gained nothing, and
// on every other CPU.
TEST(SpmmPrefetch, TheDefaultTargetFollowsTheCpuFamily) {
  EXPECT_EQ(cpu::default_spmm_prefetch_target(true, 0x19), cpu::PrefetchTarget::L2);  // Zen 3, 4
  EXPECT_EQ(cpu::default_spmm_prefetch_target(true, 0x17), cpu::PrefetchTarget::L2);  // Zen 1, 2
  EXPECT_EQ(cpu::default_spmm_prefetch_target(true, 0x1A), cpu::PrefetchTarget::L1);  // Zen 5
  EXPECT_EQ(cpu::default_spmm_prefetch_target(true, 0x15), cpu::PrefetchTarget::L1);  // Bulldozer
  EXPECT_EQ(cpu::default_spmm_prefetch_target(false, 6), cpu::PrefetchTarget::L1);    // Intel
  EXPECT_EQ(cpu::default_spmm_prefetch_target(false, 0x19), cpu::PrefetchTarget::L1);
}

TEST_F(CpuLevels, TheWidestSupportedLevelRunsByDefault) {
  CpuLevel widest = CpuLevel::Baseline;
  for (CpuLevel level : cpu::built_cpu_levels())
    if (cpu::cpu_supports(level)) widest = level;
  if (std::getenv("TESSERA_CPU") == nullptr) {
    EXPECT_EQ(cpu::cpu_level(), widest);
  }
  const std::string text = cpu::cpu_kernels_description();
  EXPECT_NE(text.find("built: baseline"), std::string::npos) << text;
  EXPECT_NE(text.find("BLAS: "), std::string::npos) << text;
}

// OpenBLAS's core names by the vectors they use, and the check of the chosen core against this
// CPU: weaker exactly when a known core is below the widest one the CPU runs.
TEST_F(CpuLevels, OpenBlasCoresAreRankedByTheirVectors) {
  EXPECT_EQ(cpu::openblas_core_level("Prescott"), 0);
  EXPECT_EQ(cpu::openblas_core_level("SANDYBRIDGE"), 1);
  EXPECT_EQ(cpu::openblas_core_level("Haswell"), 2);
  EXPECT_EQ(cpu::openblas_core_level("Zen"), 2);
  EXPECT_EQ(cpu::openblas_core_level("SkylakeX"), 3);
  EXPECT_EQ(cpu::openblas_core_level("cooperlake"), 3);
  EXPECT_EQ(cpu::openblas_core_level("NoSuchCore"), -1);
  const cpu::BlasKernels blas = cpu::blas_kernels();
  EXPECT_FALSE(blas.chosen.empty());
  const int chosen = cpu::openblas_core_level(blas.chosen);
  const int best = blas.best.empty() ? -1 : cpu::openblas_core_level(blas.best);
  EXPECT_EQ(blas.weaker, chosen >= 0 && best >= 0 && chosen < best)
      << blas.chosen << " " << blas.best;
  EXPECT_EQ(cpu::cpu_kernels_description().find("OPENBLAS_CORETYPE=") != std::string::npos,
            blas.weaker);
  if (cpu::cpu_supports(CpuLevel::Avx512)) {
    EXPECT_EQ(blas.best, "SkylakeX");
  }
}

TEST_F(CpuLevels, ALevelThisCpuLacksIsRefusedByName) {
  for (CpuLevel level : cpu::built_cpu_levels()) {
    if (cpu::cpu_supports(level)) continue;
    try {
      cpu::set_cpu_level(level);
      ADD_FAILURE() << cpu::to_string(level) << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not run"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(cpu::set_cpu_level(CpuLevel::Baseline));
}

}  // namespace
}  // namespace tessera
