// dev microbench: 4 KiB O_DIRECT write + fdatasync latency while another thread reads
// O_DIRECT chunks of a given size back to back (queue depth given by threads).
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
static atomic_int stop; static atomic_int flushing; static int gated;
static size_t chunk; static int rfd; static off_t fsize; static atomic_long readbytes;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void* reader(void* arg){ long id=(long)arg; void* buf; posix_memalign(&buf,4096,chunk); off_t pos=(id*fsize/4)&~(off_t)4095;
  while(!atomic_load(&stop)){ if(pos+chunk>fsize) pos=0; while(gated && atomic_load(&flushing)) usleep(10); ssize_t n=pread(rfd,buf,chunk,pos); if(n<=0){perror("pread");exit(1);} pos+=n; atomic_fetch_add(&readbytes,n);} return 0;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){ chunk=atol(argv[1])*1024; int threads=atoi(argv[2]); int n=atoi(argv[3]); gated=argc>4;
  rfd=open("big.dat",O_RDONLY|O_DIRECT); fsize=lseek(rfd,0,SEEK_END);
  int wfd=open("wal.dat",O_WRONLY|O_CREAT|O_DIRECT,0644); void* wb; posix_memalign(&wb,4096,4096); memset(wb,1,4096);
  pthread_t t[16]; for(long i=0;i<threads;i++) pthread_create(&t[i],0,reader,(void*)i);
  usleep(200000); double* lat=malloc(n*sizeof(double)); double t0=now(); long rb0=atomic_load(&readbytes);
  for(int i=0;i<n;i++){ atomic_store(&flushing,1); double a=now(); pwrite(wfd,wb,4096,(i%2048)*4096); fdatasync(wfd); lat[i]=(now()-a)*1e6; atomic_store(&flushing,0); usleep(1000);}
  double el=now()-t0; long rb=atomic_load(&readbytes)-rb0; atomic_store(&stop,1); for(int i=0;i<threads;i++) pthread_join(t[i],0);
  qsort(lat,n,sizeof(double),cmp);
  printf("%s chunk %4zu KiB x%d: write+fdatasync p50 %6.0f p90 %6.0f p99 %6.0f us; reads %6.0f MB/s\n",gated?"gated":"     ",chunk/1024,threads,lat[n/2],lat[n*9/10],lat[n*99/100],rb/1e6/el);
}
