import sys, statistics as st, collections
runs=collections.OrderedDict()
for line in open(sys.argv[1]):
    if line.startswith("SLICE"):
        p=line.split(); runs.setdefault(p[-1] if len(p)>3 else 'x', []).append((int(p[1]),float(p[2])))
rs={'shared':[], 'apart':[], 'mid':[]}
for v in runs.values():
  for i in range(1,len(v)-1):
    on,g=v[i]
    if on!=1 or v[i-1][0]!=0 or v[i+1][0]!=0: continue
    off=(v[i-1][1]+v[i+1][1])/2
    lo=min(v[i-1][1],v[i+1][1],g); hi=max(v[i-1][1],v[i+1][1],g)
    cls='shared' if lo>35 else ('apart' if hi<30 else 'mid')
    rs[cls].append((g/off, g, off))
for k,x in rs.items():
    if x: print(k, len(x), "ratio median %.3f  on %.2f off %.2f" % (st.median(r for r,_,_ in x), st.median(g for _,g,_ in x), st.median(o for _,_,o in x)))
    else: print(k, 0)
