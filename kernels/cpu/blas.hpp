#pragma once

// Dense linear algebra on the CPU, backed by OpenBLAS.
//
// Every matrix is row-major. A leading dimension is the distance, in floats,
// between the starts of consecutive stored rows, so a stored matrix with C
// columns needs ld >= C.

namespace trainhost::kernels::cpu {

// C = alpha * op(A) * op(B) + beta * C, where op(X) is X or X^T.
//
// Shapes are those of the operands after op(): op(A) is m x k, op(B) is k x n
// and C is m x n. A is therefore stored as m x k (k x m when transpose_a) and
// B as k x n (n x k when transpose_b).
//
// Follows BLAS semantics: when beta == 0, C is write-only (NaN or garbage
// already in C does not leak into the result); when k == 0, C = beta * C.
// Throws std::invalid_argument on negative sizes or too-small leading
// dimensions instead of letting BLAS print an error and carry on.
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace trainhost::kernels::cpu
