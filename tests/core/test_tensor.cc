// SPDX-License-Identifier: Apache-2.0
// Tests of Tensor (shape, dtype, zero/clone/resize), Device parsing and tessera::Error.
#include <gtest/gtest.h>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

TEST(Tensor, ZerosHasShapeAndZeroContents) {
  Tensor t = Tensor::zeros(3, 5);
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.cols(), 5);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.bytes(), 60u);
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.device(), Device::cpu());
  for (float v : test::values_of(t)) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(t.shape_string(), "(3, 5)");
}

TEST(Tensor, RowsAreContiguousRowMajor) {
  Tensor t(4, 3);
  for (int i = 0; i < 12; ++i) t.f32()[i] = static_cast<float>(i);
  EXPECT_EQ(t.row<float>(2)[1], 7.0f);
  EXPECT_EQ(t.row<float>(2), t.f32() + 6);
}

TEST(Tensor, StorageIsAligned) {
  Tensor t(3, 7);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw()) % 64, 0u);
}

TEST(Tensor, CloneCopiesAndIsIndependent) {
  Tensor a = test::random_tensor(5, 9, 1);
  Tensor b = a.clone();
  EXPECT_TRUE(test::bitwise_equal(test::values_of(b), test::values_of(a), 9));
  EXPECT_NE(a.raw(), b.raw());
  b.f32()[0] = 42.0f;
  EXPECT_NE(a.f32()[0], 42.0f);
}

TEST(Tensor, MoveTransfersStorage) {
  Tensor a(2, 2);
  void* storage = a.raw();
  Tensor b = std::move(a);
  EXPECT_EQ(b.raw(), storage);
  EXPECT_EQ(b.rows(), 2);
}

TEST(Tensor, ResizeReallocatesOnlyOnShapeChange) {
  Tensor t(4, 4);
  void* storage = t.raw();
  t.resize(4, 4);
  EXPECT_EQ(t.raw(), storage);
  t.resize(2, 8);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 8);
}

TEST(Tensor, EmptyTensorsWork) {
  Tensor none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.shape_string(), "(0, 0)");
  Tensor zero_rows = Tensor::zeros(0, 16);
  EXPECT_TRUE(zero_rows.empty());
  EXPECT_EQ(zero_rows.cols(), 16);
  Tensor copy = zero_rows.clone();
  EXPECT_EQ(copy.shape_string(), "(0, 16)");
}

TEST(Tensor, OtherDtypesHaveTheirSizes) {
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I8), 1u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  Tensor t = Tensor::zeros(3, 4, DType::I32);
  EXPECT_EQ(t.bytes(), 48u);
  EXPECT_EQ(t.data<std::int32_t>()[11], 0);
}

TEST(Tensor, WrongTypedAccessIsInternalError) {
  Tensor t(2, 2, DType::I32);
  EXPECT_TRUE(test::throws_error([&] { (void)t.f32(); }, ErrorCategory::Internal, "i32"));
}

TEST(Tensor, NegativeShapeIsInvalidArgument) {
  EXPECT_TRUE(
      test::throws_error([] { Tensor t(-1, 3); }, ErrorCategory::InvalidArgument, "negative"));
}

TEST(Tensor, CheckShapeSaysExpectedAndFound) {
  Tensor t(2, 3);
  check_shape(t, 2, 3, "t");
  EXPECT_TRUE(test::throws_error([&] { check_shape(t, 3, 3, "weights"); },
                                 ErrorCategory::InvalidArgument,
                                 "weights: expected (3, 3), got (2, 3)"));
}

TEST(Tensor, CopiesBetweenTensorsAndDevices) {
  Tensor a(2, 3);
  for (int i = 0; i < 6; ++i) a.f32()[i] = static_cast<float>(i) + 0.5f;
  const Tensor b = a.to(Device::cpu());
  EXPECT_NE(b.raw(), a.raw());
  EXPECT_EQ(b.device(), Device::cpu());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.f32()[i], a.f32()[i]);
  Tensor c(2, 3);
  c.copy_from(a);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.f32()[i], a.f32()[i]);
  Tensor wrong(3, 2);
  EXPECT_TRUE(test::throws_error([&] { wrong.copy_from(a); }, ErrorCategory::InvalidArgument,
                                 "copy_from: source (2, 3) f32 does not match destination (3, 2)"));
  Tensor ids(2, 3, DType::I64);
  EXPECT_TRUE(test::throws_error([&] { ids.copy_from(a); }, ErrorCategory::InvalidArgument,
                                 "destination (2, 3) i64"));
}

TEST(Tensor, ResizeOnADeviceKeepsOrMovesTheStorage) {
  Tensor t(4, 4);
  const void* storage = t.raw();
  t.resize(4, 4, Device::cpu());  // same shape, same device: nothing moves
  EXPECT_EQ(t.raw(), storage);
  t.resize(2, 8, Device::cpu());
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 8);
  EXPECT_EQ(t.device(), Device::cpu());
}

TEST(Device, ParsesCpuAndRefusesOthers) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(to_string(Device::cpu()), "cpu");
  EXPECT_TRUE(test::throws_error([] { parse_device("cuda:0"); }, ErrorCategory::Cuda, "cuda"));
  EXPECT_TRUE(
      test::throws_error([] { parse_device("tpu"); }, ErrorCategory::InvalidArgument, "tpu"));
}

TEST(Error, CarriesCategoryLocationAndMessage) {
  try {
    TESSERA_FAIL(InvalidInput, "bad value ", 7);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidInput);
    EXPECT_EQ(e.message(), "bad value 7");
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("test_tensor.cc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("invalid input"), std::string::npos);
    return;
  }
  FAIL() << "TESSERA_FAIL did not throw";
}

TEST(Tensor, BorrowedMemoryIsSharedAndNeverFreed) {
  std::vector<float> owner(6, 1.0f);
  {
    Tensor t = Tensor::borrow(owner.data(), 2, 3);
    EXPECT_EQ(t.f32(), owner.data());
    t.row<float>(1)[2] = 7.0f;
    t.resize(2, 3);  // its own shape: the same memory
    EXPECT_EQ(t.f32(), owner.data());
    Tensor moved = std::move(t);
    EXPECT_EQ(moved.f32(), owner.data());
  }  // destroyed: the vector keeps its memory (a free here would be a double free below)
  EXPECT_EQ(owner[5], 7.0f);
  Tensor grown = Tensor::borrow(owner.data(), 2, 3);
  grown.resize(4, 3);  // another shape: memory of its own
  EXPECT_NE(grown.f32(), owner.data());
  EXPECT_EQ(owner[5], 7.0f);
}

}  // namespace
}  // namespace tessera
