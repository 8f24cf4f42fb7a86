import collections, statistics as st, sys
rounds=collections.defaultdict(dict)
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)<4: continue
    rounds[p[0]][p[1]]=(p[2],float(p[3]))
for cls in 'FS':
    for a,b in (('adaptive','smol'),('off','smol'),('adaptive','off')):
        r=[v[a][1]/v[b][1] for v in rounds.values() if a in v and b in v and v[a][0]==cls and v[b][0]==cls]
        print(cls, a, b, len(r), round(st.median(r),3) if r else None)
