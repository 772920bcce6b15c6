// Bit-exact emulation of a library GEMM chain (tcsmt.kernels.cuda), compiled at run time by NVRTC.
//
// A second implementation, for speed, of tcsmt.arith.semantics.dot for the chained library paths
// (reduction "chain", product_exponent "raw", align "trunc", unbounded carry bits, block_round "rz",
// overflow_result "inf", zero_sign "positive"; c_mode "aligned" or "after_instr"), with C = +0.
// Exact integer arithmetic only: no floating-point instruction takes part in the emulated arithmetic.
//
// Decoded operand (decode_operands): sig = signed integer significand (0 for zeros, NaN, inf),
// A's shifted left by C0 = F - 2f so that a product sa*sb is the product's magnitude on the grid
// 2^(top - F) (top = ea + eb, the "raw" alignment exponent); exp = e (emin for subnormals), or
// ZERO_EXP for a zero significand so that the block maximum leaves it out without a test.
// The compile-time constants (BK, F, ...) come from -D options set by tcsmt/kernels/cuda.py.
//
// The scalar functions (DEVFN) also compile as host C++ (g++ -x c++): the kernels are left out there
// and the host loops at the end of this file run the same per-output functions, so that
// tests/test_gemm_cuda_host.py checks their arithmetic against tcsmt.arith.semantics on a machine
// without a GPU.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TCSMT_CUDA 1
#define DEVFN __device__ __forceinline__
#define CLZLL(x) __clzll(x)
#else
#include <cstdlib>
#define DEVFN static inline
#define CLZLL(x) __builtin_clzll(x)
using std::abs;
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
#endif

#ifndef BK
#define BK 16          // block_k: products per block
#endif
#ifndef F_BITS
#define F_BITS 25      // F: window fraction bits below 2^E
#endif
#ifndef FB
#define FB 23          // block_frac_bits
#endif
#ifndef HAS_FLOOR
#define HAS_FLOOR 1
#endif
#ifndef ALIGN_FLOOR
#define ALIGN_FLOOR (-133)
#endif
#ifndef AFTER_INSTR
#define AFTER_INSTR 0  // c_mode "after_instr": runs of INSTR_K products chained from +0, added with RNE
#endif
#ifndef INSTR_K
#define INSTR_K 0
#endif
#ifndef OUT_FRAC
#define OUT_FRAC 23    // output format (fp32, or fp16/bf16 reached by one RNE conversion)
#endif
#ifndef OUT_EXPB
#define OUT_EXPB 8
#endif

#define ZERO_EXP (-1024)
#define ACC_EMIN (-126)
#define ACC_EMAX 127
#define TM 4
#define TN 4
#define TX 16
#define TY 16
#define KT 32

typedef long long i64;
typedef unsigned long long u64;

#ifdef TCSMT_CUDA
// ---------------------------------------------------------------------------------- decoding
// fmt: exp_bits, frac_bits, pad_bits, bias, fn (1: e4m3 "fn" specials: NaN = all ones, no inf).
// cls: 0 finite, 1 NaN, 2 +inf, 3 -inf (the special-value flags of tcsmt.arith.semantics.decode).
extern "C" __global__ void decode_operands(const unsigned int* __restrict__ bits, int n, int rows, int cols,
                                           int transpose, int exp_bits, int frac_bits, int pad_bits, int bias,
                                           int fn, int sig_shift, int2* __restrict__ out,
                                           unsigned char* __restrict__ cls, int out_rows, int out_cols) {
    // input (rows, cols) row-major; output (out_rows, out_cols) row-major, transposed when asked,
    // zero-padded (every padded slot is written by the caller's memset: sig 0, exp ZERO_EXP)
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int r = idx / cols, c = idx % cols;
    unsigned int x = bits[idx] >> pad_bits;
    unsigned int frac = x & ((1u << frac_bits) - 1u);
    unsigned int expf = (x >> frac_bits) & ((1u << exp_bits) - 1u);
    unsigned int sign = (x >> (frac_bits + exp_bits)) & 1u;
    unsigned int top = (1u << exp_bits) - 1u;
    int special, nan;
    if (fn) {
        nan = (expf == top) && (frac == (1u << frac_bits) - 1u);
        special = nan;
    } else {
        special = (expf == top);
        nan = special && frac != 0;
    }
    int emin = 1 - bias;
    int e = expf == 0 ? emin : (int)expf - bias;
    int sig = expf == 0 ? (int)frac : (int)(frac | (1u << frac_bits));
    if (special) sig = 0;
    sig <<= sig_shift;
    int2 d;
    d.x = sign ? -sig : sig;
    d.y = sig == 0 ? ZERO_EXP : e;
    int o = transpose ? c * out_cols + r : r * out_cols + c;
    out[o] = d;
    cls[o] = special ? (nan ? 1 : (sign ? 3 : 2)) : 0;
}

#endif  // TCSMT_CUDA

