/* A spin loop that notes every gap over 20 us between two clock reads: time
   the CPU ran nothing of this loop (the hypervisor, interrupts, other
   threads). `spin SECONDS FILE`, pinned with taskset; `python3 floor.py` reads
   the files of several CPUs. */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){double dur=atof(v[1]);FILE*f=fopen(v[2],"w");double t0=now(),last=t0;
while(1){double t=now();double d=t-last; if(d>20e-6)fprintf(f,"%.9f %.9f\n",last,t); last=t; if(t-t0>dur)break;}
fprintf(f,"# %.9f %.9f\n",t0,last);fclose(f);}
