// SPDX-License-Identifier: Apache-2.0
// CUDA CSR SpMM through cuSPARSE's generic API. cuSPARSE is chosen over a custom kernel: its
// CSR_ALG2 for row-major dense operands is deterministic and tuned per architecture, and SpMM
// is the step that dominates a GCN epoch. The sparse descriptor is made once per matrix and the
// dense descriptors and work buffer once per feature width; each call only re-points the dense
// descriptors at this call's arrays.
#include <cusparse.h>

#include <limits>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/libraries.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {
namespace {

constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG2;

template <class T>
void upload_vector(DeviceBuffer& buffer, const std::vector<T>& host) {
  buffer = DeviceBuffer(host.size() * sizeof(T));
  if (host.empty()) return;
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(buffer.get(), host.data(), host.size() * sizeof(T),
                                     cudaMemcpyHostToDevice, compute_stream()));
}

cusparseSpMatDescr_t as_descriptor(void* p) { return static_cast<cusparseSpMatDescr_t>(p); }

}  // namespace

struct CudaCsr::Plan {
  cusparseDnMatDescr_t x = nullptr;
  cusparseDnMatDescr_t out = nullptr;
  cusparseSpMMAlg_t algorithm = kAlgorithm;
  DeviceBuffer work;
  ~Plan() {
    if (x) cusparse().destroy_dn_mat(x);
    if (out) cusparse().destroy_dn_mat(out);
  }
};

CudaCsr::CudaCsr(const CsrView& a) { upload(a, {}, /*subset=*/false); }

CudaCsr::CudaCsr(const CsrView& a, std::span<const NodeId> rows) { upload(a, rows, true); }

CudaCsr::~CudaCsr() {
  plans_.clear();
  if (descriptor_) cusparse().destroy_sp_mat(as_descriptor(descriptor_));
}

std::size_t CudaCsr::matrix_bytes() const {
  return indptr_.bytes() + indices_.bytes() + values_.bytes();
}

void CudaCsr::upload(const CsrView& a, std::span<const NodeId> rows, bool subset) {
  num_rows_ = subset ? static_cast<std::int64_t>(rows.size()) : a.num_rows;
  num_cols_ = a.num_cols;
  // The rows to copy, in order, and the resulting offsets (64-bit first).
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(num_rows_) + 1, 0);
  for (std::int64_t i = 0; i < num_rows_; ++i) {
    const std::int64_t src = subset ? rows[static_cast<std::size_t>(i)] : i;
    offsets[static_cast<std::size_t>(i) + 1] =
        offsets[static_cast<std::size_t>(i)] + (a.indptr[src + 1] - a.indptr[src]);
  }
  nnz_ = offsets.back();
  wide_indices_ = nnz_ >= std::numeric_limits<std::int32_t>::max() ||
                  num_cols_ >= std::numeric_limits<std::int32_t>::max();
  std::vector<float> values(static_cast<std::size_t>(nnz_), 1.0f);
  std::vector<NodeId> indices(static_cast<std::size_t>(nnz_));
  for (std::int64_t i = 0; i < num_rows_; ++i) {
    const std::int64_t src = subset ? rows[static_cast<std::size_t>(i)] : i;
    EdgeOffset out = offsets[static_cast<std::size_t>(i)];
    for (EdgeOffset j = a.indptr[src]; j < a.indptr[src + 1]; ++j, ++out) {
      indices[static_cast<std::size_t>(out)] = a.indices[j];
      if (a.values) values[static_cast<std::size_t>(out)] = a.values[j];
    }
  }
  if (wide_indices_) {
    upload_vector(indptr_, offsets);
    upload_vector(indices_, std::vector<std::int64_t>(indices.begin(), indices.end()));
  } else {
    upload_vector(indptr_, std::vector<std::int32_t>(offsets.begin(), offsets.end()));
    upload_vector(indices_, indices);
  }
  upload_vector(values_, values);
  if (subset) upload_vector(source_rows_, std::vector<NodeId>(rows.begin(), rows.end()));
  const cusparseIndexType_t index_type = wide_indices_ ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
  cusparseSpMatDescr_t descriptor = nullptr;
  TESSERA_CUSPARSE_CHECK(cusparse().create_csr(
      &descriptor, num_rows_, num_cols_, nnz_, indptr_.get(), indices_.get(), values_.get(),
      index_type, index_type, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  descriptor_ = descriptor;
  // The host vectors are freed on return: wait until the copies have read them.
  synchronize_compute();
}

void CudaCsr::multiply(float* out, const float* x, std::int64_t f) const {
  if (num_rows_ == 0 || f == 0) return;
  if (nnz_ == 0) {  // cuSPARSE may reject an empty matrix; the product is zero
    TESSERA_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(num_rows_ * f) *
                                                   sizeof(float), compute_stream()));
    return;
  }
  cusparseHandle_t handle = cusparse_handle();
  const float alpha = 1.0f, beta = 0.0f;
  auto& plan = plans_[f];
  if (!plan) {
    plan = std::make_unique<Plan>();
    TESSERA_CUSPARSE_CHECK(cusparse().create_dn_mat(
        &plan->x, num_cols_, f, f, const_cast<float*>(x), CUDA_R_32F, CUSPARSE_ORDER_ROW));
    TESSERA_CUSPARSE_CHECK(
        cusparse().create_dn_mat(&plan->out, num_rows_, f, f, out, CUDA_R_32F, CUSPARSE_ORDER_ROW));
    std::size_t work_bytes = 0;
    cusparseStatus_t status = cusparse().spmm_buffer_size(
        handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
        as_descriptor(descriptor_), plan->x, &beta, plan->out, CUDA_R_32F, plan->algorithm,
        &work_bytes);
    if (status == CUSPARSE_STATUS_NOT_SUPPORTED) {  // e.g. a width ALG2 does not take
      plan->algorithm = CUSPARSE_SPMM_ALG_DEFAULT;
      status = cusparse().spmm_buffer_size(handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                           CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                           as_descriptor(descriptor_), plan->x, &beta, plan->out,
                                           CUDA_R_32F, plan->algorithm, &work_bytes);
    }
    TESSERA_CUSPARSE_CHECK(status);
    plan->work = DeviceBuffer(work_bytes);
  } else {
    TESSERA_CUSPARSE_CHECK(cusparse().dn_mat_set_values(plan->x, const_cast<float*>(x)));
    TESSERA_CUSPARSE_CHECK(cusparse().dn_mat_set_values(plan->out, out));
  }
  TESSERA_CUSPARSE_CHECK(cusparse().spmm(handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                         CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                         as_descriptor(descriptor_), plan->x, &beta, plan->out,
                                         CUDA_R_32F, plan->algorithm, plan->work.get()));
}

void spmm(float* out, const CudaCsr& a, const float* x, std::int64_t f) { a.multiply(out, x, f); }

void spmm_rows(float* out, const CudaCsr& a_sub, const float* x, std::int64_t f,
               DeviceBuffer& scratch) {
  const std::int64_t n = a_sub.num_rows();
  if (n == 0 || f == 0) return;
  TESSERA_CHECK(a_sub.source_rows() != nullptr, InvalidArgument,
                "spmm_rows: the matrix was not built from a row list (use the row-subset "
                "CudaCsr constructor)");
  scratch.reserve(static_cast<std::size_t>(n * f) * sizeof(float));
  a_sub.multiply(scratch.as<float>(), x, f);
  scatter_rows(out, scratch.as<float>(), a_sub.source_rows(), n, f);
}

}  // namespace tessera::cuda
