#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <stdint.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t sz=300ul<<20; int mode=atoi(argv[1]);
  double t0=now();
  int flags=MAP_PRIVATE|MAP_ANONYMOUS|(mode==3?MAP_POPULATE:0);
  size_t map=sz+(2<<20);
  char*p=mmap(0,map,PROT_READ|PROT_WRITE,flags,-1,0);
  p=(char*)(((uintptr_t)p+(2<<20)-1)&~((uintptr_t)(2<<20)-1));
  if(mode==1) madvise(p,sz,MADV_HUGEPAGE);
  if(mode==2) { if(madvise(p,sz,MADV_POPULATE_WRITE)) perror("populate"); }
  if(mode==4) { madvise(p,sz,MADV_HUGEPAGE); madvise(p,sz,MADV_POPULATE_WRITE);}
  double t1=now();
  for(size_t i=0;i<sz;i+=4096) p[i]=1;
  double t2=now();
  // memcpy cost of the same bytes into the now-resident memory, as a reference (recv writes them)
  static char src[1<<20]; memset(src,1,sizeof src);
  for(size_t i=0;i<sz;i+=sizeof src) memcpy(p+i,src,sizeof src);
  double t3=now();
  printf("mode %d: setup %.1f ms, touch %.1f ms, total fault %.1f ms = %.3f us/KiB; memcpy 300MiB %.1f ms\n",mode,(t1-t0)*1e3,(t2-t1)*1e3,(t2-t0)*1e3,(t2-t0)*1e6/(sz/1024),(t3-t2)*1e3);
}