// --------------------------------------------------------------------------------- rounding
// tcsmt.arith.semantics.round_to for a value (-1)^neg * mag * 2^lsb into a format with emin, frac_bits
// fb (of the format's frac bits), RZ or RNE; returns the significand q (hidden bit included when
// normal) and the exponent e_eff (emin for subnormals), overflow when it exceeds emax (the caller
// gives inf: overflow_result "inf", or RNE).  mag != 0.
struct Rounded {
    unsigned int q;
    int e;
    bool overflow;
};

DEVFN Rounded round_mag(u64 mag, int lsb, int emin, int emax, int fb, bool rne) {
    int m = 63 - CLZLL(mag);
    int e = lsb + m;
    int e_eff = max(e, emin);
    int sh = e_eff - fb - lsb;
    u64 q;
    if (sh <= 0) {
        q = mag << (-sh);  // -sh <= fb + 1 (the value then has at most fb + 1 bits)
    } else if (sh >= 64) {
        q = 0;
        if (rne) { /* mag < 2^64 <= 2^(sh-1)... below half: no increment */ }
    } else {
        q = mag >> sh;
        if (rne) {
            u64 rem = mag & ((1ull << sh) - 1ull);
            u64 half = 1ull << (sh - 1);
            if (rem > half || (rem == half && (q & 1ull))) q += 1;
        }
    }
    if (q >= (2ull << fb)) {  // the rounding carried into a new bit
        q >>= 1;
        e_eff += 1;
    }
    Rounded r;
    r.q = (unsigned int)q;
    r.e = e_eff;
    r.overflow = (q >= (1ull << fb)) && e_eff > emax;
    return r;
}

// The accumulator (fp32 in the model's terms) held decoded: value = sig * 2^(e - 23), sig signed,
// |sig| < 2^24 (e8m13 results keep their low 23 - FB bits zero); e = ZERO_EXP for zero.
struct Acc {
    int sig;
    int e;
};

// exact x + y of two accumulator values rounded once to fp32 with RNE (tcsmt.arith.semantics.add_rounded
// with fp32 operands; overflow -> inf).  Exact: the larger operand's significand is shifted up by
// 38 bits and the smaller one's bits below that grid are jammed into one sticky bit, which lies
// at least 13 bits below the rounding position (the smaller value is then below 2^(E - 38)).
// flags: the merged flags of x and y on entry (a special operand: the result is special, 0 here).
DEVFN Acc add_rne(Acc x, Acc y, unsigned char& flags) {
    if (flags) {
        Acc z;
        z.sig = 0;
        z.e = ZERO_EXP;
        return z;
    }
    if (x.sig == 0) return y;
    if (y.sig == 0) return x;
    Acc hi = x.e >= y.e ? x : y;
    Acc lo = x.e >= y.e ? y : x;
    int L = hi.e - 23 - 38;
    i64 X = (i64)hi.sig * (1ll << 38);
    int d = (lo.e - 23) - L;
    i64 Y;
    if (d >= 0) {
        Y = (i64)lo.sig * (1ll << d);
    } else {
        unsigned int a = (unsigned int)abs(lo.sig);
        int s = -d;
        unsigned int kept = s >= 32 ? 0u : (a >> s);
        unsigned int lost = s >= 32 ? a : (a & ((1u << s) - 1u));
        i64 v = (i64)(kept | (lost != 0u ? 1u : 0u));
        Y = lo.sig < 0 ? -v : v;
    }
    i64 S = X + Y;
    Acc out;
    if (S == 0) {  // an exact cancellation: +0 (RNE)
        out.sig = 0;
        out.e = ZERO_EXP;
        return out;
    }
    bool neg = S < 0;
    Rounded r = round_mag((u64)(neg ? -S : S), L, ACC_EMIN, ACC_EMAX, 23, true);
    if (r.overflow) {
        flags |= neg ? 2 : 1;
        out.sig = 0;
        out.e = ZERO_EXP;
        return out;
    }
    out.sig = neg ? -(int)r.q : (int)r.q;
    out.e = r.q == 0 ? ZERO_EXP : r.e;
    return out;
}

// The end of one block (tcsmt.arith.semantics.block_sum then sum_and_round): S is the sum of the
// block's aligned products on the grid 2^(E - F); the accumulator joins as C; the sum is rounded
// toward zero to FB fraction bits.  flags: bit 0 +inf, bit 1 -inf seen (an overflowing block
// gives inf: overflow_result "inf"); the finite part then restarts from 0, as the semantics'
// next block decodes an infinite C with significand 0.
DEVFN Acc finish_block(i64 S, int E, Acc c, unsigned char& flags) {
    Acc out;
    out.sig = 0;
    out.e = ZERO_EXP;
    // flags already set (this block's products, or C special): the block's result is NaN or inf
    // whatever its finite part (apply_flags), and the next block reads it with significand 0
    if (flags) return out;
    if (c.sig != 0) {
        // C on the grid: |c| * 2^(c.e - 23 - (E - F)), truncated (c.e <= E)
        int r = (E - c.e) + (23 - F_BITS) + 8;
        u64 cm = (u64)(unsigned int)abs(c.sig) << 8;
        i64 ca = r >= 64 ? 0 : (i64)(cm >> r);
        S += c.sig < 0 ? -ca : ca;
    }
    if (S == 0) return out;  // +0: zero_sign "positive" with C = +0 (no -0 can arise)
    bool neg = S < 0;
    Rounded rr = round_mag((u64)(neg ? -S : S), E - F_BITS, ACC_EMIN, ACC_EMAX, FB, false);
    if (rr.overflow) {
        flags |= neg ? 2 : 1;
        return out;
    }
    if (rr.q == 0) return out;  // a non-zero sum that truncates to zero gives +0
    unsigned int sig = rr.q << (23 - FB);
    out.sig = neg ? -(int)sig : (int)sig;
    out.e = rr.e;
    return out;
}

