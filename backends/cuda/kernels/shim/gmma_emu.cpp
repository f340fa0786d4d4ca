// Runs the tensor-core decode kernels of gemv_mma.cuh on the CPU (emu.h,
// with mma.sync emulated per warp: each block partial summed exactly in
// float64, rounded once to fp32) against a reference written here from
// cpu-ref's definitions: odd shapes, every row-tile split, 1..8 activation
// rows, routed experts with a bad id, the fused SwiGLU, and activations that
// are not act_quant's output (the CTA's exact fallback, which must be
// bit-identical). Fast-path outputs must be within 1 bf16 ulp of the
// reference (the K groups are added in another order). No GPU needed:
//   g++ -O1 -std=c++20 -ffp-contract=off -pthread \
//     backends/cuda/kernels/shim/gmma_emu.cpp -o /tmp/gmma_emu && /tmp/gmma_emu
#include "emu.h"
#include "../common.cuh"
// gmma_emulate: mma.sync m16n8k32 e4m3. Lane (g, t) holds A rows g (a0:
// K 4t..4t+3, a2: 16+4t..) and g+8 (a1, a3), and B column g at the same K
// (b0, b1); it gets D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
struct GmmaFrag { unsigned a[4], b0, b1; };
inline GmmaFrag g_frag[32][32];
inline std::atomic<long> g_mmas{0}; // emulated MMAs, to show the fast path ran
inline float gmma_e4m3(unsigned c) { return e4m3_to_f32(c & 0xffu); }
inline void gmma_emulate(float d[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    g_frag[w][l] = {{a0, a1, a2, a3}, b0, b1};
    g_mmas++;
    __syncwarp();
    for (int o = 0; o < 4; o++) {
        const int hi = o / 2, c = 2 * t + o % 2; // D row g + 8·hi, column c
        double s = 0;
        for (int tt = 0; tt < 4; tt++) for (int j = 0; j < 4; j++) {
            const GmmaFrag& fa = g_frag[w][g * 4 + tt];
            const GmmaFrag& fb = g_frag[w][c * 4 + tt];
            s += (double)gmma_e4m3(fa.a[hi] >> (8 * j)) * gmma_e4m3(fb.b0 >> (8 * j));
            s += (double)gmma_e4m3(fa.a[2 + hi] >> (8 * j)) * gmma_e4m3(fb.b1 >> (8 * j));
        }
        d[o] = (float)s;
    }
    __syncwarp();
}
#define GMMA_EMULATE
#include "../gemv_mma.cuh"
#include <cstdio>
#include <random>
static float e2m1v(unsigned c){ static const float t[8]={0,0.5f,1,1.5f,2,3,4,6}; float v=t[c&7]; return (c&8)?-v:v;}
static float e4m3v(unsigned c){ unsigned e=(c>>3)&15, m=c&7; if(e==15&&m==7) return NAN; float v; if(e==0) v=m*0.001953125f; else v=ldexpf(1.0f+m/8.0f,(int)e-7); return (c&0x80)?-v:v;}
static float e8m0v(unsigned b){ return b==0xff?NAN:ldexpf(1.0f,(int)b-127);}
std::mt19937 rng(11);
// a block of 32 fake-quantised activations (act_quant's output: e4m3 codes
// times the block's power-of-two scale)
static void qblock(float* x){ float s=ldexpf(1.0f,(int)(rng()%21)-14); for(int i=0;i<32;i++){ unsigned c; do c=rng()&0xff; while((c&0x7f)==0x7f); x[i]=e4m3v(c)*s; } }
static void refbs(bool fp4, float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* s, int n){
    int kb=k/32;
    for(int j=0;j<n;j++) for(int i=0;i<m;i++){
        float acc=0;
        for(int b=0;b<kb;b++){ float p=0; for(int c=b*32;c<b*32+32;c++){ size_t e=(size_t)j*k+c; float wv = fp4 ? e2m1v((e&1)?(w[e/2]>>4):(w[e/2]&15)) : e4m3v(w[e]); p += a[(size_t)i*k+c]*wv; }
            unsigned sb = fp4 ? s[(size_t)j*kb+b] : s[(size_t)(j/32)*kb+b];
            acc += p*e8m0v(sb); }
        out[(size_t)i*n+j]=bf16r(acc);
    }
}
static bool same(float a,float b){ return (std::isnan(a)&&std::isnan(b)) || __float_as_uint(a)==__float_as_uint(b); }
// within one bf16 ulp (NaN = NaN)
static bool near1(float a,float b){ if(same(a,b)) return true; if(std::isnan(a)||std::isnan(b)) return false; int d=(int)(__float_as_uint(a)>>16)-(int)(__float_as_uint(b)>>16); return (d==1||d==-1) && std::signbit(a)==std::signbit(b); }
int fails=0;
// the kernels' chunk sums and tile counters (which every launch leaves at 0)
std::vector<float> g_part(1 << 22);
std::vector<unsigned> g_cnt(1 << 16);
static void check(const char* name, const std::vector<float>& got, const std::vector<float>& want, bool exact){
    const long mmas = g_mmas.exchange(0);
    for (unsigned c : g_cnt) if (c) { printf("  %s: a tile counter left at %u\n", name, c); fails++; break; }
    // the fast path must have run (and the fallback must not have)
    if ((mmas > 0) == exact && !strstr(name, "swiglu") && !strstr(name, "warp")) { printf("  %s: %ld MMAs\n", name, mmas); fails++; }
    // the warp-along-K sums of random f32 weights cancel: there one bf16 ulp
    // of the product's largest magnitude (the Go tests' reordered tolerance)
    float big=0; for(float v: want) if(!std::isnan(v)) big=std::max(big,std::fabs(v));
    const bool scaled = strstr(name, "warp") != nullptr;
    int bad=0, ulp=0; for(size_t i=0;i<want.size();i++){ if(same(got[i],want[i])) continue;
        if(!exact && (near1(got[i],want[i]) || (scaled && std::fabs(got[i]-want[i]) <= big*0x1p-7f))){ ulp++; continue; } if(bad<3) printf("  %s [%zu]: got %g want %g\n",name,i,got[i],want[i]); bad++; }
    printf("%s: %zu elems, %d at 1 ulp, %d over\n",name,want.size(),ulp,bad); if(bad) fails++;
}
int main(){
    struct C{bool fp4; int m,k,n,chunk,grid;};
    // rows of a multiple of 128 bytes (the kernels' requirement)
    // chunk: spans an item (more than a row's: one chunk); grid: CTAs (fewer or more than the items' warps)
    std::vector<C> cs={{false,1,256,77,1,1},{false,3,512,40,2,3},{false,8,384,33,1,2},{false,1,1280,64,3,1},{false,2,128,9,1,1},{false,1,5120,24,7,2},{false,1,5120,40,1,4},
                       {false,1,1280,40,99,5},{true,1,256,77,1,2},{true,3,512,40,1,1},{true,8,256,17,2,4},{true,1,1024,130,3,1},{true,5,768,8,2,1},
                       {true,1,5120,16,4,3},{true,2,1024,48,99,2}};
    for(auto c: cs) for(int full32=0; full32<2; full32++){
        int kb=c.k/32;
        std::vector<float> a(c.m*c.k); for(int i=0;i<c.m*kb;i++) qblock(&a[32*i]);
        if(full32) a[c.k/2] *= 1.0f+1.0f/4096; // off the e4m3 grid: the CTA falls back
        size_t wb = c.fp4 ? (size_t)c.n*c.k/2 : (size_t)c.n*c.k;
        std::vector<unsigned char> w(wb); for(auto& x:w){ x=rng()&0xff; if(!c.fp4 && (x&0x7f)==0x7f) x^=1; }
        size_t sb = c.fp4 ? (size_t)c.n*kb : (size_t)((c.n+31)/32)*kb;
        std::vector<unsigned char> s(sb); for(auto& x:s) x=118+rng()%12;
        std::vector<float> want(c.m*c.n), got(c.m*c.n,-12345.0f);
        refbs(c.fp4, want.data(), a.data(), c.m, c.k, w.data(), s.data(), c.n);
        dim3 g={(unsigned)c.grid,1,1};
        launch(g,{256,1,1},[&]{
            auto* o=got.data(); auto* ap=a.data(); auto* wp=w.data(); auto* sp=s.data();
            if(c.fp4){ if(c.m==1) gemv_mma_fp4_m1(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else if(c.m<=2) gemv_mma_fp4_m2(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else if(c.m<=4) gemv_mma_fp4_m4(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else gemv_mma_fp4_m8(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); }
            else { if(c.m==1) gemv_mma_fp8_m1(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else if(c.m<=2) gemv_mma_fp8_m2(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else if(c.m<=4) gemv_mma_fp8_m4(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); else gemv_mma_fp8_m8(o,ap,c.m,c.k,wp,sp,c.n,c.chunk,g_part.data(),g_cnt.data()); } });
        char name[160]; snprintf(name,sizeof name,"mma fp4=%d m%d k%d n%d chunk%d grid%d %s",c.fp4,c.m,c.k,c.n,c.chunk,c.grid,full32?"fallback":"fast");
        check(name,got,want,full32);
    }
    for (int fp4=0; fp4<2; fp4++) for (int chunk : {1, 3, 99}) for (int full32=0; full32<2; full32++) {
        const int k = 2304, n = 40, experts = 5, topk = 3, tokens = 2, rows = tokens*topk, kb=k/32;
        size_t wPer = fp4 ? (size_t)n*k/2 : (size_t)n*k, sPer = fp4 ? (size_t)n*kb : (size_t)((n+31)/32)*kb;
        std::vector<unsigned char> w1(experts*wPer), w3(experts*wPer), s1(experts*sPer), s3(experts*sPer);
        for(auto* v: {&w1,&w3}) for(auto& x:*v){ x=rng()&0xff; if(!fp4 && (x&0x7f)==0x7f) x^=1; }
        for(auto* v: {&s1,&s3}) for(auto& x:*v) x=118+rng()%12;
        std::vector<float> a(tokens*k); for(int i=0;i<tokens*kb;i++) qblock(&a[32*i]);
        if(full32) a[7] = a[k+7] = 0.1f; // both tokens off the grid
        std::vector<long long> ids={4,0,2,1,7,3};
        std::vector<float> rw(rows); for(auto& x: rw) x=(rng()%1000)/997.0f;
        std::vector<float> g(rows*n), u(rows*n), want(rows*n), got(rows*n,-1), got1(rows*n,-1);
        for(int q=0;q<rows;q++){ long long e=ids[q]; if(e<0||e>=experts){ for(int j=0;j<n;j++) g[q*n+j]=u[q*n+j]=NAN; continue; }
            refbs(fp4, &g[q*n], &a[(q/topk)*k], 1, k, &w1[e*wPer], &s1[e*sPer], n);
            refbs(fp4, &u[q*n], &a[(q/topk)*k], 1, k, &w3[e*wPer], &s3[e*sPer], n); }
        const float limit=10;
        std::vector<float> wantg(rows*n);
        dim3 gr={(unsigned)(chunk==1 ? 3 : 1),1,1};
        launch(gr,{256,1,1},[&]{ if(fp4) gemv_mma_routed_fp4(got1.data(),a.data(),topk,k,w1.data(),wPer,s1.data(),sPer,n,ids.data(),experts,rows,chunk,g_part.data(),g_cnt.data()); else gemv_mma_routed_fp8(got1.data(),a.data(),topk,k,w1.data(),wPer,s1.data(),sPer,n,ids.data(),experts,rows,chunk,g_part.data(),g_cnt.data()); });
        char name[160]; snprintf(name,sizeof name,"mma routed fp4=%d chunk%d %s",fp4,chunk,full32?"fallback":"fast"); check(name,got1,g,full32);
        // SwiGLU of the kernel's own products: its epilogue must be exact
        // given g and u (the products may differ by an ulp on the fast path)
        std::vector<float> u1(rows*n,-1);
        launch(gr,{256,1,1},[&]{ if(fp4) gemv_mma_routed_fp4(u1.data(),a.data(),topk,k,w3.data(),wPer,s3.data(),sPer,n,ids.data(),experts,rows,chunk,g_part.data(),g_cnt.data()); else gemv_mma_routed_fp8(u1.data(),a.data(),topk,k,w3.data(),wPer,s3.data(),sPer,n,ids.data(),experts,rows,chunk,g_part.data(),g_cnt.data()); });
        for(int i=0;i<rows*n;i++){ float gv=gomin(got1[i],limit); float ex=expf32(-gv); float uv=gomin(gomax(u1[i],-limit),limit); float h=gv/(1.0f+ex)*uv; h=rw[i/n]*h; want[i]=bf16r(h); }
        launch(gr,{256,1,1},[&]{ if(fp4) gemv_mma_routed_swiglu_fp4(got.data(),a.data(),topk,k,w1.data(),s1.data(),w3.data(),s3.data(),wPer,sPer,n,ids.data(),experts,limit,rw.data(),rows,chunk,g_part.data(),g_cnt.data()); else gemv_mma_routed_swiglu_fp8(got.data(),a.data(),topk,k,w1.data(),s1.data(),w3.data(),s3.data(),wPer,sPer,n,ids.data(),experts,limit,rw.data(),rows,chunk,g_part.data(),g_cnt.data()); });
        snprintf(name,sizeof name,"mma routed swiglu fp4=%d chunk%d %s",fp4,chunk,full32?"fallback":"fast"); check(name,got,want,true);
    }
    // the shared expert (MatmulSharedSwiGLU): the routed SwiGLU pair over a
    // stack of one (ids 0, adiv 1) with the plain product's chunk must give
    // the bits of two plain fp8 products of m rows and swiglu_clamp
    for (int m : {1, 2, 3}) for (int chunk : {1, 4, 99}) for (int full32=0; full32<2; full32++) {
        const int k = 1280, n = 72, kb = k/32;
        std::vector<unsigned char> w1((size_t)n*k), w3((size_t)n*k), s1(((n+31)/32)*kb), s3(((n+31)/32)*kb);
        for(auto* v: {&w1,&w3}) for(auto& x:*v){ x=rng()&0xff; if((x&0x7f)==0x7f) x^=1; }
        for(auto* v: {&s1,&s3}) for(auto& x:*v) x=118+rng()%12;
        std::vector<float> a(m*k); for(int i=0;i<m*kb;i++) qblock(&a[32*i]);
        if(full32) a[k/2] *= 1.0f+1.0f/4096;
        std::vector<float> g(m*n,-1), u(m*n,-1), want(m*n), got(m*n,-1);
        std::vector<long long> ids(m, 0);
        auto plain = [&](float* o, const unsigned char* w, const unsigned char* sc){ launch({2,1,1},{256,1,1},[&]{
            if(m==1) gemv_mma_fp8_m1(o,a.data(),m,k,w,sc,n,chunk,g_part.data(),g_cnt.data()); else if(m<=2) gemv_mma_fp8_m2(o,a.data(),m,k,w,sc,n,chunk,g_part.data(),g_cnt.data()); else gemv_mma_fp8_m4(o,a.data(),m,k,w,sc,n,chunk,g_part.data(),g_cnt.data()); }); };
        plain(g.data(), w1.data(), s1.data()); plain(u.data(), w3.data(), s3.data());
        const float limit=10;
        for(int i=0;i<m*n;i++){ float gv=gomin(g[i],limit); float ex=expf32(-gv); float uv=gomin(gomax(u[i],-limit),limit); want[i]=bf16r(gv/(1.0f+ex)*uv); }
        g_mmas.exchange(0);
        launch({3,1,1},{256,1,1},[&]{ gemv_mma_routed_swiglu_fp8(got.data(),a.data(),1,k,w1.data(),s1.data(),w3.data(),s3.data(),0,0,n,ids.data(),1,limit,nullptr,m,chunk,g_part.data(),g_cnt.data()); });
        char name[160]; snprintf(name,sizeof name,"mma shared swiglu m%d chunk%d %s",m,chunk,full32?"fallback":"fast"); check(name,got,want,true);
    }
    // gemv_warp: plain bf16, f32, fp8 widened (grouped), lanes along K
    for (int fmt=0; fmt<3; fmt++) for (int m : {1, 3, 8}) for (int k : {256, 1024, 4096}) for (auto [rpw, kw] : {std::pair{1, 1}, {4, 1}, {1, 2}, {1, 8}}) {
        const int n = 45, groups = fmt==2 ? 3 : 1, kb = k/32;
        std::vector<float> a(m*groups*k); for(auto& x:a) x=bf16r((float)((int)(rng()%2001)-1000)/313.0f);
        std::vector<float> wf(groups*n*k); std::vector<unsigned short> wb(groups*n*k); std::vector<unsigned char> w8(groups*n*k), s8(((groups*n+31)/32)*kb);
        for(auto& x:s8) x=118+rng()%12;
        for(size_t i=0;i<wf.size();i++){ size_t row=i/k, c=i%k;
            if(fmt==0){ wb[i]=__float_as_uint(bf16r((float)((int)(rng()%100001)-50000)/7777.0f))>>16; wf[i]=bf16w(wb[i]); } // finite sums: the order only moves roundings
            else if(fmt==1){ wf[i]=(float)((int)(rng()%100001)-50000)/77777.0f; }
            else { w8[i]=rng()&0xff; if((w8[i]&0x7f)==0x7f) w8[i]^=1; wf[i]=bf16r(e4m3v(w8[i])*e8m0v(s8[(row/32)*kb+c/32])); } }
        std::vector<float> want(m*groups*n), got(m*groups*n,-1);
        for(int z=0;z<groups;z++) for(int i=0;i<m;i++) for(int j=0;j<n;j++){ float acc=0; for(int c=0;c<k;c++) acc += a[(size_t)i*groups*k + z*k + c]*wf[((size_t)z*n+j)*k+c]; want[(size_t)i*groups*n + z*n + j] = bf16r(acc); }
        const int lda=groups*k, ldo=groups*n;
        dim3 gr={(unsigned)((n*kw+8*rpw-1)/(8*rpw)),1,(unsigned)groups};
        launch(gr,{256,1,1},[&]{
            float* o=got.data(); const float* ap=a.data();
            if(fmt==0){ if(m==1) gemv_warp_m1_bf16w(o,ap,m,k,wb.data(),n,lda,ldo,k,n,1,rpw,kw); else if(m==3) gemv_warp_m4_bf16w(o,ap,m,k,wb.data(),n,lda,ldo,k,n,1,rpw,kw); else gemv_warp_m8_bf16w(o,ap,m,k,wb.data(),n,lda,ldo,k,n,1,rpw,kw);}
            else if(fmt==1){ if(m==1) gemv_warp_m1_f32w(o,ap,m,k,wf.data(),n,lda,ldo,k,n,1,rpw,kw); else if(m==3) gemv_warp_m4_f32w(o,ap,m,k,wf.data(),n,lda,ldo,k,n,1,rpw,kw); else gemv_warp_m8_f32w(o,ap,m,k,wf.data(),n,lda,ldo,k,n,1,rpw,kw);}
            else { if(m==1) gemv_warp_m1_fp8w(o,ap,m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1,rpw,kw); else if(m==3) gemv_warp_m4_fp8w(o,ap,m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1,rpw,kw); else gemv_warp_m8_fp8w(o,ap,m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1,rpw,kw);} });
        g_mmas = 0;
        char name[128]; snprintf(name,sizeof name,"warp plain fmt%d m%d k%d groups%d rpw%d kw%d",fmt,m,k,groups,rpw,kw); check(name,got,want,false);
    }
    printf("fails=%d\n",fails); return fails!=0;
}
