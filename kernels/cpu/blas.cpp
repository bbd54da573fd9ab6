#include "kernels/cpu/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainhost::kernels::cpu {
namespace {

void require_leading_dimension(const char* name, int leading_dimension, int stored_columns) {
    // BLAS rejects ld < 1 even for empty matrices, so mirror that rule here
    // rather than discover it through xerbla's stderr message.
    const int minimum = std::max(1, stored_columns);
    if (leading_dimension < minimum) {
        throw std::invalid_argument(std::string("gemm: ") + name + " = " + std::to_string(leading_dimension) +
                                    " is smaller than the required " + std::to_string(minimum));
    }
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
    if (m < 0 || n < 0 || k < 0) {
        throw std::invalid_argument("gemm: negative dimension (m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                                    ", k=" + std::to_string(k) + ")");
    }
    require_leading_dimension("lda", lda, transpose_a ? m : k);
    require_leading_dimension("ldb", ldb, transpose_b ? k : n);
    require_leading_dimension("ldc", ldc, n);
    if (m == 0 || n == 0) {
        return;
    }
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace trainhost::kernels::cpu