DEVFN int block_start_exp(Acc c) {
#if HAS_FLOOR
    return max(c.e, ALIGN_FLOOR);
#else
    return c.e;
#endif
}

// The output bits: the accumulator (fp32 bits), or its one RNE conversion to the output format
// (tcsmt.arith.semantics.convert, out_round "rne", subnormals kept), with the flags (apply_flags).
DEVFN unsigned int output_bits(Acc a, unsigned char flags) {
    const int out_bias = (1 << (OUT_EXPB - 1)) - 1;
    const unsigned int inf = ((1u << OUT_EXPB) - 1u) << OUT_FRAC;
    const unsigned int sign_bit = 1u << (OUT_EXPB + OUT_FRAC);
    if ((flags & 4) || (flags & 3) == 3) return inf | ((1u << OUT_FRAC) - 1u);  // NVIDIA's canonical NaN
    if (flags & 1) return inf;
    if (flags & 2) return inf | sign_bit;
    if (a.sig == 0) return 0u;
    bool neg = a.sig < 0;
    unsigned int mag = (unsigned int)abs(a.sig);
    Rounded r = round_mag((u64)mag, a.e - 23, 1 - out_bias, out_bias, OUT_FRAC, true);
    unsigned int s = neg ? sign_bit : 0u;
    if (r.overflow) return inf | s;
    bool normal = r.q >= (1u << OUT_FRAC);
    unsigned int expf = normal ? (unsigned int)(r.e + out_bias) : 0u;
    unsigned int frac = normal ? r.q - (1u << OUT_FRAC) : r.q;
    return s | (expf << OUT_FRAC) | frac;
}

DEVFN unsigned int shr_clamp(unsigned int x, unsigned int s) {
#ifdef TCSMT_CUDA
    unsigned int r;
    asm("shr.b32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(s));  // PTX clamps shifts >= 32 (gives 0)
    return r;
#else
    return s >= 32u ? 0u : x >> s;
#endif
}

#ifdef TCSMT_CUDA
// ------------------------------------------------------------------------------- main kernel
// A: decoded (Kp, Mp) (k-major), B: decoded (Kp, Np); out: (M, N) output bits (uint32).
// Each CTA computes a (TY*TM) x (TX*TN) tile; each thread TM x TN outputs, rows ty + TY*i and
// columns tx + TX*j.  Special inputs (NaN, inf) decode to significand 0 here; the outputs whose row
// or column holds one are recomputed by gemm_specials.
extern "C" __global__ void __launch_bounds__(TX * TY) gemm_chain(const int2* __restrict__ A, const int2* __restrict__ B,
                                                                 int M, int N, int Mp, int Np, int Kp,
                                                                 unsigned int* __restrict__ out, int out_ld) {
    __shared__ int2 As[KT][TY * TM];
    __shared__ int2 Bs[KT][TX * TN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * (TY * TM), col0 = blockIdx.x * (TX * TN);
    Acc acc[TM][TN];
#if AFTER_INSTR
    Acc held[TM][TN];
    unsigned char hflags[TM][TN];  // flags of the fp32 accumulator the runs are added to
#endif
    unsigned char flags[TM][TN];   // flags of the chain (of the current run with after_instr)
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            acc[i][j].sig = 0;
            acc[i][j].e = ZERO_EXP;
#if AFTER_INSTR
            held[i][j] = acc[i][j];
            hflags[i][j] = 0;
#endif
            flags[i][j] = 0;
        }
    int done = 0;  // products consumed
    for (int k0 = 0; k0 < Kp; k0 += KT) {
        // stage KT x 64 decoded elements of A and of B (each thread 8 of each)
#pragma unroll
        for (int t = 0; t < (KT * TY * TM) / (TX * TY); t++) {
            int idx = tid + t * TX * TY;
            int kk = idx / (TY * TM), rr = idx % (TY * TM);
            As[kk][rr] = A[(size_t)(k0 + kk) * Mp + row0 + rr];
            Bs[kk][rr] = B[(size_t)(k0 + kk) * Np + col0 + rr];
        }
        __syncthreads();
#pragma unroll 1
        for (int kb = 0; kb < KT; kb += BK) {
            int E[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) E[i][j] = block_start_exp(acc[i][j]);
            // pass 1: E = the largest alignment exponent of the block's non-zero terms
#pragma unroll 4
            for (int k = kb; k < kb + BK; k++) {
                int ea[TM], eb[TN];
#pragma unroll
                for (int i = 0; i < TM; i++) ea[i] = As[k][ty + TY * i].y;
#pragma unroll
                for (int j = 0; j < TN; j++) eb[j] = Bs[k][tx + TX * j].y;
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) E[i][j] = max(E[i][j], ea[i] + eb[j]);
            }
            // pass 2: each product truncated (sign-magnitude) onto the grid 2^(E - F), summed exactly
            int S[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) S[i][j] = 0;
#pragma unroll 4
            for (int k = kb; k < kb + BK; k++) {
                int2 a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM; i++) a[i] = As[k][ty + TY * i];
#pragma unroll
                for (int j = 0; j < TN; j++) b[j] = Bs[k][tx + TX * j];
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) {
                        int p = a[i].x * b[j].x;                       // |p| < 2^(F+2)
                        unsigned int sh = (unsigned int)(E[i][j] - a[i].y - b[j].y);  // >= 0
                        unsigned int m = shr_clamp((unsigned int)abs(p), sh);
                        int sx = p >> 31;
                        S[i][j] += ((int)m ^ sx) - sx;                 // |S| < 2^31: checked on the host
                    }
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = finish_block((i64)S[i][j], E[i][j], acc[i][j], flags[i][j]);
            done += BK;
#if AFTER_INSTR
            if (done % INSTR_K == 0) {
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) {
                        hflags[i][j] |= flags[i][j];
                        held[i][j] = add_rne(acc[i][j], held[i][j], hflags[i][j]);
                        flags[i][j] = 0;
                        acc[i][j].sig = 0;
                        acc[i][j].e = ZERO_EXP;
                    }
            }
#endif
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int r = row0 + ty + TY * i, c = col0 + tx + TX * j;
#if AFTER_INSTR
            flags[i][j] |= hflags[i][j];
            Acc fin = add_rne(acc[i][j], held[i][j], flags[i][j]);  // a last, shorter run (+0 if none)
#else
            Acc fin = acc[i][j];
#endif
            if (r < M && c < N) out[(size_t)r * out_ld + c] = output_bits(fin, flags[i][j]);
        }
}

