/* ts_numeric_decl: the kernel prototypes of ts_numeric.h, written once for a real type TS_R
 * and a name macro TS_F; ts_numeric.h includes this file once per precision (no guard). */

/**
 * GEMM as in BLAS: C[m x n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T.
 * op(A) is m x k: A is stored m x k (lda >= k), or k x m when trans_a (lda >= m); likewise
 * op(B) is k x n: B stored k x n (ldb >= n), or n x k when trans_b (ldb >= k).
 * beta = 0 overwrites C without reading it; beta = 1 accumulates. Blocked and packed
 * (Goto & van de Geijn, ACM TOMS 34(3), 2008): one register micro-kernel for all variants.
 */
void TS_F(ts_gemm)(gboolean trans_a, gboolean trans_b, int m, int n, int k, TS_R alpha,
                   const TS_R *a, int lda, const TS_R *b, int ldb, TS_R beta, TS_R *c, int ldc);

/** y[r][j] += bias[j] for rows x cols. */
void TS_F(ts_bias_add)(int rows, int cols, const TS_R *bias, TS_R *y);
/** dbias[j] += sum_r dy[r][j]. */
void TS_F(ts_bias_grad)(int rows, int cols, const TS_R *dy, TS_R *dbias);

/** y = max(x, 0); y may equal x. */
void TS_F(ts_relu_fwd)(gint64 n, const TS_R *x, TS_R *y);
/** dx = dy where x > 0, else 0 (subgradient 0 at 0); dx may equal dy. */
void TS_F(ts_relu_bwd)(gint64 n, const TS_R *x, const TS_R *dy, TS_R *dx);
/** Exact GELU, y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (Hendrycks & Gimpel 2016, eq. 1). */
void TS_F(ts_gelu_fwd)(gint64 n, const TS_R *x, TS_R *y);
/** dx = dy (Phi(x) + x phi(x)), phi the standard normal density; dx may equal dy. */
void TS_F(ts_gelu_bwd)(gint64 n, const TS_R *x, const TS_R *dy, TS_R *dx);

/**
 * SwiGLU (Shazeer 2020, eq. 5): x is [rows][2 f], gate then up; y [rows][f] = silu(gate) * up,
 * silu(g) = g sigmoid(g).
 */
void TS_F(ts_swiglu_fwd)(int rows, int f, const TS_R *x, TS_R *y);
/** Its backward: dx [rows][2 f] = (dy up silu'(gate), dy silu(gate)); dx must not alias. */
void TS_F(ts_swiglu_bwd)(int rows, int f, const TS_R *x, const TS_R *dy, TS_R *dx);

/** y[i] += alpha * x[i] (BLAS axpy; residual adds, SGD without state). */
void TS_F(ts_axpy)(gint64 n, TS_R alpha, const TS_R *x, TS_R *y);
/** z[i] = x[i] + y[i]; z may equal x or y. */
void TS_F(ts_add)(gint64 n, const TS_R *x, const TS_R *y, TS_R *z);

/**
 * Layer norm over the last axis (Ba, Kiros & Hinton 2016, eq. 4): for each row,
 * y = gamma (x - mean) * rstd + beta, rstd = 1 / sqrt(var + eps), var the biased variance.
 * mean and rstd (rows each) are saved for the backward pass.
 */
void TS_F(ts_layernorm_fwd)(int rows, int cols, TS_R eps, const TS_R *x, const TS_R *gamma,
                            const TS_R *beta, TS_R *y, TS_R *mean, TS_R *rstd);
/**
 * Layer norm backward, with xhat = (x - mean) rstd and g = dy gamma:
 * dx = rstd (g - mean_j(g) - xhat mean_j(g xhat)); dgamma += sum_r dy xhat; dbeta += sum_r dy.
 */
void TS_F(ts_layernorm_bwd)(int rows, int cols, const TS_R *x, const TS_R *gamma, const TS_R *mean,
                            const TS_R *rstd, const TS_R *dy, TS_R *dx, TS_R *dgamma, TS_R *dbeta);

/** Row-wise softmax, max-shifted for stability; y may equal x. */
void TS_F(ts_softmax_fwd)(int rows, int cols, const TS_R *x, TS_R *y);
/** dx = y (dy - sum_j dy y) row-wise; dx may equal dy. */
void TS_F(ts_softmax_bwd)(int rows, int cols, const TS_R *y, const TS_R *dy, TS_R *dx);

/**
 * Softmax cross-entropy: prob = softmax(logits) row-wise; returns the SUM over rows of
 * -log prob[r][labels[r]] (double), so shards of a batch add up; the caller divides.
 */
double TS_F(ts_xent_fwd)(int rows, int cols, const TS_R *logits, const int *labels, TS_R *prob);
/** dlogits = scale (prob - onehot(labels)); scale = 1 / (global rows) for a mean loss. */
void TS_F(ts_xent_bwd)(int rows, int cols, const TS_R *prob, const int *labels, TS_R scale,
                       TS_R *dlogits);

