/* Fused CPU kernels for the engine's fp32 forward pass (see cpu.py for how they are built and
 * called). Each one replaces several PyTorch ops that each read and write the whole tensor and
 * each pay an operator's dispatch cost: on a model this small, a decode step is mostly those
 * costs, not arithmetic. The matrix multiply is here too: PyTorch's (MKL) reached under 40% of
 * what an AVX-512 core of the course's AMD machine allows, and slowed further at a few rows
 * once the weights came from L3; weights packed in panels (gemm_packed) are read as one
 * contiguous stream, with the accumulators in vector registers.
 *
 * Every tensor is fp32 and row-major; `stride` and `ld*` arguments are in floats. Kernels
 * that split work across threads take `threads` (OpenMP; PyTorch's own runtime when PyTorch
 * is loaded first, so the two share one pool of threads). Kernels that index one tensor with
 * another's values (positions, pool slots, slot rows, selected rows) check every index first
 * and return KERNEL_BAD_INDEX, having changed nothing, where PyTorch's indexing would raise;
 * kernels that take heads refuse a shape that does not fit (KERNEL_BAD_HEADS); 0 when done.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_OK 0
#define KERNEL_BAD_INDEX 1
#define KERNEL_NO_MEMORY 2
#define KERNEL_BAD_HEADS 3

/* Grouped-query heads that fit: nh query heads share nkv KV heads evenly, and RoPE rotates
 * head_dim / 2 pairs of channels. Anything else would read past a row or a pool slot. */
static inline int heads_bad(int64_t nh, int64_t nkv, int64_t dim) {
    return nh < 1 || nkv < 1 || nh % nkv != 0 || dim < 2 || dim % 2 != 0;
}

/* VW floats as one value: GCC and Clang compile arithmetic on it to vector instructions
 * (one AVX-512 register of 16 floats; elsewhere 8 floats, one AVX2 register or two NEON ones). */
#ifdef __AVX512F__
#define VW 16
#define GEMM_ROWS 8 /* rows of the product per micro-kernel call: 2 x 8 accumulators */
#else
#define VW 8
#define GEMM_ROWS 4
#endif
#define PANEL (2 * VW) /* columns of a packed weight panel */
typedef float vf __attribute__((vector_size(VW * sizeof(float))));

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* The width of a packed panel, for packing on the Python side. */
int64_t gemm_panel_width(void) { return PANEL; }

/* `rows` rows of y[:, n0 : n0 + ncols] = x[rows, K] @ panel + bias, for one packed panel
 * [K, PANEL] (a weight's columns n0 .. n0 + PANEL - 1, stored k by k). Each step of k reads two
 * vectors of the panel and adds them, times one element of each row of x, into 2 x rows
 * accumulators that stay in registers. */
static inline __attribute__((always_inline)) void gemm_tile(
    const float *x, int64_t ldx, const float *panel, int64_t k_len, const float *bias, float *y,
    int64_t ldy, int64_t ncols, const int rows) {
    vf lo[GEMM_ROWS], hi[GEMM_ROWS];
    for (int r = 0; r < rows; r++) lo[r] = hi[r] = (vf){0};
    for (int64_t k = 0; k < k_len; k++) {
        const vf w_lo = vload(panel + k * PANEL), w_hi = vload(panel + k * PANEL + VW);
        for (int r = 0; r < rows; r++) {
            const float xk = x[r * ldx + k];
            lo[r] += xk * w_lo;
            hi[r] += xk * w_hi;
        }
    }
    if (bias != NULL) {
        const vf b_lo = vload(bias), b_hi = vload(bias + VW);
        for (int r = 0; r < rows; r++) {
            lo[r] += b_lo;
            hi[r] += b_hi;
        }
    }
    for (int r = 0; r < rows; r++) {
        float tile[PANEL];
        vstore(tile, lo[r]);
        vstore(tile + VW, hi[r]);
        memcpy(y + r * ldy, tile, (size_t)ncols * sizeof(float));
    }
}

/* y[M, N] = x[M, K] @ W^T (+ bias), W [N, K] packed as [ceil(N / PANEL), K, PANEL] (columns
 * past N zero; bias, when given, padded the same way). Panels are split across threads. */
