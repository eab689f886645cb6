// Throwaway: 4 KiB O_DIRECT pwrite + fdatasync on a 64 MiB fallocated file; `holes` single blocks
// at spread positions are punched and reallocated elsewhere first (so the file is in ~2*holes+1
// unwritten extents). holes<0: no fallocate at all (each write extends the file).
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
static long now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
int main(int c,char**v){
  const char*p=v[1];int holes=atoi(v[2]);int n=atoi(v[3]);long size=64L<<20;
  char sp[4096];snprintf(sp,sizeof sp,"%s.filler",p);
  unlink(p);unlink(sp);
  int fd=open(p,O_RDWR|O_CREAT|O_DIRECT,0644);
  if(holes>=0){
    if(fallocate(fd,0,0,size)){perror("fallocate");return 1;}
    int sfd=open(sp,O_RDWR|O_CREAT,0644);
    if(fallocate(sfd,0,0,64L<<20)){perror("filler");return 1;}
    for(int i=1;i<=holes;i++){long off=(long)i*(16L<<20)/ (holes+1) /4096*4096 + (n*4096L/(holes+1))*0;
      off=(long)i*(n*4096L)/(holes+1)/4096*4096; // holes spread over the written range
      if(fallocate(fd,FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE,off,4096)){perror("punch");return 1;}
      if(fallocate(sfd,0,(64L<<20)+(long)i*4096*64,4096*64)){perror("f2");return 1;}
      if(fallocate(fd,0,off,4096)){perror("refill");return 1;}}
    close(sfd);
  }
  fsync(fd);
  char cmd[8192];snprintf(cmd,sizeof cmd,"filefrag %s",p);fflush(stdout);system(cmd);
  void*buf;posix_memalign(&buf,4096,4096);memset(buf,7,4096);
  long*t=malloc(n*sizeof(long));
  for(int i=0;i<n;i++){long a=now();
    if(pwrite(fd,buf,4096,(long)i*4096)!=4096){perror("pwrite");return 1;}
    if(fdatasync(fd)){perror("fdatasync");return 1;}
    t[i]=now()-a;}
  qsort(t,n,sizeof(long),cmp);
  printf("holes %d: p50 %ld us p90 %ld us\n",holes,t[n/2]/1000,t[n*9/10]/1000);
  system(cmd);
  unlink(p);unlink(sp);return 0;}
