// Throwaway: allocation layout only. lay2 <path> <ends KiB, comma list; then +16 MiB steps> <blocks> [sync]
// Writes 4 KiB O_DIRECT blocks in order; before a write past the allocated end, fallocate(0, next end).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int c,char**v){
  const char*p=v[1];char pat[256];strcpy(pat,v[2]);int n=atoi(v[3]);int sync=c>4;
  long ends[32];int ne=0;for(char*t=strtok(pat,",");t;t=strtok(0,","))ends[ne++]=atol(t)*1024;
  unlink(p);int fd=open(p,O_RDWR|O_CREAT|O_DIRECT,0644);
  void*buf;posix_memalign(&buf,4096,4096);memset(buf,7,4096);
  long alloc=0;int ei=0;
  for(int i=0;i<n;i++){long end=(long)(i+1)*4096;
    while(end>alloc){long target=ei<ne?ends[ei]:alloc+(16L<<20);ei++; if(target<=alloc)continue;
      if(getenv("TRIM")&&ei==1){ if(fallocate(fd,0,0,16L<<20)){perror("f16");return 1;} if(ftruncate(fd,target)){perror("trunc");return 1;} fdatasync(fd);} 
      if(fallocate(fd,0,0,target)){perror("fallocate");return 1;} alloc=target;}
    if(pwrite(fd,buf,4096,(long)i*4096)!=4096){perror("pwrite");return 1;}
    if(sync&&fdatasync(fd)){perror("fdatasync");return 1;}}
  fsync(fd);
  char cmd[8192];snprintf(cmd,sizeof cmd,"filefrag -v %s | awk '/^ *[0-9]+:/{n++} END{print n, \"records\"}'",p);
  printf("%-26s ",v[2]);fflush(stdout);system(cmd);
  unlink(p);return 0;}