void gemm_packed(const float *x, int64_t m, int64_t k_len, int64_t ldx, const float *packed,
                 int64_t n, const float *bias, float *y, int64_t ldy, int64_t threads) {
    const int64_t panels = (n + PANEL - 1) / PANEL;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < panels; p++) {
        const float *panel = packed + p * k_len * PANEL;
        const int64_t n0 = p * PANEL, ncols = n - n0 < PANEL ? n - n0 : PANEL;
        const float *b = bias != NULL ? bias + n0 : NULL;
        for (int64_t m0 = 0; m0 < m; m0 += GEMM_ROWS) {
            const float *xr = x + m0 * ldx;
            float *yr = y + m0 * ldy + n0;
            /* A constant row count per call, so the accumulators can live in registers. */
            switch (m - m0 < GEMM_ROWS ? m - m0 : GEMM_ROWS) {
            case 1: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 1); break;
            case 2: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 2); break;
            case 3: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 3); break;
            case 4: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 4); break;
#if GEMM_ROWS > 4
            case 5: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 5); break;
            case 6: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 6); break;
            case 7: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 7); break;
            case 8: gemm_tile(xr, ldx, panel, k_len, b, yr, ldy, ncols, 8); break;
#endif
            }
        }
    }
}


/* Embedding rows read from a packed matrix (the layout gemm_packed reads, [panels, k_len,
 * panel]) that holds the embedding table as its rows: a tied LM head whose unpacked copy was
 * freed. out[i] = row ids[i], each of k_len floats: column ids[i] % panel of panel
 * ids[i] / panel. Every id is checked against `vocab` before anything is written. */
int64_t embed_packed(const float *packed, int64_t k_len, int64_t panel, int64_t vocab,
                     const int64_t *ids, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) return KERNEL_BAD_INDEX;
    for (int64_t i = 0; i < n; i++) {
        const float *column = packed + (ids[i] / panel) * k_len * panel + ids[i] % panel;
        float *o = out + i * k_len;
        for (int64_t j = 0; j < k_len; j++) o[j] = column[j * panel];
    }
    return KERNEL_OK;
}

/* Residual add, then RMSNorm.
 * If delta is not NULL: x[r] += delta[r] for every one of `rows` rows (the residual stream).
 * Then out[i] = w * x[r] / sqrt(mean(x[r]^2) + eps) for the rows named by `select` (n_select
 * of them; row i when select is NULL), the formula of Hugging Face's LlamaRMSNorm. */
int64_t add_rmsnorm(float *x, const float *delta, const float *w, float *out, int64_t rows,
                    int64_t dim, float eps, const int64_t *select, int64_t n_select) {
    if (select != NULL) {
        for (int64_t i = 0; i < n_select; i++)
            if (select[i] < 0 || select[i] >= rows) return KERNEL_BAD_INDEX;
    } else if (n_select > rows) {
        return KERNEL_BAD_INDEX;
    }
    if (delta != NULL) {
        for (int64_t i = 0; i < rows * dim; i++) x[i] += delta[i];
    }
    for (int64_t i = 0; i < n_select; i++) {
        const float *row = x + (select != NULL ? select[i] : i) * dim;
        float sum = 0.0f;
        for (int64_t j = 0; j < dim; j++) sum += row[j] * row[j];
        const float inv = 1.0f / sqrtf(sum / (float)dim + eps);
        float *o = out + i * dim;
        for (int64_t j = 0; j < dim; j++) o[j] = w[j] * (row[j] * inv);
    }
    return KERNEL_OK;
}

/* One head of RoPE in place: x * cos + rotate_half(x) * sin, with the tables as
 * layers/rotary.py stores them (cos over all D channels, sin with rotate_half's sign folded in:
 * x * cos + roll(x, D/2) * sin). */
static void rope_head(float *x, const float *cos, const float *sin, int64_t dim) {
    const int64_t half = dim / 2;
    float rolled[dim];
    for (int64_t j = 0; j < half; j++) {
        rolled[j] = x[j + half];
        rolled[j + half] = x[j];
    }
    for (int64_t j = 0; j < dim; j++) x[j] = x[j] * cos[j] + rolled[j] * sin[j];
}

