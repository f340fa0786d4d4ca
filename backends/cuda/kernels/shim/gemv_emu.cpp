// Runs the kernels of gemv.cuh on the CPU (emu.h) against a reference
// written here from cpu-ref's definitions, on odd shapes, every block shape
// (rb), 1..8 activation rows, NaN codes, a bad expert id; every output
// must be bit-identical. No GPU or nvcc needed (about a minute on 2 cores):
//   g++ -O1 -std=c++20 -ffp-contract=off -pthread \
//     backends/cuda/kernels/shim/gemv_emu.cpp -o /tmp/gemv_emu && /tmp/gemv_emu
#include "emu.h"
#include "../gemv.cuh"
#include <cstdio>
#include <random>
static float e2m1v(unsigned c){ static const float t[8]={0,0.5f,1,1.5f,2,3,4,6}; float v=t[c&7]; return (c&8)?-v:v;}
static float e4m3v(unsigned c){ unsigned e=(c>>3)&15, m=c&7; if(e==15&&m==7) return NAN; float v; if(e==0) v=m*0.001953125f; else v=ldexpf(1.0f+m/8.0f,(int)e-7); return (c&0x80)?-v:v;}
static float e8m0v(unsigned b){ return b==0xff?NAN:ldexpf(1.0f,(int)b-127);}
static float bf16round(float f){ return bf16r(f); }
std::mt19937 rng(7);
static float qact(){ // e4m3 code times a power of two (a fake-quantised activation)
    unsigned c; do c = rng()&0xff; while((c&0x7f)==0x7f); return e4m3v(c)*ldexpf(1.0f,(int)(rng()%9)-4);
}
// reference block-scaled product
static void refbs(bool fp4, float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* s, int n){
    int kb=(k+31)/32;
    for(int j=0;j<n;j++) for(int i=0;i<m;i++){
        float acc=0;
        for(int b=0;b<kb;b++){ float p=0; for(int c=b*32;c<std::min(k,b*32+32);c++){ size_t e=(size_t)j*k+c; float wv = fp4 ? e2m1v((e&1)?(w[e/2]>>4):(w[e/2]&15)) : e4m3v(w[e]); p += a[(size_t)i*k+c]*wv; }
            unsigned sb = fp4 ? s[(size_t)j*kb+b] : s[(size_t)(j/32)*kb+b];
            acc += p*e8m0v(sb); }
        out[(size_t)i*n+j]=bf16round(acc);
    }
}
static bool same(float a,float b){ return (std::isnan(a)&&std::isnan(b)) || __float_as_uint(a)==__float_as_uint(b); }
int fails=0;
static void check(const char* name, const std::vector<float>& got, const std::vector<float>& want){
    int bad=0; for(size_t i=0;i<want.size();i++) if(!same(got[i],want[i])){ if(bad<3) printf("  %s [%zu]: got %g want %g\n",name,i,got[i],want[i]); bad++; }
    printf("%s: %zu elems, %d differ\n",name,want.size(),bad); if(bad) fails++;
}
int main(){
    struct C{bool fp4; int m,k,n,rbl;};
    std::vector<C> cs={{false,1,1000,77,0},{false,3,1000,77,2},{false,8,200,33,2},{false,1,5120,40,1},{false,2,48,3,1},{true,1,1000,77,3},{true,3,80,40,2},{true,8,4100,9,2},{true,1,5120,64,5},{false,1,4100,37,5},{true,2,64,1,0}};
    for(auto c: cs) for (int full32 = 0; full32 < 2; full32++) {
        int kb=(c.k+31)/32;
        // fake-quantised activations (the fused multiply-add path) or full
        // fp32 ones (products inexact: the separate path)
        std::vector<float> a(c.m*c.k); for(auto& x:a) x = full32 ? qact()*(1.0f+(rng()%65536)/16777216.0f) : qact();
        size_t wb = c.fp4 ? (size_t)c.n*c.k/2 : (size_t)c.n*c.k;
        std::vector<unsigned char> w(wb+64); for(auto& x:w) x=rng()&0xff;
        if(!c.fp4){ for(auto& x: w) if((x&0x7f)==0x7f) x^=1; w[5]=0x7f; if(wb>c.k+9) w[c.k+9]=0xff; }
        size_t sb = c.fp4 ? (size_t)c.n*kb : (size_t)((c.n+31)/32)*kb;
        std::vector<unsigned char> s(sb); for(auto& x:s) x=118+rng()%12;
        std::vector<float> want(c.m*c.n), got(c.m*c.n, -12345.0f);
        refbs(c.fp4, want.data(), a.data(), c.m, c.k, w.data(), s.data(), c.n);
        int rb=1<<c.rbl; dim3 g={(unsigned)((c.n+rb-1)/rb),1,1};
        auto run=[&]{ if(c.fp4){ if(c.m==1) gemv_fp4_m1(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else if(c.m<=2) gemv_fp4_m2(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else if(c.m<=4) gemv_fp4_m4(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else gemv_fp4_m8(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl);}
            else { if(c.m==1) gemv_fp8_m1(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else if(c.m<=2) gemv_fp8_m2(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else if(c.m<=4) gemv_fp8_m4(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl); else gemv_fp8_m8(got.data(),a.data(),c.m,c.k,w.data(),s.data(),c.n,c.rbl);} };
        launch(g,{256,1,1},run);
        char name[128]; snprintf(name,sizeof name,"bs fp4=%d m%d k%d n%d rb%d fp32 acts %d",c.fp4,c.m,c.k,c.n,rb,full32);
        check(name,got,want);
    }
    // routed + swiglu (fp4 and fp8), one bad id
    for (int fp4=0; fp4<2; fp4++) for (int rbl : {0, 2, 4}) {
        const int k = fp4 ? 5120 : 1000, n = 40, experts = 5, topk = 3, tokens = 2, rows = tokens*topk;
        int kb=(k+31)/32;
        size_t wPer = fp4 ? (size_t)n*k/2 : (size_t)n*k, sPer = fp4 ? (size_t)n*kb : (size_t)((n+31)/32)*kb;
        std::vector<unsigned char> w1(experts*wPer), w3(experts*wPer), s1(experts*sPer), s3(experts*sPer);
        for(auto* v: {&w1,&w3}) for(auto& x:*v){ x=rng()&0xff; if(!fp4 && (x&0x7f)==0x7f) x^=1; }
        for(auto* v: {&s1,&s3}) for(auto& x:*v) x=118+rng()%12;
        std::vector<float> a(tokens*k); for(auto& x:a) x=qact();
        std::vector<long long> ids={4,0,2,1,7,3};
        std::vector<float> rw(rows); for(auto& x: rw) x=(rng()%1000)/997.0f;
        std::vector<float> g(rows*n), u(rows*n), want(rows*n), got(rows*n,-1), got1(rows*n,-1);
        for(int q=0;q<rows;q++){ long long e=ids[q]; if(e<0||e>=experts){ for(int j=0;j<n;j++) g[q*n+j]=u[q*n+j]=NAN; continue; }
            refbs(fp4, &g[q*n], &a[(q/topk)*k], 1, k, &w1[e*wPer], &s1[e*sPer], n);
            refbs(fp4, &u[q*n], &a[(q/topk)*k], 1, k, &w3[e*wPer], &s3[e*sPer], n); }
        const float limit=10;
        for(int i=0;i<rows*n;i++){ float gv=gomin(g[i],limit); float ex=expf32(-gv); float uv=gomin(gomax(u[i],-limit),limit); float h=gv/(1.0f+ex)*uv; h=rw[i/n]*h; want[i]=bf16r(h); }
        int rb=1<<rbl; dim3 gr={(unsigned)((n+rb-1)/rb),(unsigned)rows,1};
        launch(gr,{256,1,1},[&]{ if(fp4) gemv_routed_fp4(got1.data(),a.data(),topk,k,w1.data(),wPer,s1.data(),sPer,n,ids.data(),experts,rbl); else gemv_routed_fp8(got1.data(),a.data(),topk,k,w1.data(),wPer,s1.data(),sPer,n,ids.data(),experts,rbl); });
        char name[128]; snprintf(name,sizeof name,"routed fp4=%d rb%d",fp4,rb); check(name,got1,g);
        launch(gr,{256,1,1},[&]{ if(fp4) gemv_routed_swiglu_fp4(got.data(),a.data(),topk,k,w1.data(),s1.data(),w3.data(),s3.data(),wPer,sPer,n,ids.data(),experts,limit,rw.data(),rbl); else gemv_routed_swiglu_fp8(got.data(),a.data(),topk,k,w1.data(),s1.data(),w3.data(),s3.data(),wPer,sPer,n,ids.data(),experts,limit,rw.data(),rbl); });
        snprintf(name,sizeof name,"routed swiglu fp4=%d rb%d",fp4,rb); check(name,got,want);
    }
    // plain: bf16, f32, fp8 widened, grouped
    for (int fmt=0; fmt<3; fmt++) for (int m : {1, 3, 8}) for (int k : {64, 1000, 1001}) {
        const int n = 45, groups = fmt==2 ? 3 : 1;
        std::vector<float> a(m*groups*k); for(auto& x:a) x=bf16r((float)((int)(rng()%2001)-1000)/313.0f);
        std::vector<float> wf(groups*n*k); std::vector<unsigned short> wb(groups*n*k); std::vector<unsigned char> w8(groups*n*k), s8(((groups*n+31)/32)*((k+31)/32));
        for(auto& x:s8) x=118+rng()%12;
        int kb=(k+31)/32;
        for(size_t i=0;i<wf.size();i++){ size_t row=i/k, c=i%k;
            if(fmt==0){ wb[i]=rng()&0xffff; if(((wb[i]>>7)&0xff)==0xff) wb[i]&=0xbfff; wf[i]=bf16w(wb[i]); }
            else if(fmt==1){ wf[i]=(float)((int)(rng()%100001)-50000)/77777.0f; }
            else { w8[i]=rng()&0xff; if(i==3) w8[i]=0x7f; wf[i]=bf16r(e4m3v(w8[i])*e8m0v(s8[(row/32)*kb+c/32])); } }
        std::vector<float> want(m*groups*n), got(m*groups*n,-1);
        for(int z=0;z<groups;z++) for(int i=0;i<m;i++) for(int j=0;j<n;j++){ float acc=0; for(int c=0;c<k;c++) acc += a[(size_t)i*groups*k + z*k + c]*wf[((size_t)z*n+j)*k+c]; want[(size_t)i*groups*n + z*n + j] = bf16r(acc); }
        const int lda=groups*k, ldo=groups*n;
        for(int bs: {32, 64}){
        dim3 gr={(unsigned)((n+bs-1)/bs),1,(unsigned)groups};
        launch(gr,{(unsigned)bs,1,1},[&]{
            if(fmt==0){ if(m==1) gemv_plain_m1_bf16w(got.data(),a.data(),m,k,wb.data(),n,lda,ldo,k,n,1); else if(m==3) gemv_plain_m4_bf16w(got.data(),a.data(),m,k,wb.data(),n,lda,ldo,k,n,1); else gemv_plain_m8_bf16w(got.data(),a.data(),m,k,wb.data(),n,lda,ldo,k,n,1);}
            else if(fmt==1){ if(m==1) gemv_plain_m1_f32w(got.data(),a.data(),m,k,wf.data(),n,lda,ldo,k,n,1); else if(m==3) gemv_plain_m4_f32w(got.data(),a.data(),m,k,wf.data(),n,lda,ldo,k,n,1); else gemv_plain_m8_f32w(got.data(),a.data(),m,k,wf.data(),n,lda,ldo,k,n,1);}
            else { if(m==1) gemv_plain_m1_fp8w(got.data(),a.data(),m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1); else if(m==3) gemv_plain_m4_fp8w(got.data(),a.data(),m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1); else gemv_plain_m8_fp8w(got.data(),a.data(),m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1);} });
        char name[128]; snprintf(name,sizeof name,"plain fmt%d m%d k%d groups%d bs%d",fmt,m,k,groups,bs); check(name,got,want);
        }
    }
    // the producer/consumer fp8w kernel (grouped, k % 16 == 0)
    for (int m : {1, 3}) for (int k : {64, 272, 1024}) for (int n : {45, 64}) {
        const int groups = 3, kb = (k+31)/32;
        std::vector<float> a(m*groups*k); for(auto& x:a) x=bf16r((float)((int)(rng()%2001)-1000)/313.0f);
        std::vector<unsigned char> w8(groups*n*k), s8(((groups*n+31)/32)*kb); std::vector<float> wf(groups*n*k);
        for(auto& x:s8) x=118+rng()%12;
        for(size_t i=0;i<w8.size();i++){ size_t row=i/k, c=i%k; w8[i]=rng()&0xff; if(i==17) w8[i]=0xff; wf[i]=bf16r(e4m3v(w8[i])*e8m0v(s8[(row/32)*kb+c/32])); }
        std::vector<float> want(m*groups*n), got(m*groups*n,-1);
        for(int z=0;z<groups;z++) for(int i=0;i<m;i++) for(int j=0;j<n;j++){ float acc=0; for(int c=0;c<k;c++) acc += a[(size_t)i*groups*k + z*k + c]*wf[((size_t)z*n+j)*k+c]; want[(size_t)i*groups*n + z*n + j] = bf16r(acc); }
        const int lda=groups*k, ldo=groups*n;
        dim3 gr={(unsigned)((n+31)/32),1,(unsigned)groups};
        launch(gr,{128,1,1},[&]{ if(m==1) gemv_pc_m1_fp8w(got.data(),a.data(),m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1); else gemv_pc_m4_fp8w(got.data(),a.data(),m,k,w8.data(),s8.data(),n,lda,ldo,k,n,1); });
        char name[128]; snprintf(name,sizeof name,"pc fp8w m%d k%d n%d groups%d",m,k,n,groups); check(name,got,want);
    }
    printf("fails=%d\n",fails); return fails!=0;
}