// ------------------------------------------------------------------------ special values
// One thread per output whose row of A or column of B holds a NaN or an infinity: the same chain
// with the special-value flags of every product (tcsmt.arith.semantics.product_term, merge_flags):
// NaN if an input is NaN or inf * 0 (0 finite); otherwise inf of the product's sign.
extern "C" __global__ void gemm_specials(const int2* __restrict__ A, const int2* __restrict__ B,
                                         const unsigned char* __restrict__ Acls, const unsigned char* __restrict__ Bcls,
                                         const unsigned char* __restrict__ row_special,
                                         const unsigned char* __restrict__ col_special,
                                         int M, int N, int Mp, int Np, int Kp,
                                         unsigned int* __restrict__ out, int out_ld) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (c >= N || r >= M) return;
    if (!row_special[r] && !col_special[c]) return;
    Acc acc, held;
    acc.sig = 0;
    acc.e = ZERO_EXP;
    held = acc;
    unsigned char flags = 0, hflags = 0;
    (void)held;
    (void)hflags;
    // 4-byte loads of the (sig, exp) pairs: int2 loads here faulted (misaligned address) on the H100
    // for e4m3 inputs with block_k = 32, an unexplained code-generation issue
    const int* Aw = reinterpret_cast<const int*>(A);
    const int* Bw = reinterpret_cast<const int*>(B);
    for (int k0 = 0; k0 < Kp; k0 += BK) {
        int E = block_start_exp(acc);
        for (int k = k0; k < k0 + BK; k++) E = max(E, Aw[2 * ((size_t)k * Mp + r) + 1] + Bw[2 * ((size_t)k * Np + c) + 1]);
        i64 S = 0;
        for (int k = k0; k < k0 + BK; k++) {
            int2 a, b;
            a.x = Aw[2 * ((size_t)k * Mp + r)];
            a.y = Aw[2 * ((size_t)k * Mp + r) + 1];
            b.x = Bw[2 * ((size_t)k * Np + c)];
            b.y = Bw[2 * ((size_t)k * Np + c) + 1];
            unsigned char ca = Acls[(size_t)k * Mp + r], cb = Bcls[(size_t)k * Np + c];
            if (ca | cb) {
                bool a_zero = ca == 0 && a.x == 0, b_zero = cb == 0 && b.x == 0;
                bool nan = ca == 1 || cb == 1 || (ca >= 2 && b_zero) || (cb >= 2 && a_zero);
                if (nan) {
                    flags |= 4;
                } else {
                    // an infinite product: its sign is the xor of the factors' signs
                    bool na = ca >= 2 ? ca == 3 : a.x < 0, nb = cb >= 2 ? cb == 3 : b.x < 0;
                    // a finite zero factor with an inf was NaN above; a finite factor has sig != 0
                    flags |= (na != nb) ? 2 : 1;
                }
                continue;
            }
            int p = a.x * b.x;
            unsigned int sh = (unsigned int)(E - a.y - b.y);
            unsigned int m = shr_clamp((unsigned int)abs(p), sh);
            S += p < 0 ? -(i64)m : (i64)m;
        }
        acc = finish_block(S, E, acc, flags);
#if AFTER_INSTR
        if ((k0 + BK) % INSTR_K == 0) {
            hflags |= flags;
            held = add_rne(acc, held, hflags);
            flags = 0;
            acc.sig = 0;
            acc.e = ZERO_EXP;
        }
#endif
    }