/* RoPE on the q and k heads of a packed qkv row block, in place, then K and V into the pool.
 * qkv [T, stride]: q (nh heads), then k (nkv heads), then v (nkv heads), head_dim each.
 * cos/sin [table_len, dim]; positions [T]; slots [T] flat pool slots (block * block_size +
 * offset); pools [pool_len, nkv, dim]. */
int64_t rope_store(float *qkv, int64_t tokens, int64_t stride, int64_t nh, int64_t nkv,
                   int64_t dim, const float *cos, const float *sin, int64_t table_len,
                   const int64_t *positions, float *pool_k, float *pool_v, int64_t pool_len,
                   const int64_t *slots) {
    if (heads_bad(nh, nkv, dim)) return KERNEL_BAD_HEADS;
    const int64_t kv_width = nkv * dim;
    for (int64_t t = 0; t < tokens; t++)
        if (positions[t] < 0 || positions[t] >= table_len || slots[t] < 0 || slots[t] >= pool_len)
            return KERNEL_BAD_INDEX;
    for (int64_t t = 0; t < tokens; t++) {
        float *row = qkv + t * stride;
        const float *c = cos + positions[t] * dim, *s = sin + positions[t] * dim;
        for (int64_t h = 0; h < nh + nkv; h++) rope_head(row + h * dim, c, s, dim);
        memcpy(pool_k + slots[t] * kv_width, row + nh * dim, kv_width * sizeof(float));
        memcpy(pool_v + slots[t] * kv_width, row + (nh + nkv) * dim, kv_width * sizeof(float));
    }
    return KERNEL_OK;
}

/* Scaled scores of one query against keys kt [dim, capacity] at positions 0 .. n-1: channel
 * by channel, each adds q[j] * K[j, p] to 2 x VW positions held in two vector registers. The
 * last tile may run past n (up to the capacity, which decode slots keep a multiple of 32): those
 * scores are computed from unused, finite slot entries and never read. */
static void scores_row(const float *q, const float *kt, int64_t dim, int64_t capacity,
                       int64_t n, float scale, float *sc) {
    int64_t p = 0;
    for (; p < n && p + 2 * VW <= capacity; p += 2 * VW) {
        vf a = {0}, b = {0};
        for (int64_t j = 0; j < dim; j++) {
            const float qj = q[j] * scale;
            a += qj * vload(kt + j * capacity + p);
            b += qj * vload(kt + j * capacity + p + VW);
        }
        vstore(sc + p, a);
        vstore(sc + p + VW, b);
    }
    for (; p < n; p++) {
        float dot = 0.0f;
        for (int64_t j = 0; j < dim; j++) dot += q[j] * kt[j * capacity + p];
        sc[p] = dot * scale;
    }
}

/* Softmax of sc[0 .. n-1] in place. */
static void softmax(float *sc, int64_t n) {
    float top = -FLT_MAX;
    for (int64_t p = 0; p < n; p++) top = sc[p] > top ? sc[p] : top;
    float total = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        sc[p] = expf(sc[p] - top);
        total += sc[p];
    }
    const float inv = 1.0f / total;
    for (int64_t p = 0; p < n; p++) sc[p] *= inv;
}

/* o = sum over p of w[p] * v[p, :], for values vs [n, dim]. */
static void weighted_sum(const float *w, const float *vs, int64_t dim, int64_t n, float *o) {
    if (dim % VW == 0) {
        for (int64_t c = 0; c < dim; c += VW) {
            vf a = {0}, b = {0};  /* two chains, so additions need not wait on each other */
            int64_t p = 0;
            for (; p + 1 < n; p += 2) {
                a += w[p] * vload(vs + p * dim + c);
                b += w[p + 1] * vload(vs + (p + 1) * dim + c);
            }
            if (p < n) a += w[p] * vload(vs + p * dim + c);
            vstore(o + c, a + b);
        }
        return;
    }
    for (int64_t j = 0; j < dim; j++) o[j] = 0.0f;
    for (int64_t p = 0; p < n; p++)
        for (int64_t j = 0; j < dim; j++) o[j] += w[p] * vs[p * dim + j];
}

