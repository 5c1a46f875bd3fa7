import json, glob, os, statistics as st
base = '/work/main/bench/results/2026-11-27-mtu'
rows = []
for d in sorted(glob.glob(base + '/buf*-vs-*')):
    buf, a, b = os.path.basename(d).split('-')[0], *os.path.basename(d).split('-')[1:4:2]
    a, b = os.path.basename(d).split('-')[1], os.path.basename(d).split('-')[3]
    pairs = sorted({int(f.split('-p')[1].split('.')[0]) for f in glob.glob(d + '/*.json')})
    r_mb, r50, r99, detail = [], [], [], []
    for p in pairs:
        A = json.load(open(f'{d}/mtu{a}-p{p}.json'))['quic']
        B = json.load(open(f'{d}/mtu{b}-p{p}.json'))['quic']
        r_mb.append(B['bulk_mb_per_s'] / A['bulk_mb_per_s'])
        r50.append(B['rtt_us']['p50'] / A['rtt_us']['p50'])
        r99.append(B['rtt_us']['p99'] / A['rtt_us']['p99'])
        bp = B['bulk_path']; ap = A['bulk_path']
        ch = bp.get('mtu_changes', [])
        bh = next((c for c in ch if c['black_holes'] > 0), None)
        big = next((c for c in ch if c['mtu'] > 1452), None)
        phase = ''
        if bh and big:
            secs = (bh['ms'] - big['ms']) / 1e3
            phase = f"at>1452 {secs*1e3:.0f} ms {((bh['tx_bytes']-big['tx_bytes'])/secs/1e6):.0f} MB/s; "
        detail.append(f"p{p}: {A['bulk_mb_per_s']:.0f} vs {B['bulk_mb_per_s']:.0f} MB/s ({r_mb[-1]:.2f}); "
                      f"rtt p50 {A['rtt_us']['p50']:.0f}/{B['rtt_us']['p50']:.0f} p99 {A['rtt_us']['p99']:.0f}/{B['rtt_us']['p99']:.0f} µs; "
                      f"{a}: mtu {ap['current_mtu']} lost {ap['lost_packets']} bh {ap['black_holes']}; "
                      f"{b}: mtu {bp['current_mtu']} lost {bp['lost_packets']} bh {bp['black_holes']} "
                      + (f"@{bh['ms']:.0f} ms; " if bh else '; ') + phase)
    g = lambda xs: st.geometric_mean(xs)
    print(f"## buf={buf} {b} vs {a}: {len(pairs)} pairs; bulk ratio median {st.median(r_mb):.2f} (range {min(r_mb):.2f}-{max(r_mb):.2f}); "
          f"rtt p50 ratio median {st.median(r50):.2f} ({min(r50):.2f}-{max(r50):.2f}); p99 ratio median {st.median(r99):.2f} ({min(r99):.2f}-{max(r99):.2f})")
    for x in detail: print('   ', x)
