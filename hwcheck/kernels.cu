// tcsmt hardware check: batches of independent tiles through one matrix-unit
// instruction, chained in k order through the accumulator registers.
//
// Every kernel works on T tiles.  Tile t has
//   A[t]  M rows of K elements         (row-major: A[(t*M + r)*K + k])
//   B[t]  N columns of K elements      (column vectors: B[(t*N + n)*K + k])
//   C[t]  M x N accumulator inputs     (C[(t*M + r)*N + n])
// and the kernel writes D[t][r][n] = sum_k A[t][r][k] * B[t][n][k] + C[t][r][n]
// as the instruction computes it: C is loaded into the accumulator registers,
// then one instruction per k-slice [k0, k0 + instr_k) in increasing k0, each
// taking the previous instruction's D as its C, and D is stored as raw bits.
// No arithmetic other than the matrix instruction touches the values.
//
// Fragment placement follows the PTX ISA's documented register layouts
// (groupID = lane / 4, tig = lane % 4).  The harness checks every layout with
// small-integer inputs (exact results) before it trusts a kernel.
//
// mma.sync kernels: one warp per tile, any block size that is a multiple of 32.
// wgmma kernels (sm_90a): one warpgroup (a block of 128 threads) per tile, with
// B staged in shared memory in the no-swizzle core-matrix layout.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 pack2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

static __device__ __forceinline__ u32 pack4(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

#define TILE_LOOP(TILES_PER_UNIT_SHIFT)                                                        \
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;                           \
    const long long unit0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;           \
    const long long units = ((long long)gridDim.x * blockDim.x) >> 5;                          \
    for (long long tile = unit0; tile < T; tile += units)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

// ---------------------------------------------------------------- f16 / bf16 -> f32, m16n8k16
#define MMA_K16_F32(NAME, TYPE)                                                                 \
extern "C" __global__ void NAME(const u16* __restrict__ A, const u16* __restrict__ B,          \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        const u16* a0 = A + (tile * 16 + g) * (long long)K;                                    \
        const u16* a1 = a0 + 8LL * K;                                                          \
        const u16* b = B + (tile * 8 + g) * (long long)K;                                      \
        const u32* c = C + tile * 128;                                                         \
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);                                         \
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);                                     \
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);                                   \
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);                               \
        for (int k0 = 0; k0 < K; k0 += 16) {                                                   \
            const int k = k0 + 2 * t4;                                                         \
            u32 ra0 = pack2(a0[k], a0[k + 1]), ra1 = pack2(a1[k], a1[k + 1]);                  \
            u32 ra2 = pack2(a0[k + 8], a0[k + 9]), ra3 = pack2(a1[k + 8], a1[k + 9]);          \
            u32 rb0 = pack2(b[k], b[k + 1]), rb1 = pack2(b[k + 8], b[k + 9]);                  \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 "        \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"               \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        u32* d = D + tile * 128;                                                               \
        d[g * 8 + 2 * t4] = __float_as_uint(d0);                                               \
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);                                           \
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);                                     \
    }                                                                                          \
}

MMA_K16_F32(mma_f16_f32, "f16")
MMA_K16_F32(mma_bf16_f32, "bf16")