/* Attention for one-token decodes that read their context from decode slots
 * (layers/decode_slots.py): token t belongs to slot rows[t] at position positions[t].
 * Its new K and V (already rotated, in qkv after q) are written into the slot at that position,
 * then each query head attends over positions 0 .. positions[t] of its KV head (grouped-query:
 * nh / nkv query heads share one). keys [slot rows, nkv, dim, capacity] (transposed, so a
 * channel's keys are contiguous over positions), values [slot rows, nkv, capacity, dim];
 * out [T, nh * dim]. Only real context is read: no padding, no mask. Each slot row appears at
 * most once in `rows` (one token per decoding sequence): two tokens of one row would race. */
int64_t decode_attention(const float *qkv, int64_t tokens, int64_t stride, int64_t nh,
                         int64_t nkv, int64_t dim, float *keys, float *values, int64_t n_rows,
                         int64_t capacity, const int64_t *rows, const int64_t *positions,
                         float scale, float *out, int64_t threads) {
    if (heads_bad(nh, nkv, dim)) return KERNEL_BAD_HEADS;
    const int64_t per_kv = nh / nkv;
    int64_t longest = 0;
    for (int64_t t = 0; t < tokens; t++) {
        if (positions[t] < 0 || positions[t] >= capacity || rows[t] < 0 || rows[t] >= n_rows)
            return KERNEL_BAD_INDEX;
        if (positions[t] + 1 > longest) longest = positions[t] + 1;
    }
    int64_t status = KERNEL_OK;
#pragma omp parallel num_threads(threads)
    {
        float *scores = malloc(sizeof(float) * (size_t)(longest + 2 * VW));
        /* One (token, KV head) pair per iteration; pairs write disjoint slots and outputs. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < tokens * nkv; i++) {
            if (scores == NULL) {
#pragma omp atomic write
                status = KERNEL_NO_MEMORY;
                continue;
            }
            const int64_t t = i / nkv, g = i % nkv;
            const float *row = qkv + t * stride;
            const int64_t pos = positions[t], n = pos + 1;
            float *kt = keys + (rows[t] * nkv + g) * dim * capacity;   /* [dim, capacity] */
            float *vs = values + (rows[t] * nkv + g) * capacity * dim; /* [capacity, dim] */
            const float *k_new = row + (nh + g) * dim, *v_new = row + (nh + nkv + g) * dim;
            for (int64_t j = 0; j < dim; j++) kt[j * capacity + pos] = k_new[j];
            memcpy(vs + pos * dim, v_new, dim * sizeof(float));
            for (int64_t h = g * per_kv; h < (g + 1) * per_kv; h++) {
                scores_row(row + h * dim, kt, dim, capacity, n, scale, scores);
                softmax(scores, n);
                weighted_sum(scores, vs, dim, n, out + t * nh * dim + h * dim);
            }
        }
        free(scores);
    }
    return status;
}

/* Attention for a group of sequences that each bring several queries (prefill chunks,
 * speculative checks), reading K and V from the paged pool [slots, nkv, dim] through each
 * sequence's block table: sequence s has query_lens[s] queries at positions starts[s] ..,
 * packed from row offsets[s] of qkv (q heads first, already rotated; its K/V already in the
 * pool) and of out [rows, nh * dim]. The sequences' rows follow one another and cover all
 * `rows` (offsets[0] = 0, offsets[s + 1] = offsets[s] + query_lens[s]), so every output row
 * is written, each of its heads by one pair only. Each (sequence, KV head) pair copies its context
 * out of the pool once, keys transposed, then every query of the pair's heads attends
 * causally over positions 0 .. its own. Pairs are split across threads. */
