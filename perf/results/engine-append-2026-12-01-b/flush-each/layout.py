import os, mmap, time, subprocess, sys
d='/work/wt/structure/target/tmp'
W=4096; N=6144
buf=mmap.mmap(-1,W); buf.write(b'x'*W)
def run(mode):
    p=os.path.join(d,f'layout-{mode}')
    try: os.unlink(p)
    except FileNotFoundError: pass
    fd=os.open(p,os.O_CREAT|os.O_RDWR|os.O_DIRECT,0o644)
    alloc=0; step=0; lat=[]
    for i in range(N):
        end=(i+1)*W
        if end>alloc:
            if mode=='fixed':
                alloc=max(alloc+(16<<20), end); os.posix_fallocate(fd,0,alloc)
            else:
                step = 0 if i==0 else min(max(step*4, 64<<10), 16<<20)
                alloc=end+step
                if step: os.posix_fallocate(fd,0,alloc)
        s=time.perf_counter(); os.pwrite(fd,buf,i*W); os.fdatasync(fd); lat.append(time.perf_counter()-s)
    os.close(fd)
    out=subprocess.run(['filefrag','-v',p],capture_output=True,text=True).stdout
    ext=[l for l in out.splitlines() if l.strip()[:1].isdigit()]
    lat.sort()
    print(f"{mode:6s} p50 {lat[len(lat)//2]*1e6:.0f} us  extents {len(ext)}  {out.splitlines()[-1]}")
    os.unlink(p)
for r in range(2):
    for m in ['fixed','ramp']: run(m)