// ---------------------------------------------------------------- f16 -> f16, m16n8k16
extern "C" __global__ void mma_f16_f16(const u16* __restrict__ A, const u16* __restrict__ B,
                                       const u16* __restrict__ C, u16* __restrict__ D,
                                       long long T, int K) {
    TILE_LOOP(0) {
        const u16* a0 = A + (tile * 16 + g) * (long long)K;
        const u16* a1 = a0 + 8LL * K;
        const u16* b = B + (tile * 8 + g) * (long long)K;
        const u16* c = C + tile * 128;
        u32 d0 = pack2(c[g * 8 + 2 * t4], c[g * 8 + 2 * t4 + 1]);
        u32 d1 = pack2(c[(g + 8) * 8 + 2 * t4], c[(g + 8) * 8 + 2 * t4 + 1]);
        for (int k0 = 0; k0 < K; k0 += 16) {
            const int k = k0 + 2 * t4;
            u32 ra0 = pack2(a0[k], a0[k + 1]), ra1 = pack2(a1[k], a1[k + 1]);
            u32 ra2 = pack2(a0[k + 8], a0[k + 9]), ra3 = pack2(a1[k + 8], a1[k + 9]);
            u32 rb0 = pack2(b[k], b[k + 1]), rb1 = pack2(b[k + 8], b[k + 9]);
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                         "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                         : "+r"(d0), "+r"(d1)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
        }
        u16* d = D + tile * 128;
        d[g * 8 + 2 * t4] = (u16)(d0 & 0xffffu);
        d[g * 8 + 2 * t4 + 1] = (u16)(d0 >> 16);
        d[(g + 8) * 8 + 2 * t4] = (u16)(d1 & 0xffffu);
        d[(g + 8) * 8 + 2 * t4 + 1] = (u16)(d1 >> 16);
    }
}

// ---------------------------------------------------------------- tf32 -> f32, m16n8k8
extern "C" __global__ void mma_tf32_f32(const u32* __restrict__ A, const u32* __restrict__ B,
                                        const u32* __restrict__ C, u32* __restrict__ D,
                                        long long T, int K) {
    TILE_LOOP(0) {
        const u32* a0 = A + (tile * 16 + g) * (long long)K;
        const u32* a1 = a0 + 8LL * K;
        const u32* b = B + (tile * 8 + g) * (long long)K;
        const u32* c = C + tile * 128;
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);
        for (int k0 = 0; k0 < K; k0 += 8) {
            const int k = k0 + t4;
            u32 ra0 = a0[k], ra1 = a1[k], ra2 = a0[k + 4], ra3 = a1[k + 4];
            u32 rb0 = b[k], rb1 = b[k + 4];
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
        }
        u32* d = D + tile * 128;
        d[g * 8 + 2 * t4] = __float_as_uint(d0);
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);
    }
}

// ---------------------------------------------------------------- f64, m8n8k4
extern "C" __global__ void mma_f64_f64(const double* __restrict__ A, const double* __restrict__ B,
                                       const double* __restrict__ C, double* __restrict__ D,
                                       long long T, int K) {
    TILE_LOOP(0) {
        const double* a = A + (tile * 8 + g) * (long long)K;
        const double* b = B + (tile * 8 + g) * (long long)K;
        const double* c = C + tile * 64;
        double d0 = c[g * 8 + 2 * t4], d1 = c[g * 8 + 2 * t4 + 1];
        for (int k0 = 0; k0 < K; k0 += 4) {
            double ra = a[k0 + t4], rb = b[k0 + t4];
            asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                         : "+d"(d0), "+d"(d1)
                         : "d"(ra), "d"(rb));
        }
        double* d = D + tile * 64;
        d[g * 8 + 2 * t4] = d0;
        d[g * 8 + 2 * t4 + 1] = d1;
    }
}

#endif  // sm_80

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890

// ---------------------------------------------------------------- e4m3 / e5m2 -> f32, m16n8k32
#define MMA_K32_F8(NAME, TA, TB)                                                                \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        const u8* a0 = A + (tile * 16 + g) * (long long)K;                                     \
        const u8* a1 = a0 + 8LL * K;                                                           \
        const u8* b = B + (tile * 8 + g) * (long long)K;                                       \
        const u32* c = C + tile * 128;                                                         \
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);                                         \
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);                                     \
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);                                   \
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);                               \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4(a0 + k), ra1 = pack4(a1 + k);                                      \
            u32 ra2 = pack4(a0 + k + 16), ra3 = pack4(a1 + k + 16);                            \
            u32 rb0 = pack4(b + k), rb1 = pack4(b + k + 16);                                   \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 "            \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"               \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        u32* d = D + tile * 128;                                                               \
        d[g * 8 + 2 * t4] = __float_as_uint(d0);                                               \
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);                                           \
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);                                     \
    }                                                                                          \
}