int64_t paged_attention(const float *qkv, int64_t rows, int64_t stride, int64_t nh, int64_t nkv,
                        int64_t dim, const float *pool_k, const float *pool_v, int64_t num_blocks,
                        int64_t block_size, const int64_t *block_tables, int64_t max_blocks,
                        const int64_t *offsets, const int64_t *query_lens,
                        const int64_t *starts, int64_t num_seqs, float scale, float *out,
                        int64_t threads) {
    if (heads_bad(nh, nkv, dim)) return KERNEL_BAD_HEADS;
    const int64_t per_kv = nh / nkv, kv_width = nkv * dim, positions = max_blocks * block_size;
    int64_t longest = 0, next_row = 0;
    for (int64_t s = 0; s < num_seqs; s++) {
        /* Compared so that no sum can overflow, whatever the values. */
        if (starts[s] < 0 || query_lens[s] < 0 || starts[s] > positions
            || query_lens[s] > positions - starts[s] || offsets[s] != next_row
            || query_lens[s] > rows - next_row)
            return KERNEL_BAD_INDEX;
        const int64_t n_ctx = starts[s] + query_lens[s];
        next_row += query_lens[s];
        for (int64_t b = 0; b < (n_ctx + block_size - 1) / block_size; b++)
            if (block_tables[s * max_blocks + b] < 0
                || block_tables[s * max_blocks + b] >= num_blocks)
                return KERNEL_BAD_INDEX;
        if (n_ctx > longest) longest = n_ctx;
    }
    if (next_row != rows) return KERNEL_BAD_INDEX;
    /* A tile-aligned capacity, so scores_row reads whole tiles of zeroed keys past the end. */
    const int64_t capacity = (longest + 2 * VW - 1) / (2 * VW) * (2 * VW);
    int64_t status = KERNEL_OK;
#pragma omp parallel num_threads(threads)
    {
        float *kt = calloc((size_t)(dim * capacity), sizeof(float));
        float *vs = malloc(sizeof(float) * (size_t)(capacity * dim));
        float *scores = malloc(sizeof(float) * (size_t)capacity);
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < num_seqs * nkv; i++) {
            if (kt == NULL || vs == NULL || scores == NULL) {
#pragma omp atomic write
                status = KERNEL_NO_MEMORY;
                continue;
            }
            const int64_t s = i / nkv, g = i % nkv, n_ctx = starts[s] + query_lens[s];
            const int64_t *table = block_tables + s * max_blocks;
            for (int64_t p = 0; p < n_ctx; p++) {
                const int64_t slot = table[p / block_size] * block_size + p % block_size;
                const float *k = pool_k + slot * kv_width + g * dim;
                for (int64_t j = 0; j < dim; j++) kt[j * capacity + p] = k[j];
                memcpy(vs + p * dim, pool_v + slot * kv_width + g * dim, dim * sizeof(float));
            }
            /* Past the context: zeros, not an earlier pair's keys (read, never used). */
            for (int64_t j = 0; j < dim; j++)
                memset(kt + j * capacity + n_ctx, 0, (size_t)(capacity - n_ctx) * sizeof(float));
            for (int64_t q = 0; q < query_lens[s]; q++) {
                const int64_t row = offsets[s] + q, n = starts[s] + q + 1;
                for (int64_t h = g * per_kv; h < (g + 1) * per_kv; h++) {
                    scores_row(qkv + row * stride + h * dim, kt, dim, capacity, n, scale, scores);
                    softmax(scores, n);
                    weighted_sum(scores, vs, dim, n, out + row * nh * dim + h * dim);
                }
            }
        }
        free(scores);
        free(vs);
        free(kt);
    }
    return status;
}

/* SwiGLU's elementwise half: out[r, i] = silu(gate) * up, with gate_up [rows, 2 * inter]
 * holding gate then up (the packed gate/up projection); silu(x) = x / (1 + exp(-x)).
 * exp's argument is capped at 80 so it stays finite: under -ffast-math the division becomes a
 * reciprocal estimate refined by a Newton step, which turns 1 / inf into NaN (a gate below
 * about -88 gave NaN). At the cap silu(x) is below 1e-33 in size either way. */
void silu_mul(const float *gate_up, int64_t rows, int64_t inter, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gate_up + r * 2 * inter, *u = g + inter;
        float *o = out + r * inter;
        for (int64_t i = 0; i < inter; i++)
            o[i] = g[i] / (1.0f + expf(fminf(-g[i], 80.0f))) * u[i];
    }
}

