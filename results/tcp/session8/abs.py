import sys, statistics as st, collections
runs=collections.defaultdict(list)
for line in open(sys.argv[1]):
    p=line.split()
    runs[(p[0],p[1])].append(float(p[4]))
d=collections.defaultdict(lambda: collections.defaultdict(list))
for (r,lab),v in runs.items():
    for i in range(1,len(v)-1):
        w=v[i-1:i+2]
        c='shared' if min(w)>35 else ('apart' if max(w)<28 else None)
        if c: d[c][lab].append(v[i])
for c in ('shared','apart'):
    print(c, {lab:(len(x), round(st.median(x),2)) for lab,x in d[c].items()})