/**
 * Scaled dot-product self-attention of `heads` heads of width dh over b sequences of t tokens
 * (Vaswani et al. 2017, eq. 1): per head, P = softmax(Q K^T / sqrt(dh) [+ causal mask]),
 * O = P V. Q, K, V are rows of token b*t + i, head h at columns h*dh.. of a matrix with
 * leading dimension ld (so they can point into one fused QKV projection); out has leading
 * dimension ldo. p [b][heads][t][t] keeps the probabilities for the backward pass.
 */
void TS_F(ts_attention_fwd)(int b, int t, int heads, int dh, gboolean causal, const TS_R *q,
                            const TS_R *k, const TS_R *v, int ld, TS_R *p, TS_R *out, int ldo);
/**
 * Attention backward: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)),
 * dQ = dS K / sqrt(dh), dK = dS^T Q / sqrt(dh). dq, dk, dv (leading dimension ld) are
 * overwritten; work holds t * t elements.
 */
void TS_F(ts_attention_bwd)(int b, int t, int heads, int dh, const TS_R *q, const TS_R *k,
                            const TS_R *v, int ld, const TS_R *p, const TS_R *dout, int ldo,
                            TS_R *dq, TS_R *dk, TS_R *dv, TS_R *work);

/**
 * Rotary position embedding (Su et al. 2021, RoFormer, eq. 34, in the rotate-half layout of
 * GPT-NeoX and Llama), in place on `heads` heads of width dh (even) of b sequences of t tokens,
 * rows of leading dimension ld: for token i and j < dh/2, angle i 10000^(-2j/dh) rotates the
 * pair (x_j, x_{j+dh/2}). inverse rotates back (the transpose): the backward of the forward.
 */
void TS_F(ts_rope)(int b, int t, int heads, int dh, TS_R *x, int ld, gboolean inverse);

/**
 * Grouped-query attention (Ainslie et al. 2023) on a fused projection qkv [b t][(heads + 2
 * kv_heads) dh]: Q of `heads` heads, then K and V of kv_heads heads each; query head h reads
 * key/value head h / (heads / kv_heads). out [b t][heads dh]; p as ts_attention_fwd.
 */
void TS_F(ts_gqa_attention_fwd)(int b, int t, int heads, int kv_heads, int dh, gboolean causal,
                                const TS_R *qkv, TS_R *p, TS_R *out);
/**
 * Its backward: dqkv (same layout as qkv) is overwritten; each key/value head's gradient sums
 * over the query heads that read it.
 */
void TS_F(ts_gqa_attention_bwd)(int b, int t, int heads, int kv_heads, int dh, const TS_R *qkv,
                                const TS_R *p, const TS_R *dout, TS_R *dqkv);

/**
 * 2D convolution by im2col + GEMM (Chellapilla et al. 2006): y = w * x + bias (bias may be
 * NULL). work: ts_conv_work_elems(s) elements, or NULL to allocate internally.
 */
void TS_F(ts_conv2d_fwd)(const ts_conv_shape *s, const TS_R *x, const TS_R *w, const TS_R *bias,
                         TS_R *y, TS_R *work);
/** Convolution backward: dw += .., dbias += .. (may be NULL), dx overwritten (may be NULL
 *  for a first layer). work as for the forward pass. */
void TS_F(ts_conv2d_bwd)(const ts_conv_shape *s, const TS_R *x, const TS_R *w, const TS_R *dy,
                         TS_R *dx, TS_R *dw, TS_R *dbias, TS_R *work);

/** Max pooling, window k x k, stride k, over [n*c] planes of h x w (output h/k x w/k,
 *  remainder rows and columns dropped). argmax keeps each output's index in its plane. */
void TS_F(ts_maxpool_fwd)(int planes, int h, int w, int k, const TS_R *x, TS_R *y, gint32 *argmax);
/** Max pooling backward: dx overwritten, dy routed to each window's maximum. */
void TS_F(ts_maxpool_bwd)(int planes, int h, int w, int k, const TS_R *dy, const gint32 *argmax,
                          TS_R *dx);

/**
 * SGD with momentum and L2 weight decay, as torch.optim.SGD (dampening 0):
 * g' = g + weight_decay w; vel = momentum vel + g'; w -= lr vel. vel may be NULL when
 * momentum is 0. vel starts at zero.
 */
void TS_F(ts_sgd_step)(gint64 n, TS_R lr, TS_R momentum, TS_R weight_decay, TS_R *w, const TS_R *g,
                       TS_R *vel);
/**
 * Adam step number step (1, 2, ...), Kingma & Ba Algorithm 1: m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; w -= lr mhat / (sqrt(vhat) + eps) with mhat = m / (1-b1^step),
 * vhat = v / (1-b2^step). m and v start at zero.
 */
void TS_F(ts_adam_step)(gint64 n, const ts_adam *hp, int step, TS_R *w, const TS_R *g, TS_R *m,
                        TS_R *v);