MMA_K32_F8(mma_e4m3_f32, "e4m3", "e4m3")
MMA_K32_F8(mma_e5m2_f32, "e5m2", "e5m2")
MMA_K32_F8(mma_e4m3_e5m2_f32, "e4m3", "e5m2")  // mixed: A e4m3, B e5m2
MMA_K32_F8(mma_e5m2_e4m3_f32, "e5m2", "e4m3")

// ---------------------------------------------------------------- e4m3 / e5m2 -> f16, m16n8k32
#define MMA_K32_F8_F16(NAME, TA, TB)                                                            \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u16* __restrict__ C, u16* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        const u8* a0 = A + (tile * 16 + g) * (long long)K;                                     \
        const u8* a1 = a0 + 8LL * K;                                                           \
        const u8* b = B + (tile * 8 + g) * (long long)K;                                       \
        const u16* c = C + tile * 128;                                                         \
        u32 d0 = pack2(c[g * 8 + 2 * t4], c[g * 8 + 2 * t4 + 1]);                              \
        u32 d1 = pack2(c[(g + 8) * 8 + 2 * t4], c[(g + 8) * 8 + 2 * t4 + 1]);                  \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4(a0 + k), ra1 = pack4(a1 + k);                                      \
            u32 ra2 = pack4(a0 + k + 16), ra3 = pack4(a1 + k + 16);                            \
            u32 rb0 = pack4(b + k), rb1 = pack4(b + k + 16);                                   \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f16." TA "." TB ".f16 "            \
                         "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"                           \
                         : "+r"(d0), "+r"(d1)                                                  \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        u16* d = D + tile * 128;                                                               \
        d[g * 8 + 2 * t4] = (u16)(d0 & 0xffffu);                                               \
        d[g * 8 + 2 * t4 + 1] = (u16)(d0 >> 16);                                               \
        d[(g + 8) * 8 + 2 * t4] = (u16)(d1 & 0xffffu);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = (u16)(d1 >> 16);                                         \
    }                                                                                          \
}

MMA_K32_F8_F16(mma_e4m3_f16, "e4m3", "e4m3")
MMA_K32_F8_F16(mma_e5m2_f16, "e5m2", "e5m2")
MMA_K32_F8_F16(mma_e4m3_e5m2_f16, "e4m3", "e5m2")

#endif  // sm_89

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// ---------------------------------------------------------------- wgmma (sm_90a), m64n8kK
// A (64 x K) comes from registers: warp w of the warpgroup holds rows 16w..16w+15
// in the mma.sync A-fragment layout.  B (8 x K, K-major) is staged in shared
// memory as 8-row x 16-byte core matrices, core matrix j (bytes 16j..16j+15 of
// every column) at offset 128*j; one instruction reads two consecutive core
// matrices, so both descriptor offsets are 128 bytes (with N = 8 the
// N-direction offset is never used, so either reading of the two fields holds).

static __device__ __forceinline__ u64 smem_desc(const void* p) {
    u64 addr = (u64)__cvta_generic_to_shared(p);
    return ((addr & 0x3FFFFull) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(128 >> 4) << 32);
}

