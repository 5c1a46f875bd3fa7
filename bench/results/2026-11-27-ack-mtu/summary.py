import sys,collections,statistics
rows=[l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
by=collections.defaultdict(dict)
for w,cfg,t,rate,p50,p99,p999,lost,b,c,load in rows:
    if rate=='FAIL': continue
    by[(w,t)][cfg]=(float(rate),float(p50),float(p99),float(p999),int(lost),float(b or 0),float(c or 0))
ws=[]; [ws.append(r[0]) for r in rows if r[0] not in ws]
cfgs=[]; [cfgs.append(r[1]) for r in rows if r[1] not in cfgs]
print('| workload | config | trials | median rate | median p50 µs | median p99 µs | median p99.9 µs | rate ratio vs none (per trial) | p99 ratio vs none (per trial) | lost |')
print('|---|---|---|---|---|---|---|---|---|---|')
for w in ws:
    for cfg in cfgs:
        ts=[t for (ww,t) in by if ww==w and cfg in by[(ww,t)]]
        vals=[by[(w,t)][cfg] for t in ts]
        if not vals: continue
        med=lambda i: statistics.median(v[i] for v in vals)
        rr=[by[(w,t)][cfg][0]/by[(w,t)]['none'][0] for t in ts if 'none' in by[(w,t)]]
        pr=[by[(w,t)][cfg][2]/by[(w,t)]['none'][2] for t in ts if 'none' in by[(w,t)]]
        f=lambda xs: ', '.join('%.2f'%x for x in xs)+(' → **%.2f**'%statistics.median(xs) if xs else '')
        print('| %s | %s | %d | %.1fk | %.0f | %.0f | %.0f | %s | %s | %d |'%(w,cfg,len(vals),med(0)/1000,med(1),med(2),med(3), f(rr) if cfg!='none' else '', f(pr) if cfg!='none' else '', sum(v[4] for v in vals)))