/* Every layer of a step whose tokens all decode from their slots, in one call: per layer,
 * add_rmsnorm, the q/k/v matrix multiply, rope_store, decode_attention, the o matrix
 * multiply, add_rmsnorm, gate/up, silu_mul and down, exactly the calls (and order) the Python
 * loop makes, so the results are the same bit for bit. At batch 1 a step is some fifty calls
 * of a few microseconds each, and crossing from Python into C for each cost a fifth of it.
 * layer [n_layers][LAYER_ARGS] holds each layer's addresses (see LAYER_* below); the step's
 * buffers are x [T, hidden] (the residual stream, updated in place), h [T, hidden], qkv
 * [T, qkv_width], attn [T, nh * dim], delta [T, hidden], gate_up [T, 2 * inter], act
 * [T, inter]. On return delta holds the last layer's output, not yet added to x. */
enum { LAYER_INPUT_NORM, LAYER_POST_NORM, LAYER_QKV, LAYER_QKV_BIAS, LAYER_O, LAYER_O_BIAS,
       LAYER_GATE_UP, LAYER_GATE_UP_BIAS, LAYER_DOWN, LAYER_DOWN_BIAS, LAYER_POOL_K,
       LAYER_POOL_V, LAYER_KEYS, LAYER_VALUES, LAYER_ARGS };

int64_t layer_args(void) { return LAYER_ARGS; }

int64_t decode_layers(int64_t n_layers, const int64_t *layer, float *x, float *h, float *qkv,
                      float *attn, float *delta, float *gate_up, float *act, int64_t tokens,
                      int64_t hidden, int64_t inter, int64_t nh, int64_t nkv, int64_t dim,
                      float eps, const float *cos, const float *sin, int64_t table_len,
                      const int64_t *positions, const int64_t *slots, int64_t pool_len,
                      int64_t n_rows, int64_t capacity, const int64_t *rows,
                      const int64_t *row_positions, float scale, int64_t threads) {
    if (heads_bad(nh, nkv, dim)) return KERNEL_BAD_HEADS;
    const int64_t qkv_width = (nh + 2 * nkv) * dim, attn_width = nh * dim;
    int64_t status;
    for (int64_t l = 0; l < n_layers; l++) {
        const int64_t *a = layer + l * LAYER_ARGS;
#define F(i) ((float *)(intptr_t)a[i])
        status = add_rmsnorm(x, l ? delta : NULL, F(LAYER_INPUT_NORM), h, tokens, hidden, eps,
                             NULL, tokens);
        if (status) return status;
        gemm_packed(h, tokens, hidden, hidden, F(LAYER_QKV), qkv_width, F(LAYER_QKV_BIAS), qkv,
                    qkv_width, threads);
        status = rope_store(qkv, tokens, qkv_width, nh, nkv, dim, cos, sin, table_len,
                            positions, F(LAYER_POOL_K), F(LAYER_POOL_V), pool_len, slots);
        if (status) return status;
        status = decode_attention(qkv, tokens, qkv_width, nh, nkv, dim, F(LAYER_KEYS),
                                  F(LAYER_VALUES), n_rows, capacity, rows, row_positions, scale,
                                  attn, threads);
        if (status) return status;
        gemm_packed(attn, tokens, attn_width, attn_width, F(LAYER_O), hidden, F(LAYER_O_BIAS),
                    delta, hidden, threads);
        status = add_rmsnorm(x, delta, F(LAYER_POST_NORM), h, tokens, hidden, eps, NULL,
                             tokens);
        if (status) return status;
        gemm_packed(h, tokens, hidden, hidden, F(LAYER_GATE_UP), 2 * inter,
                    F(LAYER_GATE_UP_BIAS), gate_up, 2 * inter, threads);
        silu_mul(gate_up, tokens, inter, act);
        gemm_packed(act, tokens, inter, inter, F(LAYER_DOWN), hidden, F(LAYER_DOWN_BIAS), delta,
                    hidden, threads);
#undef F
    }
    return 0;
}