#if AFTER_INSTR
    flags |= hflags;
    acc = add_rne(acc, held, flags);
#endif
    out[(size_t)r * out_ld + c] = output_bits(acc, flags);
}
#endif  // TCSMT_CUDA

// ===================================================================== library finish
// After the K-chains (tcsmt.library.evaluate): the split-K partials reduced
// (tcsmt.arith.semantics.reduce_partials), the epilogue steps in fp32 (tcsmt.library.evaluate.epilogue),
// RNE to the output format (tcsmt.arith.semantics.convert); and exact conversions of bit patterns
// (C and bias to fp32, fp32 inputs to tf32).  Every operation is one IEEE 754 operation computed
// exactly and rounded once (add_rounded, mul_rounded, fma_rounded with the IEEE conventions of
// evaluate.IEEE32: RNE, overflow to inf, +0 for an exact cancellation, subnormals kept, NVIDIA's
// canonical NaN), here on integers only.

// A format's fields and special patterns (set by tcsmt/kernels/cuda.py from tcsmt.arith.formats).
struct Fmt {
    int eb, fb, pad;                 // exponent bits, fraction bits, low pad bits (tf32: 13)
    unsigned int nan, pinf, ninf;    // Format.nan_pattern(), inf_pattern(False), inf_pattern(True)
};

// An addend (-1)^neg * mag * 2^lsb (semantics.value_term / product_term) and special flags
// (bit 0 +inf, bit 1 -inf, bit 2 NaN: semantics.Flags).
struct Val {
    bool neg;
    u64 mag;
    int lsb;
};

#define RZ_MODE 0
#define RNE_MODE 1
#define RNA_MODE 2

// semantics.decode + value_term of one pattern (subnormals kept; a special has mag 0 and a flag)
DEVFN Val decode_val(unsigned int bits, Fmt f, unsigned char& flags) {
    unsigned int x = bits >> f.pad;
    unsigned int frac = x & ((1u << f.fb) - 1u);
    unsigned int top = (1u << f.eb) - 1u;
    unsigned int expf = (x >> f.fb) & top;
    Val v;
    v.neg = ((x >> (f.fb + f.eb)) & 1u) != 0u;
    int bias = (1 << (f.eb - 1)) - 1;
    if (expf == top) {  // IEEE specials
        flags |= frac != 0u ? 4 : (v.neg ? 2 : 1);
        v.mag = 0;
        v.lsb = 0;
        return v;
    }
    v.mag = expf == 0u ? (u64)frac : (u64)(frac | (1u << f.fb));
    v.lsb = (expf == 0u ? 1 - bias : (int)expf - bias) - f.fb;
    return v;
}

// semantics.round_to into f with f.fb fraction bits: (-1)^neg * mag * 2^lsb (mag < 2^62) rounded with
// mode (RZ, RNE, RNA), subnormals kept; overflow gives inf (RNE, RNA) or the largest finite (RZ).
DEVFN unsigned int round_pack(bool neg, u64 mag, int lsb, Fmt f, int mode) {
    unsigned int sign = neg ? 1u << (f.eb + f.fb + f.pad) : 0u;
    if (mag == 0) return sign;
    int bias = (1 << (f.eb - 1)) - 1;
    int emin = 1 - bias, emax = bias;
    int m = 63 - CLZLL(mag);
    int e_eff = max(lsb + m, emin);
    int sh = e_eff - f.fb - lsb;  // >= -f.fb
    u64 q;
    bool half = false, sticky = false;
    if (sh <= 0) {
        q = mag << (-sh);
    } else {
        q = sh >= 64 ? 0ull : mag >> sh;
        half = sh - 1 < 64 && ((mag >> (sh - 1)) & 1ull) != 0ull;
        sticky = sh >= 2 && (sh - 1 >= 64 ? mag != 0ull : (mag & ((1ull << (sh - 1)) - 1ull)) != 0ull);
    }
    bool inc = mode == RNE_MODE ? (half && (sticky || (q & 1ull) != 0ull)) : (mode == RNA_MODE ? half : false);
    if (inc) q += 1;
    if (q >= (2ull << f.fb)) {
        q >>= 1;
        e_eff += 1;
    }
    bool normal = q >= (1ull << f.fb);
    if (normal && e_eff > emax) {
        if (mode == RZ_MODE)
            return sign | ((((unsigned int)(emax + bias) << f.fb) | ((1u << f.fb) - 1u)) << f.pad);
        return sign | ((((1u << f.eb) - 1u) << f.fb) << f.pad);
    }
    unsigned int expf = normal ? (unsigned int)(e_eff + bias) : 0u;
    unsigned int frac = normal ? (unsigned int)(q - (1ull << f.fb)) : (unsigned int)q;
    return sign | (((expf << f.fb) | frac) << f.pad);
}

