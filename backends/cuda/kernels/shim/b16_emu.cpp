// Runs gemm_bf16.cuh's prefill products (bf16 mma.sync, the plain and the
// grouped fp8 forms) on the CPU (emu.h, the MMA emulated per warp: a tile's
// 16 products summed exactly in float64 and added to the fp32 accumulator)
// against a float64 reference written here: tile edges in every dimension,
// K not a multiple of 16 or of 8 (the unaligned loads), groups, a NaN code,
// rounded and unrounded outputs. Each output must be within 2^-20 of its
// sum of |products| (fp32 sums in another order) and, rounded, within one
// bf16 ulp of the reference's rounding. No GPU needed:
//   g++ -O1 -std=c++20 -ffp-contract=off -pthread \
//     backends/cuda/kernels/shim/b16_emu.cpp -o /tmp/b16_emu && /tmp/b16_emu
#include "emu.h"
#include "../common.cuh"
struct B16Frag { unsigned a[4], b0, b1; };
inline B16Frag b16_frag[32][32];
inline float b16v(unsigned h) { return __uint_as_float((h & 0xffffu) << 16); }
inline void b16_emulate(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    b16_frag[w][l] = {{a[0], a[1], a[2], a[3]}, b0, b1};
    __syncwarp();
    float r[4];
    for (int o = 0; o < 4; o++) {
        const int hi = o / 2, c = 2 * t + o % 2; // D row g + 8·hi, column c
        double s = 0;
        for (int tt = 0; tt < 4; tt++) for (int j = 0; j < 2; j++) {
            const B16Frag& fa = b16_frag[w][g * 4 + tt];
            const B16Frag& fb = b16_frag[w][c * 4 + tt];
            s += (double)b16v(fa.a[hi] >> (16 * j)) * b16v(fb.b0 >> (16 * j));     // K 2tt+j
            s += (double)b16v(fa.a[2 + hi] >> (16 * j)) * b16v(fb.b1 >> (16 * j)); // K 8+2tt+j
        }
        r[o] = (float)((double)d[o] + s);
    }
    __syncwarp();
    for (int o = 0; o < 4; o++) d[o] = r[o];
}
#define B16_EMULATE
#include "../gemm_bf16.cuh"
#include <cstdio>
#include <random>
static float e4m3v(unsigned c){ unsigned e=(c>>3)&15, m=c&7; if(e==15&&m==7) return NAN; float v; if(e==0) v=m*0.001953125f; else v=ldexpf(1.0f+m/8.0f,(int)e-7); return (c&0x80)?-v:v;}
static float e8m0v(unsigned b){ return b==0xff?NAN:ldexpf(1.0f,(int)b-127);}
std::mt19937 rng(7);
static float rb16(){ return bf16r((float)((int)(rng()%200001)-100000)/37777.0f); }
int fails=0;
int main(int argc, char** argv){
    struct C{int m,k,n,groups; bool fp8, round;};
    std::vector<C> cs={{129,1001,33,1,false,true},{5,48,9,1,false,true},{140,96,40,3,true,true},{131,1000,70,2,true,false},{64,32,32,1,true,true}};
    if(argc < 2 || strcmp(argv[1], "quick") != 0) // more tiles (minutes)
        cs.insert(cs.end(), {{130,70,150,1,false,false},{128,256,128,1,false,false},{200,96,140,3,true,true}});
    for(auto c: cs){
        const int K=c.k, N=c.n, G=c.groups, kb=(K+31)/32, lda=G*K, ldo=G*N;
        std::vector<float> a((size_t)c.m*lda); for(auto& x:a) x=rb16();
        std::vector<unsigned short> w16((size_t)G*N*K); std::vector<unsigned char> w8((size_t)G*N*K), s8((size_t)((G*N+31)/32)*kb);
        std::vector<float> wf((size_t)G*N*K);
        for(auto& x:s8) x=120+rng()%8;
        for(size_t i=0;i<wf.size();i++){ size_t row=i/K, col=i%K;
            if(c.fp8){ w8[i]=rng()&0xff; if((w8[i]&0x7f)==0x7f) w8[i]^=1; wf[i]=bf16r(e4m3v(w8[i])*e8m0v(s8[(row/32)*kb+col/32])); }
            else { wf[i]=rb16()/64; w16[i]=__float_as_uint(wf[i])>>16; } }
        if(c.fp8){ w8[1]=0x7f; wf[1]=NAN; } // a NaN code: row 0 of group 0
        std::vector<float> got((size_t)c.m*ldo,-12345.0f);
        dim3 grid={(unsigned)((N+127)/128),(unsigned)((c.m+127)/128),(unsigned)G};
        launch(grid,{256,1,1},[&]{
            if(c.fp8) matmul_fp8w_tc(got.data(),a.data(),c.m,K,w8.data(),s8.data(),N,lda,ldo,K,N,c.round);
            else matmul_bf16w_tc(got.data(),a.data(),c.m,K,w16.data(),N,lda,ldo,K,N,c.round); });
        int bad=0, moved=0;
        for(int z=0;z<G;z++) for(int i=0;i<c.m;i++) for(int j=0;j<N;j++){
            double s=0, sa=0;
            for(int q=0;q<K;q++){ double p=(double)a[(size_t)i*lda+z*K+q]*wf[((size_t)z*N+j)*K+q]; s+=p; sa+=std::fabs(p); }
            const float g=got[(size_t)i*ldo+z*N+j];
            bool ok;
            if(std::isnan(s)) ok=std::isnan(g);
            else if(c.round){ const float w=bf16r((float)s); const int d=(int)(__float_as_uint(g)>>16)-(int)(__float_as_uint(w)>>16);
                ok = g==w || ((d==1||d==-1) && std::fabs(g-s) <= std::fabs(w-s)+sa*0x1p-20+1e-30); if(g!=w) moved++; }
            else ok=std::fabs(g-s) <= sa*0x1p-20;
            if(!ok){ if(bad<3) printf("  m%d k%d n%d g%d fp8=%d round=%d [%d,%d,%d]: got %g want %g (sum|p| %g)\n",c.m,K,N,G,c.fp8,c.round,z,i,j,g,s,sa); bad++; }
        }
        printf("bf16 tc m%d k%d n%d groups%d fp8=%d round=%d: %d outputs, %d rounded to the other side, %d over\n",c.m,K,N,G,c.fp8,c.round,c.m*ldo,moved,bad);
        if(bad) fails++;
    }
    printf("%s\n", fails ? "FAIL" : "ok");
    return fails ? 1 : 0;
}