// Stage B[tile] (8 columns x K elements of ESIZE bytes) into the core-matrix layout.
static __device__ __forceinline__ void stage_b(u8* sB, const u8* Bt, int K, int esize) {
    const int row_bytes = K * esize;
    for (int i = threadIdx.x; i < 8 * row_bytes; i += blockDim.x) {
        const int n = i / row_bytes, byte = i % row_bytes;
        sB[(byte >> 4) * 128 + n * 16 + (byte & 15)] = Bt[i];
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
}

#define WG_BEGIN(ESIZE, KI)                                                                     \
    extern __shared__ __align__(128) u8 sB[];                                                  \
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;     \
    for (long long tile = blockIdx.x; tile < T; tile += gridDim.x) {                           \
        __syncthreads();                                                                       \
        stage_b(sB, (const u8*)B + tile * 8LL * K * ESIZE, K, ESIZE);                          \
        const long long row0 = tile * 64 + 16 * w + g;

#define WG_END }

#define WGMMA_K16_F32(NAME, TYPE)                                                               \
extern "C" __global__ void NAME(const u16* __restrict__ A, const u16* __restrict__ B,          \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(2, 16)                                                                            \
        const u16* a0 = A + row0 * K;                                                          \
        const u16* a1 = a0 + 8LL * K;                                                          \
        const u32* c = C + tile * 512 + (16 * w) * 8;                                          \
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);                                         \
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);                                     \
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);                                   \
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);                               \
        for (int k0 = 0; k0 < K; k0 += 16) {                                                   \
            const int k = k0 + 2 * t4;                                                         \
            u32 ra0 = pack2(a0[k], a0[k + 1]), ra1 = pack2(a1[k], a1[k + 1]);                  \
            u32 ra2 = pack2(a0[k + 8], a0[k + 9]), ra3 = pack2(a1[k + 8], a1[k + 9]);          \
            u64 desc = smem_desc(sB + (k0 >> 3) * 128);                                        \
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32." TYPE "." TYPE " "        \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;"                       \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");      \
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                     \
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                     \
        }                                                                                      \
        u32* d = D + tile * 512 + (16 * w) * 8;                                                \
        d[g * 8 + 2 * t4] = __float_as_uint(d0);                                               \
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);                                           \
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);                                     \
    WG_END                                                                                     \
}

WGMMA_K16_F32(wgmma_f16_f32, "f16")
WGMMA_K16_F32(wgmma_bf16_f32, "bf16")

#define WGMMA_K32_F8_F32(NAME, TA, TB)                                                          \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(1, 32)                                                                            \
        const u8* a0 = A + row0 * K;                                                           \
        const u8* a1 = a0 + 8LL * K;                                                           \
        const u32* c = C + tile * 512 + (16 * w) * 8;                                          \
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);                                         \
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);                                     \
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);                                   \
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);                               \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4(a0 + k), ra1 = pack4(a1 + k);                                      \
            u32 ra2 = pack4(a0 + k + 16), ra3 = pack4(a1 + k + 16);                            \
            u64 desc = smem_desc(sB + (k0 >> 4) * 128);                                        \
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32." TA "." TB " "            \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;"                          \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");      \
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                     \
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                     \
        }                                                                                      \
        u32* d = D + tile * 512 + (16 * w) * 8;                                                \
        d[g * 8 + 2 * t4] = __float_as_uint(d0);                                               \
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);                                           \
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);                                     \
    WG_END                                                                                     \
}

WGMMA_K32_F8_F32(wgmma_e4m3_f32, "e4m3", "e4m3")
WGMMA_K32_F8_F32(wgmma_e5m2_f32, "e5m2", "e5m2")
WGMMA_K32_F8_F32(wgmma_e4m3_e5m2_f32, "e4m3", "e5m2")  // mixed: A e4m3, B e5m2
WGMMA_K32_F8_F32(wgmma_e5m2_e4m3_f32, "e5m2", "e4m3")

#define WGMMA_K32_F8_F16(NAME, TA, TB)                                                          \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u16* __restrict__ C, u16* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(1, 32)                                                                            \
        const u8* a0 = A + row0 * K;                                                           \
        const u8* a1 = a0 + 8LL * K;                                                           \
        const u16* c = C + tile * 512 + (16 * w) * 8;                                          \
        u32 d0 = pack2(c[g * 8 + 2 * t4], c[g * 8 + 2 * t4 + 1]);                              \
        u32 d1 = pack2(c[(g + 8) * 8 + 2 * t4], c[(g + 8) * 8 + 2 * t4 + 1]);                  \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4(a0 + k), ra1 = pack4(a1 + k);                                      \
            u32 ra2 = pack4(a0 + k + 16), ra3 = pack4(a1 + k + 16);                            \
            u64 desc = smem_desc(sB + (k0 >> 4) * 128);                                        \
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                            \
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f16." TA "." TB " "            \
                         "{%0,%1}, {%2,%3,%4,%5}, %6, 1, 1, 1;"                                \
                         : "+r"(d0), "+r"(d1)                                                  \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");      \
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                     \
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                     \
        }                                                                                      \
        u16* d = D + tile * 512 + (16 * w) * 8;                                                \
        d[g * 8 + 2 * t4] = (u16)(d0 & 0xffffu);                                               \
        d[g * 8 + 2 * t4 + 1] = (u16)(d0 >> 16);                                               \
        d[(g + 8) * 8 + 2 * t4] = (u16)(d1 & 0xffffu);                                         \
        d[(g + 8) * 8 + 2 * t4 + 1] = (u16)(d1 >> 16);                                         \
    WG_END                                                                                     \
}