// semantics.apply_flags after merge_flags: NaN (a NaN, or +inf with -inf), else the infinity, else bits
DEVFN unsigned int with_flags(unsigned int bits, unsigned char flags, Fmt f) {
    if ((flags & 4) || (flags & 3) == 3) return f.nan;
    if (flags & 1) return f.pinf;
    if (flags & 2) return f.ninf;
    return bits;
}

// the magnitude of v on the grid 2^L (v's top bit below 2^(L + 58)); bits below the grid are jammed
// into one sticky unit (kept | lost != 0)
DEVFN u64 on_grid_jam(Val v, int L) {
    if (v.lsb >= L) return v.mag << (v.lsb - L);
    int s = L - v.lsb;
    u64 kept = s >= 64 ? 0ull : v.mag >> s;
    u64 lost = s >= 64 ? v.mag : (v.mag & ((1ull << s) - 1ull));
    return kept | (lost != 0ull ? 1ull : 0ull);
}

// x + y rounded once into f with RNE (semantics.sum_and_round of two terms, F = None, with the IEEE
// zero signs: an exact cancellation gives +0, two zeros give -0 only when both are negative).
// Exactness of the 64-bit sum, for addends of at most 48 bits (fp32 products and values): with
// T = 1 + the larger top bit and L = T - 58, the term whose top is T - 1 lies on 2^(L + 10) or
// above (48 bits at most); a term with bits below 2^L has its top below 2^(T - 11), so the sum lies
// above 2^(T - 2) and its rounding grid is 2^(T - 25) or coarser; that term's magnitude with the bits
// below 2^L jammed into a sticky unit lies in the same open interval between multiples of 2^(L + 1)
// as the exact one, and so does the sum: every rounding boundary, a multiple of 2^(L + 1), is
// on the same side of both.
DEVFN unsigned int add2_round(Val x, Val y, Fmt f) {
    if (x.mag == 0 && y.mag == 0) return round_pack(x.neg && y.neg, 0, 0, f, RNE_MODE);
    if (y.mag == 0) return round_pack(x.neg, x.mag, x.lsb, f, RNE_MODE);
    if (x.mag == 0) return round_pack(y.neg, y.mag, y.lsb, f, RNE_MODE);
    int tx = x.lsb + (63 - CLZLL(x.mag)), ty = y.lsb + (63 - CLZLL(y.mag));
    int L = max(tx, ty) + 1 - 58;
    i64 X = (i64)on_grid_jam(x, L), Y = (i64)on_grid_jam(y, L);
    i64 S = (x.neg ? -X : X) + (y.neg ? -Y : Y);
    if (S == 0) return 0u;  // exact cancellation under RNE: +0
    bool neg = S < 0;
    return round_pack(neg, (u64)(neg ? -S : S), L, f, RNE_MODE);
}

// semantics.product_term of two decoded values ("raw" exponents do not matter here: F = None)
DEVFN Val product_val(Val a, unsigned char fa, Val b, unsigned char fb_, unsigned char& flags) {
    Val p;
    p.neg = a.neg != b.neg;
    p.mag = a.mag * b.mag;
    p.lsb = a.lsb + b.lsb;
    bool a_nan = (fa & 4) != 0, b_nan = (fb_ & 4) != 0;
    bool a_inf = (fa & 3) != 0, b_inf = (fb_ & 3) != 0;
    bool a_fz = a.mag == 0 && !a_inf && !a_nan, b_fz = b.mag == 0 && !b_inf && !b_nan;
    bool nan = a_nan || b_nan || (a_inf && b_fz) || (b_inf && a_fz);
    if (nan) flags |= 4;
    else if (a_inf || b_inf) flags |= p.neg ? 2 : 1;
    return p;
}

// semantics.add_rounded(x in fx, y in fy) into f with RNE
DEVFN unsigned int add_rounded_bits(unsigned int x, Fmt fx, unsigned int y, Fmt fy, Fmt f) {
    unsigned char fl = 0;
    Val a = decode_val(x, fx, fl), b = decode_val(y, fy, fl);
    return with_flags(add2_round(a, b, f), fl, f);
}

// semantics.fma_rounded(x, y in fxy, z in fz) into f with RNE: one fused multiply-add
DEVFN unsigned int fma_rounded_bits(unsigned int x, unsigned int y, Fmt fxy, unsigned int z, Fmt fz, Fmt f) {
    unsigned char fx = 0, fy = 0, fl = 0;
    Val a = decode_val(x, fxy, fx), b = decode_val(y, fxy, fy);
    Val p = product_val(a, fx, b, fy, fl);
    Val c = decode_val(z, fz, fl);
    return with_flags(add2_round(p, c, f), fl, f);
}

