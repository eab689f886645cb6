// Probe: paced 4 KiB O_DIRECT write + fdatasync (2000/s) beside a QD1 O_DIRECT reader of piece P.
// modes: 0 no reader, 1 ungated reader, 2 gate whole flush, 3 gate write only (reads during fdatasync)
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdatomic.h>
static int mode; static size_t piece; static double secs; static long period_us = 500;
static atomic_int flushing; static atomic_long ended; static atomic_int stop;
static long long rbytes; static const char *rpath, *wpath;
static long long now_ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void *reader(void *a){
  pin(1);
  int fd=open(rpath,O_RDONLY|O_DIRECT); if(fd<0){perror("r");exit(1);}
  off_t size=lseek(fd,0,SEEK_END); void *buf; posix_memalign(&buf,4096,piece);
  off_t pos=0;
  while(!atomic_load(&stop)){
    if(mode>=2){ long e0=atomic_load(&ended); while(atomic_load(&flushing) && atomic_load(&ended)==e0 && !atomic_load(&stop)) ; }
    if(pos+piece>size) pos=0;
    ssize_t n=pread(fd,buf,piece,pos); if(n<=0){perror("pread");exit(1);} pos+=n; rbytes+=n;
  }
  return 0;
}
static int cmp(const void*a,const void*b){long long x=*(long long*)a,y=*(long long*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  if(argc<6){fprintf(stderr,"probe mode piece_kib secs readfile writefile [period_us]\n");return 1;}
  mode=atoi(argv[1]); piece=atol(argv[2])*1024; secs=atof(argv[3]); rpath=argv[4]; wpath=argv[5]; if(argc>6) period_us=atol(argv[6]);
  int wfd=open(wpath,O_RDWR|O_CREAT|O_TRUNC|O_DIRECT,0644); if(wfd<0){perror("w");return 1;}
  if(getenv("PREALLOC") && fallocate(wfd,0,0,256<<20)){perror("fallocate");}
  fsync(wfd);
  void *wb; posix_memalign(&wb,4096,4096); memset(wb,'x',4096);
  pthread_t th; if(mode>0) pthread_create(&th,0,reader,0);
  pin(0);
  long n=(long)(secs*1e6/period_us); long long *lat=malloc(n*sizeof *lat), *wl=malloc(n*sizeof *wl);
  usleep(200000);
  long long t0=now_ns(), rb0=rbytes; off_t wpos=0; long long sum=0, wsum=0;
  for(long i=0;i<n;i++){
    long long due=t0+(long long)i*period_us*1000; while(now_ns()<due);
    long long s=now_ns();
    atomic_store(&flushing,1);
    if(pwrite(wfd,wb,4096,wpos)!=4096){perror("pwrite");return 1;}
    long long w=now_ns();
    if(mode==3){atomic_store(&flushing,0);atomic_fetch_add(&ended,1);}
    if(fdatasync(wfd)){perror("fdatasync");return 1;}
    if(mode!=3){atomic_store(&flushing,0);atomic_fetch_add(&ended,1);}
    long long e=now_ns();
    lat[i]=(e-s)/1000; wl[i]=(w-s)/1000; sum+=lat[i]; wsum+=wl[i]; wpos+=4096; if(wpos>=(256<<20)) wpos=0;
  }
  long long t1=now_ns(); long long rb=rbytes-rb0; atomic_store(&stop,1); if(mode>0) pthread_join(th,0);
  qsort(lat,n,sizeof *lat,cmp);
  printf("mode %d piece %zuK: flush mean %lld us (write %lld) p50 %lld p90 %lld p99 %lld busy %.0f%% | reader %.0f MB/s\n",
    mode,piece/1024,sum/n,wsum/n,lat[n/2],lat[n*9/10],lat[n*99/100],100.0*sum/n/period_us,rb/((t1-t0)/1e3));
  return 0;
}
