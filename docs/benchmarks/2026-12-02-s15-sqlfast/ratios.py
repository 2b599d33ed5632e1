import sys,re
def parse(f):
    sec=None; d={}
    for line in open(f):
        if line.startswith('== '): sec=line[3:].split(':')[0].strip(); continue
        if sec in ('uncontended','contended','many-keys') and (line.startswith('postgres') or line.startswith('mysql')):
            name=re.split(r'\s{2,}',line.strip())[0]
            cols=re.split(r'\s{2,}',line.strip())[1:]
            d[(sec,name)]=cols
    return d
for f in sys.argv[1:]:
    d=parse(f)
    print(f)
    for db,peer in (('postgres','pg_advisory_lock'),('mysql','GET_LOCK')):
        s=db+': distlock session'; p=db+': '+peer; r=db
        u=[float(d[('uncontended',x)][0]) for x in (s,p,r)]
        c=[float(d[('contended',x)][0]) for x in (s,p,r)]
        cs=[d[('contended',x)][6] for x in (s,p)]
        m=[float(d[('many-keys',x)][0]) for x in (s,p,r)]
        rt=[d[('uncontended',x)][3] for x in (s,p)]
        print(f"  {db}: uncont p50 session {u[0]} peer {u[1]} ratio {u[0]/u[1]:.2f}x (row {u[2]}); one key {c[0]:.0f} vs {c[1]:.0f} = {c[0]/c[1]:.2f}x share {cs[0]}/{cs[1]} (row {c[2]:.0f}); many keys {m[0]:.0f} vs {m[1]:.0f} = {m[0]/m[1]:.2f}x (row {m[2]:.0f}); rt {rt}")