// semantics.mul_rounded(x, y) in f with RNE (one term: a zero product keeps the xor of the signs)
DEVFN unsigned int mul_rounded_bits(unsigned int x, unsigned int y, Fmt f) {
    unsigned char fx = 0, fy = 0, fl = 0;
    Val a = decode_val(x, f, fx), b = decode_val(y, f, fy);
    Val p = product_val(a, fx, b, fy, fl);
    return with_flags(round_pack(p.neg, p.mag, p.lsb, f, RNE_MODE), fl, f);
}

// semantics.convert(bits, src, dst, mode) (subnormals kept; the same format: the bits unchanged, NaN payloads too)
DEVFN unsigned int convert_bits_one(unsigned int bits, Fmt src, Fmt dst, int mode) {
    if (src.eb == dst.eb && src.fb == dst.fb && src.pad == dst.pad) return bits;
    unsigned char fl = 0;
    Val v = decode_val(bits, src, fl);
    return with_flags(round_pack(v.neg, v.mag, v.lsb, dst, mode), fl, dst);
}

#define RED_FP32_FORWARD 0
#define RED_PAIRWISE 1
#define RED_OUT_ROUNDED 2
#define RED_OUT_CHAIN 3
#define RED_OUT_CHAIN_ACC_ADD 4
#define MAX_PARTS 64
#define STEP_SCALE 1
#define STEP_ALPHA 2
#define STEP_BETA_C 3
#define STEP_ALPHA_BETA_C 4
#define STEP_BIAS 5
#define STEP_SCALE_B_THEN_A 6
#define STEP_OUT_ROUND_C 7

// The operands of the finish of one call: partials (S, n) row-major, n = r * c outputs of r rows and
// c columns; optional fp32 C (n), bias (c), scales (1, r or c values); steps: 4 bits each, first
// step lowest.
struct FinishArgs {
    const unsigned int* parts;
    int S;
    long long n;
    int c;
    int reduce;
    Fmt out;
    Fmt f32;
    const unsigned int* C;
    const unsigned int* bias;
    const unsigned int* sa;
    int sa_n;
    const unsigned int* sb;
    int sb_n;
    unsigned int alpha, beta;
    int steps, nsteps;
};

// one output: tcsmt.library.evaluate.evaluate after the chains (reduce_partials, epilogue, convert)
DEVFN unsigned int finish_one(const FinishArgs& a, long long idx) {
    const Fmt A = a.f32, O = a.out;
    unsigned int y;
    bool in_out = false;  // the reduction's result is in the output format (out_chain schemes)
    if (a.S == 1) {
        y = a.parts[idx];
    } else if (a.reduce == RED_PAIRWISE) {
        unsigned int v[MAX_PARTS];
        for (int s = 0; s < a.S; s++) v[s] = a.parts[(long long)s * a.n + idx];
        int m = a.S;
        while (m > 1) {
            int k = 0;
            for (int i = 0; i + 1 < m; i += 2) v[k++] = add_rounded_bits(v[i], A, v[i + 1], A, A);
            if (m & 1) v[k++] = v[m - 1];
            m = k;
        }
        y = v[0];
    } else if (a.reduce == RED_FP32_FORWARD || a.reduce == RED_OUT_ROUNDED) {
        y = 0u;
        for (int s = 0; s < a.S; s++) {
            unsigned int q = a.parts[(long long)s * a.n + idx];
            if (a.reduce == RED_OUT_ROUNDED) q = convert_bits_one(convert_bits_one(q, A, O, RNE_MODE), O, A, RNE_MODE);
            y = s == 0 ? q : add_rounded_bits(y, A, q, A, A);
        }
    } else {  // out_chain, out_chain_acc_add
        y = convert_bits_one(a.parts[idx], A, O, RNE_MODE);
        for (int s = 1; s < a.S; s++) {
            unsigned int q = a.parts[(long long)s * a.n + idx];
            if (a.reduce == RED_OUT_CHAIN) y = add_rounded_bits(y, O, q, A, O);
            else y = convert_bits_one(add_rounded_bits(y, O, q, A, A), A, O, RNE_MODE);
        }
        in_out = true;
    }
    if (in_out) y = convert_bits_one(y, O, A, RNE_MODE);  // exact
    long long i = idx / a.c, j = idx % a.c;
    for (int t = 0; t < a.nsteps; t++) {
        int step = (a.steps >> (4 * t)) & 15;
        unsigned int sa = a.sa ? a.sa[a.sa_n == 1 ? 0 : i] : 0u;
        unsigned int sb = a.sb ? a.sb[a.sb_n == 1 ? 0 : j] : 0u;
        if (step == STEP_SCALE) {
            y = fma_rounded_bits(y, mul_rounded_bits(sa, sb, A), A, 0u, A, A);
        } else if (step == STEP_SCALE_B_THEN_A) {
            y = mul_rounded_bits(mul_rounded_bits(y, sb, A), sa, A);
        } else if (step == STEP_ALPHA) {
            y = mul_rounded_bits(a.alpha, y, A);
        } else if (step == STEP_BETA_C) {
            y = fma_rounded_bits(a.beta, a.C[idx], A, y, A, A);
        } else if (step == STEP_ALPHA_BETA_C) {
            y = fma_rounded_bits(a.alpha, y, A, mul_rounded_bits(a.beta, a.C[idx], A), A, A);
        } else if (step == STEP_OUT_ROUND_C) {  // semantics.round_through to the output format, then + C
            y = add_rounded_bits(convert_bits_one(convert_bits_one(y, A, O, RNE_MODE), O, A, RNE_MODE), A, a.C[idx], A, A);
        } else if (step == STEP_BIAS) {
            y = add_rounded_bits(y, A, a.bias[j], A, A);
        }
    }
    return convert_bits_one(y, A, O, RNE_MODE);
}

