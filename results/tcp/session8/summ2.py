import sys, statistics as st, collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    p=line.split()
    if len(p)<6: continue
    d[p[1]][p[2]].append(float(p[3]))
for lab,v in d.items():
    print(lab, {k:(len(x), round(st.median(x),2)) for k,x in sorted(v.items())})
