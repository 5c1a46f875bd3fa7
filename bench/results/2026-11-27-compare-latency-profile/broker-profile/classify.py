import collections,sys
samples=open(sys.argv[1]).read().split('\n\n')
c=collections.Counter(); n=0
for s in samples:
    lines=[l for l in s.split('\n') if l.strip()]
    if len(lines)<2: continue
    n+=1
    comm=lines[0].split()[0]
    fr=[l.strip().split(None,1) for l in lines[1:]]
    fr=[(a, b if len(b:=x[1] if len(x)>1 else '') else '') for x in fr for a in [x[0]]]
    if not fr[0][0].startswith('ffffffff'):
        cls='user'
    else:
        names=[b for a,b in fr]
        if any(x.startswith('asm_sysvec') or 'common_interrupt' in x for x in names): cls='kernel: interrupt'
        elif any('exit_to_user_mode' in x for x in names) and not any('entry_SYSCALL' in x for x in names): cls='kernel: preemption/return to user'
        else:
            u=[b for a,b in fr if not a.startswith('ffffffff')]
            cls='kernel via '+(u[0] if u else '?')
    if comm.startswith('starling-hires'): cls='[timer thread] '+cls
    c[cls]+=1
for key,v in c.most_common(14): print(f"{100*v/n:5.1f}%  {key}")
print(n,'samples')