// The kernels' flat arguments (plain scalars and device pointers, as CuPy passes them) as FinishArgs;
// formats as (exp_bits, frac_bits, pad_bits, NaN, +inf, -inf).
#define FINISH_PARAMS                                                                                          \
    const unsigned int *parts, int S, long long n, int c, int reduce, int out_eb, int out_fb, unsigned int out_nan, \
        unsigned int out_pinf, unsigned int out_ninf, unsigned int f32_nan, unsigned int f32_pinf,              \
        unsigned int f32_ninf, const unsigned int *C, const unsigned int *bias, const unsigned int *sa, int sa_n, \
        const unsigned int *sb, int sb_n, unsigned int alpha, unsigned int beta, int steps, int nsteps
#define CONVERT_PARAMS                                                                                         \
    const unsigned int *in, long long n, int src_eb, int src_fb, int src_pad, unsigned int src_nan,            \
        unsigned int src_pinf, unsigned int src_ninf, int dst_eb, int dst_fb, int dst_pad, unsigned int dst_nan, \
        unsigned int dst_pinf, unsigned int dst_ninf, int mode

DEVFN Fmt make_fmt(int eb, int fb, int pad, unsigned int nan, unsigned int pinf, unsigned int ninf) {
    Fmt f;
    f.eb = eb;
    f.fb = fb;
    f.pad = pad;
    f.nan = nan;
    f.pinf = pinf;
    f.ninf = ninf;
    return f;
}

DEVFN FinishArgs finish_args(FINISH_PARAMS) {
    FinishArgs a;
    a.parts = parts;
    a.S = S;
    a.n = n;
    a.c = c;
    a.reduce = reduce;
    a.out = make_fmt(out_eb, out_fb, 0, out_nan, out_pinf, out_ninf);
    a.f32 = make_fmt(8, 23, 0, f32_nan, f32_pinf, f32_ninf);
    a.C = C;
    a.bias = bias;
    a.sa = sa;
    a.sa_n = sa_n;
    a.sb = sb;
    a.sb_n = sb_n;
    a.alpha = alpha;
    a.beta = beta;
    a.steps = steps;
    a.nsteps = nsteps;
    return a;
}

#ifdef TCSMT_CUDA
extern "C" __global__ void finish_outputs(FINISH_PARAMS, unsigned int* __restrict__ out) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        FinishArgs a = finish_args(parts, S, n, c, reduce, out_eb, out_fb, out_nan, out_pinf, out_ninf, f32_nan, f32_pinf,
                                   f32_ninf, C, bias, sa, sa_n, sb, sb_n, alpha, beta, steps, nsteps);
        out[idx] = finish_one(a, idx);
    }
}

extern "C" __global__ void convert_patterns(CONVERT_PARAMS, unsigned int* __restrict__ out) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n)
        out[idx] = convert_bits_one(in[idx], make_fmt(src_eb, src_fb, src_pad, src_nan, src_pinf, src_ninf),
                                    make_fmt(dst_eb, dst_fb, dst_pad, dst_nan, dst_pinf, dst_ninf), mode);
}
#else
// host loops over the same per-output functions (tests/test_gemm_cuda_host.py)
extern "C" void finish_outputs_host(FINISH_PARAMS, unsigned int* out) {
    FinishArgs a = finish_args(parts, S, n, c, reduce, out_eb, out_fb, out_nan, out_pinf, out_ninf, f32_nan, f32_pinf,
                               f32_ninf, C, bias, sa, sa_n, sb, sb_n, alpha, beta, steps, nsteps);
    for (long long idx = 0; idx < n; idx++) out[idx] = finish_one(a, idx);
}

extern "C" void convert_patterns_host(CONVERT_PARAMS, unsigned int* out) {
    Fmt src = make_fmt(src_eb, src_fb, src_pad, src_nan, src_pinf, src_ninf);
    Fmt dst = make_fmt(dst_eb, dst_fb, dst_pad, dst_nan, dst_pinf, dst_ninf);
    for (long long idx = 0; idx < n; idx++) out[idx] = convert_bits_one(in[idx], src, dst, mode);
}
#endif