WGMMA_K32_F8_F16(wgmma_e4m3_f16, "e4m3", "e4m3")
WGMMA_K32_F8_F16(wgmma_e5m2_f16, "e5m2", "e5m2")
WGMMA_K32_F8_F16(wgmma_e4m3_e5m2_f16, "e4m3", "e5m2")

// ---------------------------------------------------------------- wgmma tf32 -> f32, m64n8k8
// A (tf32 in the fp32 layout) in registers as the mma.sync m16n8k8 A fragment; B staged as for
// the 16-bit kernels with 4-byte elements (one instruction reads 32 bytes of every column: two
// core matrices, as the 16-bit and fp8 kernels).
extern "C" __global__ void wgmma_tf32_f32(const u32* __restrict__ A, const u32* __restrict__ B,
                                          const u32* __restrict__ C, u32* __restrict__ D,
                                          long long T, int K) {
    WG_BEGIN(4, 8)
        const u32* a0 = A + row0 * K;
        const u32* a1 = a0 + 8LL * K;
        const u32* c = C + tile * 512 + (16 * w) * 8;
        float d0 = __uint_as_float(c[g * 8 + 2 * t4]);
        float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);
        float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);
        float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1]);
        for (int k0 = 0; k0 < K; k0 += 8) {
            const int k = k0 + t4;
            u32 ra0 = a0[k], ra1 = a1[k], ra2 = a0[k + 4], ra3 = a1[k + 4];
            u64 desc = smem_desc(sB + (k0 >> 2) * 128);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;"
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        }
        u32* d = D + tile * 512 + (16 * w) * 8;
        d[g * 8 + 2 * t4] = __float_as_uint(d0);
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);
    WG_END
}

// ---------------------------------------------------------------- wgmma f16 -> f16, m64n8k16
extern "C" __global__ void wgmma_f16_f16(const u16* __restrict__ A, const u16* __restrict__ B,
                                         const u16* __restrict__ C, u16* __restrict__ D,
                                         long long T, int K) {
    WG_BEGIN(2, 16)
        const u16* a0 = A + row0 * K;
        const u16* a1 = a0 + 8LL * K;
        const u16* c = C + tile * 512 + (16 * w) * 8;
        u32 d0 = pack2(c[g * 8 + 2 * t4], c[g * 8 + 2 * t4 + 1]);
        u32 d1 = pack2(c[(g + 8) * 8 + 2 * t4], c[(g + 8) * 8 + 2 * t4 + 1]);
        for (int k0 = 0; k0 < K; k0 += 16) {
            const int k = k0 + 2 * t4;
            u32 ra0 = pack2(a0[k], a0[k + 1]), ra1 = pack2(a1[k], a1[k + 1]);
            u32 ra2 = pack2(a0[k + 8], a0[k + 9]), ra3 = pack2(a1[k + 8], a1[k + 9]);
            u64 desc = smem_desc(sB + (k0 >> 3) * 128);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 "
                         "{%0,%1}, {%2,%3,%4,%5}, %6, 1, 1, 1, 0;"
                         : "+r"(d0), "+r"(d1)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        }
        u16* d = D + tile * 512 + (16 * w) * 8;
        d[g * 8 + 2 * t4] = (u16)(d0 & 0xffffu);
        d[g * 8 + 2 * t4 + 1] = (u16)(d0 >> 16);
        d[(g + 8) * 8 + 2 * t4] = (u16)(d1 & 0xffffu);
        d[(g + 8) * 8 + 2 * t4 + 1] = (u16)(d1 >> 16);
    WG_END
}

#endif  // sm_90a
