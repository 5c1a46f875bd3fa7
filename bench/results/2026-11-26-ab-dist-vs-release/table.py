import json,os,sys,statistics
# per-trial table from bench/ab raw JSON: msgs/s, after/before, p50/p99 ms, broker CPU µs per delivered msg
def fmt(x): return f"{x:,.0f}"
for d,label in [(sys.argv[1],"1"),(sys.argv[2],"2")]:
    for w in ["1p1s-256B","1p10s-4KB"]:
        rs=[];cs=[];t=1
        while os.path.exists(f"{d}/raw/{w}.before.{t}.json"):
            b=json.load(open(f"{d}/raw/{w}.before.{t}.json")); a=json.load(open(f"{d}/raw/{w}.after.{t}.json"))
            assert b["lost"]==0 and a["lost"]==0 and b["duplicates"]==0 and a["duplicates"]==0
            r=a["delivered_msgs_per_s"]/b["delivered_msgs_per_s"]; rs.append(r)
            cpu=lambda x: x["broker_cpu_s"]/(x["delivered_msgs_per_s"]*x["elapsed_s"])*1e6
            c=cpu(a)/cpu(b); cs.append(c)
            lat=lambda x: f"{x['latency_us']['p50']/1000:.0f}/{x['latency_us']['p99']/1000:.0f}"
            first = "release" if t%2 else "dist"
            print(f"| {label} | {w} | {t} | {first} | {fmt(b['delivered_msgs_per_s'])} | {fmt(a['delivered_msgs_per_s'])} | {r:.3f} | {lat(b)} | {lat(a)} | {cpu(b):.2f} → {cpu(a):.2f} ({c:.2f}) | {a['load_avg']} |")
            t+=1
        print(f"| {label} | **{w}** | median of {t-1} | | | | **{statistics.median(rs):.3f}** ({min(rs):.2f}–{max(rs):.2f}) | | | **{statistics.median(cs):.2f}** ({min(cs):.2f}–{max(cs):.2f}) | |")
